from __future__ import annotations

import threading
import time
import uuid

from tether import new_id


def test_uuid7_version_and_variant_bits() -> None:
    for _ in range(1000):
        u = uuid.UUID(new_id())
        assert u.version == 7
        assert u.variant == uuid.RFC_4122


def test_timestamp_is_unix_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    u = uuid.UUID(new_id())
    after = time.time_ns() // 1_000_000
    assert before <= u.int >> 80 <= after + 1


def test_strictly_increasing_within_a_millisecond() -> None:
    ids = [new_id() for _ in range(50_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    # many ids share a millisecond, yet are strictly ordered
    ms = [uuid.UUID(i).int >> 80 for i in ids]
    assert len(set(ms)) < len(ms)


def test_strictly_increasing_across_threads() -> None:
    out: list[list[str]] = [[] for _ in range(4)]

    def work(i: int) -> None:
        out[i].extend(new_id() for _ in range(5000))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [i for chunk in out for i in chunk]
    assert len(set(everything)) == len(everything)
    for chunk in out:
        assert chunk == sorted(chunk)
