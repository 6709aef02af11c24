"""Identifiers: UUID version 7 (RFC 9562), time-ordered and strictly increasing per process."""

from __future__ import annotations

import os
import threading
import time
import uuid

__all__ = ["new_id"]

_lock = threading.Lock()
_last_ms = 0
_last_counter = 0
_COUNTER_BITS = 42  # 12 bits of rand_a + the top 30 bits of rand_b: RFC 9562 method 1
_COUNTER_MAX = (1 << _COUNTER_BITS) - 1


def new_id() -> str:
    """A UUIDv7 string: 48-bit Unix milliseconds, then a monotonic counter seeded at random.

    Within one millisecond the counter increments, so ids from one process are strictly
    increasing; if the clock steps back the last timestamp is reused (never a smaller id).
    """
    global _last_ms, _last_counter
    tail = int.from_bytes(os.urandom(4), "big")  # low 32 bits of rand_b: random
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            # seed with a random value in the lower half so many increments fit in one ms
            counter = int.from_bytes(os.urandom(6), "big") & (_COUNTER_MAX >> 1)
        else:
            ms = _last_ms
            counter = _last_counter + 1
            if counter > _COUNTER_MAX:
                ms += 1
                counter = 0
        _last_ms, _last_counter = ms, counter
    rand_a = counter >> 30
    rand_b_high = counter & ((1 << 30) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= rand_a << 64
    value |= 0b10 << 62
    value |= rand_b_high << 32
    value |= tail
    return str(uuid.UUID(int=value))
