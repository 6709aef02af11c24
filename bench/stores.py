"""Store benchmark: tether's stores beside the OpenAI Agents SDK ``SQLiteSession``.

    python -m bench.stores [--quick]
    python -m bench.stores --smoke    # every measurement once at a small size: that it runs

Same content for both: the shared generator's conversation; the SDK gets it converted to simple
Responses-style dict items (one item per message part). Measures (issue 5 targets in brackets):
append and load speed against ``SQLiteSession.add_items``/``get_items`` [>= 3x]; appending k
messages at 100 and at 100,000 prior messages [O(k): same cost]; loading 10,000 messages against
``tether.loads`` of the same bytes [<= 1.5x]; PostgreSQL throughput with 8 concurrent writers.
PostgreSQL: ``TETHER_TEST_POSTGRES_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``).
"""

from __future__ import annotations

import asyncio
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import tether
from bench.generator import conversation
from tether import Message, Reasoning, Text, ToolCall, ToolResult
from tether.stores import PostgresStore, SQLiteStore

OWNER = "bench"
Sync = Literal["NORMAL", "FULL"]
SYNCS: tuple[Sync, ...] = ("NORMAL", "FULL")
DSN = os.environ.get("TETHER_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
SMOKE = False
"""``--smoke``: every timing loop runs once."""


def to_items(messages: list[Message]) -> list[dict[str, Any]]:
    """The same content as simple Responses-API-style dict items (what SQLiteSession stores)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, Text):
                items.append({"role": m.role, "content": p.text})
            elif isinstance(p, Reasoning):
                items.append(
                    {
                        "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": p.text}],
                        "id": p.signature,
                    }
                )
            elif isinstance(p, ToolCall):
                items.append(
                    {"type": "function_call", "call_id": p.id, "name": p.name, "arguments": p.arguments}
                )
            elif isinstance(p, ToolResult):
                items.append({"type": "function_call_output", "call_id": p.call_id, "output": p.text})
    return items


def turns(messages: list[Message]) -> list[list[Message]]:
    """Split into batches the way an agent appends: one batch per user turn."""
    out: list[list[Message]] = []
    for m in messages:
        if m.role == "user" or not out:
            out.append([])
        out[-1].append(m)
    return out


async def best(fn: Callable[[], Awaitable[Any]], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs (the machine may be shared), each after a full collection."""
    times: list[float] = []
    for _ in range(1 if SMOKE else repeat):
        gc.collect()
        t = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t)
    return min(times)


async def race(
    a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]], rounds: int = 5
) -> tuple[float, float]:
    """Fastest times of ``a`` and ``b`` measured in alternation (contention hits both alike)."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(1 if SMOKE else rounds):
        ta.append(await best(a, 1))
        tb.append(await best(b, 1))
    return min(ta), min(tb)


def line(name: str, value: str, note: str = "") -> None:
    print(f"  {name:<58} {value:>14}  {note}")


async def append_and_load(tmp: Path, n: int) -> None:
    from agents import SQLiteSession  # the comparison library is a bench-only dependency

    messages = conversation(n, seed=1)
    batches = turns(messages)
    item_batches = [to_items(b) for b in batches]
    print(
        f"\nappend {n} messages ({sum(map(len, item_batches))} SDK items) as {len(batches)} turns, "
        "then load them (file databases; each side hops to a thread per call)"
    )

    class NormalSession(SQLiteSession):
        """The SDK session with synchronous=NORMAL, to compare at equal durability."""

        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            SQLiteSession._configure_connection(conn)  # pyright: ignore[reportPrivateUsage]
            conn.execute("PRAGMA synchronous = NORMAL")

    session_n = 0

    def sdk_append(sync: Sync) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal session_n
            session_n += 1
            cls = SQLiteSession if sync == "FULL" else NormalSession
            session = cls(f"s{session_n}", tmp / f"sdk-append-{sync}.db")
            for b in item_batches:
                await session.add_items(b)  # pyright: ignore[reportArgumentType]
            session.close()

        return run

    stores = {sync: SQLiteStore(tmp / f"tether-append-{sync}.db", synchronous=sync) for sync in SYNCS}
    ids = {sync: await stores[sync].create(OWNER) for sync in SYNCS}

    def tether_append(sync: Sync) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            store, cid = stores[sync], ids[sync]
            version = (await store.info(OWNER, cid)).version
            for b in batches:
                version = await store.append(OWNER, cid, b, expected_version=version)

        return run

    # interleaved rounds: disk and CPU contention hit both contenders alike
    for sync in SYNCS:
        s_append, t_append = await race(sdk_append(sync), tether_append(sync), rounds=3)
        per = 1e6 / len(batches)
        line(
            f"synchronous={sync}: SDK SQLiteSession.add_items (msgs/s)",
            f"{n / s_append:,.0f}",
            f"{s_append * per:.0f} us/append",
        )
        line(
            f"synchronous={sync}: tether SQLiteStore.append (msgs/s)",
            f"{n / t_append:,.0f}",
            f"{t_append * per:.0f} us/append",
        )
        line("  append speed-up (target >= 3x)", f"{s_append / t_append:.1f}x")
    await stores["FULL"].close()
    store, cid = stores["NORMAL"], ids["NORMAL"]

    loaded = await store.load(OWNER, cid)
    assert loaded.messages[:n] == tuple(messages)
    sdk = SQLiteSession("s1", tmp / "sdk-append-NORMAL.db")
    t_load, s_load = await race(lambda: store.load(OWNER, cid, tail=n), sdk.get_items)
    line("tether SQLiteStore.load (msgs/s, typed Message objects)", f"{n / t_load:,.0f}")
    line("SDK SQLiteSession.get_items (msgs/s, plain dicts)", f"{n / s_load:,.0f}")
    line("load speed-up (target >= 3x)", f"{s_load / t_load:.1f}x")
    sdk.close()
    await store.close()


async def append_cost_vs_length(tmp: Path, k: int, big: int) -> None:
    print(f"\nappend {k} messages to a conversation of 100 vs {big:,} prior messages (SQLiteStore)")
    store = SQLiteStore(tmp / "tether-length.db")
    prior = conversation(big, seed=2)
    small_id = await store.create(OWNER)
    big_id = await store.create(OWNER)
    await store.append(OWNER, small_id, prior[:100])
    for i in range(0, big, 2000):
        await store.append(OWNER, big_id, prior[i : i + 2000])
    batch = conversation(k, seed=3)

    async def median_append(cid: str) -> float:
        times: list[float] = []
        version = (await store.info(OWNER, cid)).version
        for _ in range(1 if SMOKE else 30):
            t = time.perf_counter()
            version = await store.append(OWNER, cid, batch, expected_version=version)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    small = await median_append(small_id)
    large = await median_append(big_id)
    line("append at 100 prior (median ms)", f"{small * 1000:.3f}")
    line(f"append at {big:,} prior (median ms)", f"{large * 1000:.3f}")
    line("ratio (target ~1: O(k), not O(history))", f"{large / small:.2f}x")
    await store.close()


async def load_vs_loads(tmp: Path, n: int) -> None:
    print(f"\nload {n:,} messages vs tether.loads of the same bytes")
    messages = conversation(n, seed=4)
    data = tether.dumps(messages)
    store = SQLiteStore(tmp / "tether-load.db")
    cid = await store.create(OWNER)
    for i in range(0, n, 1000):
        await store.append(OWNER, cid, messages[i : i + 1000])

    async def decode() -> None:
        tether.loads(data)

    t_loads, t_load = await race(decode, lambda: store.load(OWNER, cid), rounds=7)
    line(f"tether.loads ({len(data) / 1e6:.1f} MB, ms)", f"{t_loads * 1000:.1f}")
    line("SQLiteStore.load (ms)", f"{t_load * 1000:.1f}")
    line("ratio (target <= 1.5x)", f"{t_load / t_loads:.2f}x")
    await store.close()


async def postgres_writers(writers: int, appends: int) -> None:
    print(f"\nPostgreSQL: {writers} concurrent writers (own connection each), {appends} turns each")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    stores = [
        PostgresStore(DSN, schema=schema, min_size=1, max_size=1, open_timeout=5) for _ in range(writers)
    ]
    try:
        try:
            await stores[0].create(OWNER, "probe")
        except tether.StoreError as exc:
            print(f"  skipped: {exc}")
            return
        batches = turns(conversation(appends * 6, seed=5))[:appends]
        count = sum(len(b) for b in batches)

        async def own_conversation(k: int) -> None:
            cid = await stores[k].create(OWNER)
            version = 0
            for b in batches:
                version = await stores[k].append(OWNER, cid, b, expected_version=version)

        await asyncio.gather(*(s.conversations(OWNER) for s in stores))  # open the pools
        t = time.perf_counter()
        await asyncio.gather(*(own_conversation(k) for k in range(writers)))
        dt = time.perf_counter() - t
        line("separate conversations: appends/s", f"{writers * appends / dt:,.0f}")
        line("separate conversations: messages/s", f"{writers * count / dt:,.0f}")

        shared = await stores[0].create(OWNER, "shared")
        conflicts = 0

        async def same_conversation(k: int) -> None:
            nonlocal conflicts
            version = 0
            for b in batches[: appends // 4]:
                while True:
                    try:
                        version = await stores[k].append(OWNER, shared, b, expected_version=version)
                        break
                    except tether.ConflictError as exc:
                        conflicts += 1
                        version = exc.actual

        t = time.perf_counter()
        await asyncio.gather(*(same_conversation(k) for k in range(writers)))
        dt = time.perf_counter() - t
        done = writers * (appends // 4)
        line("one shared conversation (expected_version+retry): appends/s", f"{done / dt:,.0f}")
        line("  conflicts retried per successful append", f"{conflicts / done:.1f}")
        t_load = await best(lambda: stores[0].load(OWNER, shared))
        total = (await stores[0].info(OWNER, shared)).version
        line(f"load {total:,} messages from PostgreSQL (msgs/s)", f"{total / t_load:,.0f}")
    finally:
        if stores[0]._db._ready:  # pyright: ignore[reportPrivateUsage]
            async with stores[0]._db.tx() as conn:  # pyright: ignore[reportPrivateUsage]
                await conn.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())
        for s in stores:
            await s.close()


async def replay_guard(tmp: Path, n: int) -> None:
    """``claim_token`` cost per call: a fresh guard, and one holding ``n`` expired claims (each
    call deletes at most 64 of them, so the cost stays bounded)."""
    import hashlib

    print(f"\nreplay guard: claim_token, {n} claims per run (µs per call)")
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(2 * n)]
    now = time.time()

    async def run(store: Any, batch: list[str]) -> None:
        for d in batch:
            await store.claim_token(d, now + 3600)

    sqlite_store = SQLiteStore(tmp / "guard.db")
    await sqlite_store.create(OWNER, "probe")
    t = await best(lambda: run(sqlite_store, digests[:n]), 1)
    line("SQLiteStore, fresh digests", f"{t / n * 1e6:,.0f}")
    clock = [now]
    aged = SQLiteStore(tmp / "aged.db", clock=lambda: clock[0])
    for d in digests[:n]:
        await aged.claim_token(d, now + 1)
    clock[0] = now + 10  # every claim above has expired
    t = await best(lambda: run(aged, digests[n:]), 1)
    line(f"SQLiteStore, {n:,} expired claims to purge along the way", f"{t / n * 1e6:,.0f}")
    await sqlite_store.close()
    await aged.close()
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    pg = PostgresStore(DSN, schema=schema, open_timeout=5)
    try:
        try:
            await pg.create(OWNER, "probe")
        except tether.StoreError as exc:
            print(f"  PostgreSQL skipped: {exc}")
            return
        t = await best(lambda: run(pg, digests[:n]), 1)
        line("PostgresStore, fresh digests", f"{t / n * 1e6:,.0f}")
    finally:
        if pg._db._ready:  # pyright: ignore[reportPrivateUsage]
            async with pg._db.tx() as conn:  # pyright: ignore[reportPrivateUsage]
                await conn.execute(f'DROP SCHEMA "{schema}" CASCADE'.encode())
        await pg.close()


async def main(quick: bool, smoke: bool = False) -> None:
    global SMOKE
    SMOKE = smoke
    mode = ", smoke" if smoke else ", quick" if quick else ""
    print(f"tether stores benchmark (python {sys.version.split()[0]}{mode})")
    with tempfile.TemporaryDirectory() as tmp:
        await append_and_load(Path(tmp), 100 if smoke else 1000 if quick else 4000)
        await append_cost_vs_length(Path(tmp), 10, 2000 if smoke else 10_000 if quick else 100_000)
        await load_vs_loads(Path(tmp), 1000 if smoke else 10_000)
        await replay_guard(Path(tmp), 20 if smoke else 500 if quick else 2000)
    await postgres_writers(2 if smoke else 8, 8 if smoke else 50 if quick else 200)


if __name__ == "__main__":
    asyncio.run(main("--quick" in sys.argv, "--smoke" in sys.argv))
