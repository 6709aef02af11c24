"""SQLiteStore on real files: WAL, crash safety under SIGKILL, and several writer processes."""

from __future__ import annotations

import asyncio
import queue
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from tether import NotFound, StoreError, user
from tether.stores import SQLiteStore
from tether.stores._rows import RowCodec
from tether.stores.sqlite._schema import connect as sqlite_connect

CHILD = Path(__file__).with_name("_child.py")
OWNER = "owner"
_TAG = re.compile(r"^(B\d+\.\d+):(\d+)/(\d+) ")
_LINE_TIMEOUT = 60.0  # generous: a child prints a line every millisecond or so


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


async def test_a_cancelled_call_still_finishes_and_the_store_keeps_working(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "t.db") as store:
        cid = await store.create(OWNER)
        batch = [user("x" * 100_000) for _ in range(20)]
        pending = asyncio.ensure_future(store.append(OWNER, cid, batch))
        await asyncio.sleep(0)  # the append runs up to its hand-over to the store's thread
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        # a handed-over call is not withdrawn: calls run in order, the batch committed whole
        loaded = await store.load(OWNER, cid)
        assert loaded.version == 20
        assert loaded.messages == tuple(batch)
        version = await store.append(OWNER, cid, [user("after")], expected_version=loaded.version)
        assert version == loaded.version + 1
        with pytest.raises(NotFound):
            await store.append("intruder", cid, [user("x")], expected_version=version)


async def test_unopenable_path_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "missing-dir" / "t.db")
    with pytest.raises(StoreError, match="missing-dir"):
        await store.create(OWNER)
    await store.close()


def _check_batches(texts: list[str], where: str) -> list[str]:
    """Every message belongs to a complete batch, in order; returns the batches' tags."""
    tags: list[str] = []
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
        tags.append(tag)
        i += size
    return tags


def _reader(stream: IO[str]) -> queue.Queue[str | None]:
    """The stream's lines, read on a thread so the test can wait with a timeout; ``None`` at EOF."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _next_line(lines: queue.Queue[str | None], seed: int) -> str:
    try:
        line = lines.get(timeout=_LINE_TIMEOUT)
    except queue.Empty:
        pytest.fail(f"child {seed} printed nothing for {_LINE_TIMEOUT} s")
    assert line is not None, f"child {seed} exited before it was killed"
    return line


def test_sigkill_mid_write_leaves_whole_batches_and_every_committed_one(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    rng = random.Random(1234)
    kills_while_writing = 0
    committed: set[str] = set()  # batches a child reported as stored before it was killed
    for seed in range(14):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "crash", str(db), str(seed)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        try:
            if seed % 4 == 3:  # sometimes while it is still opening / migrating (no assertion on where)
                time.sleep(rng.uniform(0.0, 0.15))
            else:
                # kill after a chosen number of committed batches: the child is then mid-loop
                lines = _reader(child.stdout)
                assert _next_line(lines, seed) == "ready"
                for _ in range(rng.randint(60, 700)):
                    tag = _next_line(lines, seed)
                    assert tag.startswith(f"B{seed}."), tag
                    committed.add(tag)
                kills_while_writing += 1
        finally:
            child.send_signal(signal.SIGKILL)
            returncode = child.wait(timeout=10)
        assert returncode == -signal.SIGKILL

    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored_rows = conn.execute("SELECT count(*) FROM tether_messages").fetchone()[0]
    conn.close()

    async def verify() -> tuple[int, set[str]]:
        async with SQLiteStore(db) as store:
            total = 0
            tags: set[str] = set()
            for cid in ("c0", "c1", "c2"):
                loaded = await store.load(OWNER, cid)  # raises CorruptRecord on any bad row
                tags.update(_check_batches([m.text for m in loaded.messages], cid))
                total += loaded.version
            return total, tags

    total, stored = asyncio.run(verify())
    assert total == stored_rows  # no row beyond a conversation's committed version
    assert kills_while_writing == 11
    assert len(committed) >= 11 * 60
    assert committed <= stored  # an append that returned survives the kill


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


def test_connections_opening_one_new_file_at_once_all_open(tmp_path: Path) -> None:
    """Switching a new file to WAL needs it to itself, and SQLite answers "database is locked" at
    once (no busy wait) to a connection that meets another one opening or migrating it: every
    store must still open, as two processes starting on one new database do."""
    errors: list[BaseException] = []
    for round_ in range(60):
        path = str(tmp_path / f"race{round_}.db")
        barrier = threading.Barrier(6)

        def open_one(path: str = path, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                conn = sqlite_connect(path, 30.0, "NORMAL", 0, RowCodec(None))
                conn.execute("BEGIN")  # a reader in the way of the next one's switch
                conn.execute("SELECT count(*) FROM tether_migrations").fetchone()
                conn.execute("COMMIT")
                conn.close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
