"""``Store.claim_token``: the replay guard for single-use tokens, on every store, across store
instances and processes sharing one database."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from tether import UserError
from tether.stores import MemoryStore, PostgresStore, SQLiteStore, Store

from .conftest import Clock, OpenStore, RawSQL, durable

CHILD = Path(__file__).with_name("_child.py")


def digest(i: int | str) -> str:
    return hashlib.sha256(f"token-{i}".encode()).hexdigest()


async def test_a_token_is_claimed_once_until_it_expires(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    first, other = digest("a"), digest("b")
    assert await store.claim_token(first, clock.t + 60)
    assert not await store.claim_token(first, clock.t + 60)
    assert not await store.claim_token(first, clock.t + 3600)  # a later expiry does not renew it
    assert await store.claim_token(other, clock.t + 60)
    clock.advance(59)
    assert not await store.claim_token(first, clock.t + 60)
    clock.advance(1)  # the claim expires at exactly expires_at
    assert await store.claim_token(first, clock.t + 60)  # an expired claim is taken over
    assert not await store.claim_token(first, clock.t + 60)
    assert await store.claim_token(digest("c"), 0)  # already expired: recorded, held for no time
    assert await store.claim_token(digest("c"), 0)


async def test_claims_are_not_owner_scoped_and_survive_conversation_purges(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    await store.create("alice", "chat")
    assert await store.claim_token(digest("t"), clock.t + 10 * 86400)
    clock.advance(3 * 86400)
    assert await store.purge(timedelta(days=1), owner="bob") == 0
    assert await store.purge(timedelta(days=1)) == 1  # alice's idle chat
    assert not await store.claim_token(digest("t"), clock.t + 60)  # the unexpired claim stays


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (digest("x").upper(), "digest"),
        (digest("x")[:63], "digest"),
        (digest("x") + "0", "digest"),
        (digest("x")[:63] + "g", "digest"),
        (digest("x") + "\n", "digest"),
        (" " + digest("x")[1:], "digest"),
        (bytes.fromhex(digest("x")), "digest"),
        (None, "digest"),
        (f"{digest('x')[:63]}\ud800", "digest"),
    ],
)
async def test_a_digest_of_another_shape_is_a_user_error(store: Store, value: object, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        await store.claim_token(value, 2e9)  # type: ignore[arg-type]


@pytest.mark.parametrize("expires_at", [float("nan"), float("inf"), -1.0, -1, True, "2e9", None, 2**63])
async def test_a_bad_expiry_is_a_user_error(store: Store, expires_at: object) -> None:
    with pytest.raises(UserError, match="expires_at"):
        await store.claim_token(digest("x"), expires_at)  # type: ignore[arg-type]
    assert await store.claim_token(digest("x"), 2e9)  # nothing was recorded by the refused call


@durable
async def test_expired_claims_are_purged_a_few_per_claim_and_all_by_purge(
    open_store: OpenStore, raw_sql: RawSQL
) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    for i in range(150):
        assert await store.claim_token(digest(i), clock.t + 10)
    assert await store.claim_token(digest("long"), clock.t + 10_000)
    clock.advance(11)

    def held() -> int:
        return raw_sql("SELECT count(*) FROM tether_replay_guards")[0][0]

    assert held() == 151
    assert await store.claim_token(digest("new"), clock.t + 10)
    assert held() == 151 - 64 + 1  # bounded work: at most 64 expired claims per call
    assert await store.purge(timedelta(days=1)) == 0
    assert sorted(r[0] for r in raw_sql("SELECT digest FROM tether_replay_guards")) == sorted(
        [digest("long"), digest("new")]
    )


async def test_memory_store_purges_expired_claims() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    for i in range(100):
        await store.claim_token(digest(i), clock.t + 10)
    await store.claim_token(digest("long"), clock.t + 1000)
    clock.advance(20)
    await store.claim_token(digest("new"), clock.t + 10)
    assert len(store._guards) == 101 - 64 + 1  # pyright: ignore[reportPrivateUsage]
    await store.purge(timedelta(days=1))
    assert set(store._guards) == {digest("long"), digest("new")}  # pyright: ignore[reportPrivateUsage]


async def _race(stores: list[Store], first: int, n: int) -> list[list[int]]:
    """Every store claims the same ``n`` digests (``first`` on) at once; the indexes each won."""

    async def claimer(store: Store, order: list[int]) -> list[int]:
        won: list[int] = []
        for i in order:
            if await store.claim_token(digest(i), 4e9):
                won.append(i)
        return won

    ids = list(range(first, first + n))
    orders = [ids if k % 2 == 0 else ids[::-1] for k in range(len(stores))]
    return await asyncio.gather(*(claimer(s, o) for s, o in zip(stores, orders, strict=True)))


async def _race_until_contended(stores: list[Store], n: int, rounds: int = 5) -> None:
    """Race rounds of fresh digests: in every round each digest is won exactly once, by one store;
    at least one round must have had more than one winning store, else nothing really raced (a
    scheduler can let one store run through a whole short round, so one round is not proof)."""
    for k, store in enumerate(stores):  # open every store (connection, migration check) first
        assert await store.claim_token(digest(f"warm-{k}"), 4e9)
    contended = 0
    for r in range(rounds):
        wins = await _race(stores, r * n, n)
        every = sorted(i for won in wins for i in won)
        assert every == list(range(r * n, (r + 1) * n))  # each digest won exactly once
        contended += sum(1 for won in wins if won) >= 2
        if contended:
            break
    assert contended, f"one store won every digest in {rounds} rounds: the claimers never raced"


async def test_two_sqlite_stores_on_one_file_agree_on_one_winner(tmp_path: Path) -> None:
    stores: list[Store] = [SQLiteStore(tmp_path / "g.db") for _ in range(2)]
    try:
        await _race_until_contended(stores, 300)
    finally:
        for store in stores:
            await store.close()


@pytest.mark.postgres
async def test_two_postgres_stores_on_one_schema_agree_on_one_winner(pg_dsn: str, pg_schema: str) -> None:
    stores: list[Store] = [PostgresStore(pg_dsn, schema=pg_schema, max_size=4) for _ in range(3)]
    try:
        await _race_until_contended(stores, 200)
        # claims of one digest issued all at once: exactly one wins
        for i in range(10_000, 10_020):  # digests no round claimed
            results = await asyncio.gather(*(s.claim_token(digest(i), 4e9) for s in stores for _ in range(3)))
            assert sorted(results) == [False] * 8 + [True]
    finally:
        for store in stores:
            await store.close()


def test_sqlite_processes_claiming_the_same_tokens_win_each_once(tmp_path: Path) -> None:
    db, n = tmp_path / "g.db", 400

    async def setup() -> None:
        async with SQLiteStore(db) as store:
            await store.create("o")

    asyncio.run(setup())
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), "claim", str(db), str(n), str(k * n // 4)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(4)  # each starts at another quarter of the tokens
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    wins: list[list[int]] = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        lines = out.split()
        assert lines[-1] == "done"
        wins.append([int(x) for x in lines[:-1]])
    every = sorted(i for won in wins for i in won)
    assert every == list(range(n))
    assert sum(1 for won in wins if won) >= 2  # more than one process won some: they raced
