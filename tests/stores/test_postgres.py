"""PostgresStore against the real server: many application servers (pools) writing at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import ConflictError, StoreError, user
from tether.stores import PostgresStore

pytestmark = pytest.mark.postgres
OWNER = "owner"


async def test_eight_connections_lose_no_update(pg_dsn: str, pg_schema: str) -> None:
    writers, per_writer = 8, 125
    # eight independent stores, one connection each: eight stateless application servers
    stores = [PostgresStore(pg_dsn, schema=pg_schema, min_size=1, max_size=1) for _ in range(writers)]
    try:
        await stores[0].create(OWNER, "shared")
        await stores[0].create(OWNER, "quiet")

        async def writer(k: int) -> int:
            store, conflicts, version = stores[k], 0, 0
            for i in range(per_writer):
                while True:
                    try:
                        version = await store.append(
                            OWNER, "shared", [user(f"{k}:{i}")], expected_version=version
                        )
                        break
                    except ConflictError as exc:
                        conflicts += 1
                        version = exc.actual
                if i % 25 == 0:  # unconditional appends to another conversation interleave freely
                    await store.append(OWNER, "quiet", [user(f"{k}:{i}")])
            return conflicts

        conflicts = await asyncio.gather(*(writer(k) for k in range(writers)))
        loaded = await stores[0].load(OWNER, "shared")
        texts = [m.text for m in loaded.messages]
        assert loaded.version == len(texts) == writers * per_writer
        assert sorted(texts) == sorted(f"{k}:{i}" for k in range(writers) for i in range(per_writer))
        for k in range(writers):
            assert [t for t in texts if t.startswith(f"{k}:")] == [f"{k}:{i}" for i in range(per_writer)]
        assert sum(conflicts) > 0
        assert (await stores[0].load(OWNER, "quiet")).version == writers * (per_writer // 25)
    finally:
        for store in stores:
            await store.close()


async def test_schema_per_store_isolates_and_bad_dsn_is_a_store_error(pg_dsn: str, pg_schema: str) -> None:
    async with PostgresStore(pg_dsn, schema=pg_schema) as store:
        await store.create(OWNER, "x")
    async with PostgresStore(pg_dsn, schema=pg_schema + "_other") as other:
        try:
            assert await other.conversations(OWNER) == []
        finally:
            async with other._db.tx() as conn:  # pyright: ignore[reportPrivateUsage]
                await conn.execute(f'DROP SCHEMA "{pg_schema}_other" CASCADE'.encode())
    broken = PostgresStore("postgresql://postgres@127.0.0.1:1/none", open_timeout=1.0)
    with pytest.raises(StoreError, match="PostgreSQL"):
        await broken.create(OWNER)
    await broken.close()


async def test_a_durable_step_writes_in_one_statement_each(
    pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append at an expected version, a tool start and its finish are one statement each, in
    autocommit (no BEGIN or COMMIT round trips); a conflict still names the stored version."""
    import psycopg

    statements: list[str] = []
    transactions: list[object] = []
    execute, transaction = psycopg.AsyncConnection.execute, psycopg.AsyncConnection.transaction

    def counted_execute(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
        statements.append(str(query)[:40])
        return execute(self, query, *args, **kw)

    def counted_transaction(self: Any, *args: Any, **kw: Any) -> Any:
        transactions.append(self)
        return transaction(self, *args, **kw)

    async with PostgresStore(pg_dsn, schema=pg_schema) as store:
        cid = await store.create(OWNER, "steps")
        monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted_execute)
        monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted_transaction)
        assert await store.append(OWNER, cid, [user("a"), user("b")], expected_version=0) == 2
        assert await store.record_tool_started(OWNER, cid, "run", "call", "charge", "{}")
        await store.record_tool_finished(OWNER, cid, "run", "call")
        assert (len(statements), transactions) == (3, [])
        with pytest.raises(ConflictError) as info:
            await store.append(OWNER, cid, [user("c")], expected_version=1)
        assert (info.value.expected, info.value.actual) == (1, 2)
        monkeypatch.undo()
        loaded = await store.load(OWNER, cid)
        assert ([m.text for m in loaded.messages], loaded.version) == (["a", "b"], 2)
        assert (await store.info(OWNER, cid)).preview == "a"
        assert [e.call_id for e in await store.pending_tool_effects(OWNER, cid)] == ["call"]
