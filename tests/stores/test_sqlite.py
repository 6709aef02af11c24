"""SQLiteStore on real files: WAL, crash safety under SIGKILL, and several writer processes."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether import StoreError, user
from tether.stores import SQLiteStore

CHILD = Path(__file__).with_name("_child.py")
OWNER = "owner"
_TAG = re.compile(r"^(B\d+\.\d+):(\d+)/(\d+) ")


async def test_file_is_wal_and_calls_run_off_the_event_loop(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "t.db") as store:
        cid = await store.create(OWNER)
        # the loop keeps running while a store call is in flight on the store's thread
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await store.append(OWNER, cid, [user("x" * 200_000) for _ in range(50)])
        task.cancel()
        assert ticks > 1
    conn = sqlite3.connect(tmp_path / "t.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with pytest.raises(StoreError, match="closed"):
        await store.load(OWNER, cid)


async def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "missing-dir" / "t.db")
    with pytest.raises(StoreError, match="missing-dir"):
        await store.create(OWNER)
    await store.close()


def _check_batches(texts: list[str], where: str) -> int:
    """Every message belongs to a complete batch, in order; returns the number of batches."""
    batches = 0
    i = 0
    while i < len(texts):
        head = _TAG.match(texts[i])
        assert head is not None, f"{where}: message {i} is not a tagged batch message"
        assert head.group(2) == "0", f"{where}: message {i} does not start a batch"
        tag, size = head.group(1), int(head.group(3))
        group = texts[i : i + size]
        assert len(group) == size, f"{where}: batch {tag} is cut after {len(group)} of {size} messages"
        for j, text in enumerate(group):
            match = _TAG.match(text)
            assert match is not None, f"{where}: {text[:30]}"
            assert match.group(1, 2, 3) == (tag, str(j), str(size)), f"{where}: {text[:30]}"
        batches += 1
        i += size
    return batches


def test_sigkill_at_random_moments_leaves_whole_batches(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(1234)
    kills_while_writing = 0
    for seed in range(14):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "crash", str(db), str(seed)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        if seed % 4 == 3:  # sometimes while it is still opening / migrating
            time.sleep(rng.uniform(0.0, 0.15))
        else:
            assert child.stdout.readline().strip() == "ready"
            kills_while_writing += 1
            time.sleep(rng.uniform(0.02, 0.25))
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored_rows = conn.execute("SELECT count(*) FROM tether_messages").fetchone()[0]
    conn.close()

    async def verify() -> tuple[int, int]:
        async with SQLiteStore(db) as store:
            total = batches = 0
            for cid in ("c0", "c1", "c2"):
                loaded = await store.load(OWNER, cid)  # raises CorruptRecord on any bad row
                batches += _check_batches([m.text for m in loaded.messages], cid)
                total += loaded.version
            return total, batches

    total, batches = asyncio.run(verify())
    assert total == stored_rows  # no row beyond a conversation's committed version
    assert kills_while_writing >= 9
    assert batches >= kills_while_writing  # the children did write between kills


def test_eight_writer_processes_lose_no_update(tmp_path: Path) -> None:
    db = tmp_path / "writers.db"
    writers, per_writer = 8, 250

    async def setup() -> None:
        async with SQLiteStore(db) as store:
            await store.create(OWNER, "shared")

    asyncio.run(setup())
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), "writer", str(db), "shared", str(k), str(per_writer)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(writers)
    ]
    conflicts = 0
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0, out
        conflicts += int(out.split()[-1])

    async def texts() -> list[str]:
        async with SQLiteStore(db) as store:
            loaded = await store.load(OWNER, "shared")
            assert loaded.version == writers * per_writer
            return [m.text for m in loaded.messages]

    got = asyncio.run(texts())
    assert len(got) == writers * per_writer
    assert sorted(got) == sorted(f"{k}:{i}" for k in range(writers) for i in range(per_writer))
    for k in range(writers):
        assert [t for t in got if t.startswith(f"{k}:")] == [f"{k}:{i}" for i in range(per_writer)]
    assert conflicts > 0  # the writers really raced
