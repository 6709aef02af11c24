"""PostgresStore against the real server: many application servers (pools) writing at once."""

from __future__ import annotations

import asyncio

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
