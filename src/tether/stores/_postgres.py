"""``PostgresStore``: many stateless application servers sharing one PostgreSQL database.

psycopg 3 (async) with a ``psycopg_pool`` connection pool. An append locks its conversation row
(``SELECT ... FOR UPDATE``), so writers of one conversation queue while writers of different
conversations proceed in parallel; each batch commits atomically. Migrations run once per pool
under an advisory lock, each named and recorded in ``tether_migrations`` within its transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, Self

from tether.errors import MissingExtra, StoreError
from tether.messages import Message
from tether.stores._common import (
    CONVERSATION_COLUMNS,
    RowCodec,
    batch_facts,
    check_append,
    check_id,
    check_ids,
    check_limit,
    check_load,
    check_tool_call,
    check_version,
    conflict,
    fork_point,
    id_or_new,
    idle_filter,
    load_offset,
    not_found,
    now,
    pending_migrations,
    purge_cutoff,
    purge_with_hook,
    reencrypt_batches,
    unknown_call,
)
from tether.stores._crypto import Keyring
from tether.stores._migrations import POSTGRES
from tether.stores._protocol import ConversationInfo, ExpireHook, Loaded, OnCorrupt, ToolEffect

try:
    import psycopg
    from psycopg import sql
    from psycopg_pool import AsyncConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("PostgresStore", "postgres", "psycopg[binary] psycopg-pool") from exc

__all__ = ["PostgresStore"]

_Conn = psycopg.AsyncConnection[tuple[Any, ...]]
_OFF_LOOP_ROWS = 256  # decode bigger loads on a worker thread


class PostgresStore:
    """A ``Store`` in PostgreSQL. ``dsn`` is a libpq connection string; ``schema`` (created if
    missing) holds the tables, else the server's default search path decides. ``keyring``,
    ``clock`` as for ``SQLiteStore``. The pool (``min_size``..``max_size`` connections) opens on
    first use or ``async with``; ``StoreError`` if it cannot connect within ``open_timeout`` seconds."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        keyring: Keyring | None = None,
        min_size: int = 1,
        max_size: int = 10,
        open_timeout: float = 30.0,
        clock: Callable[[], float] = now,
    ) -> None:
        if schema is not None:
            check_id(schema, "schema")
        self.schema = schema
        self._codec = RowCodec(keyring)
        self._clock = clock
        self._pool: AsyncConnectionPool[_Conn] = AsyncConnectionPool(
            dsn,
            connection_class=psycopg.AsyncConnection[tuple[Any, ...]],
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True},
            configure=self._configure,
        )
        self._open_timeout = open_timeout
        self._ready = False
        self._closed = False
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _configure(self, conn: _Conn) -> None:
        if self.schema is not None:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    async def _open(self) -> AsyncConnectionPool[_Conn]:
        if self._closed:
            raise StoreError("PostgresStore is closed")
        if not self._ready:
            async with self._lock:
                if not self._ready:
                    try:
                        await self._pool.open(wait=True, timeout=self._open_timeout)
                        async with self._pool.connection() as conn:
                            await _migrate(conn, self.schema)
                    except psycopg.Error as exc:
                        raise StoreError(f"PostgreSQL: {exc}") from exc
                    self._ready = True
        return self._pool

    @asynccontextmanager
    async def _tx(self) -> AsyncGenerator[_Conn]:
        pool = await self._open()
        try:
            async with pool.connection() as conn, conn.transaction():
                yield conn
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL: {exc}") from exc

    @staticmethod
    async def _row(conn: _Conn, owner: str, conversation_id: str, *, lock: bool = False) -> tuple[Any, ...]:
        cursor = await conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = %s AND id = %s"
            + (" FOR SHARE" if lock else ""),
            (owner, conversation_id),
        )
        row = await cursor.fetchone()
        if row is None:
            raise not_found(conversation_id)
        return row

    # -- the Store protocol -------------------------------------------------------------------
    async def create(self, owner: str, conversation_id: str | None = None, *, exist_ok: bool = False) -> str:
        """See ``Store.create``."""
        check_id(owner, "owner")
        cid = id_or_new(conversation_id, "conversation_id")
        t = self._clock()
        async with self._tx() as conn:
            cursor = await conn.execute(
                "INSERT INTO tether_conversations (owner, id, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (owner, id) DO NOTHING RETURNING pk",
                (owner, cid, t, t),
            )
            if await cursor.fetchone() is None and not exist_ok:
                existing = await self._row(conn, owner, cid)
                raise conflict(cid, 0, existing[2])
        return cid

    async def append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int | None = None,
    ) -> int:
        """See ``Store.append``."""
        check_ids(owner, conversation_id)
        check_append(messages, expected_version)
        facts = batch_facts(messages)
        encoded = RowCodec.encode(messages)
        codec = self._codec
        async with self._tx() as conn:
            cursor = await conn.execute(
                "SELECT pk, version, preview IS NULL, open_effects FROM tether_conversations "
                "WHERE owner = %s AND id = %s FOR UPDATE",
                (owner, conversation_id),
            )
            row = await cursor.fetchone()
            if row is None:
                raise not_found(conversation_id)
            pk, version, no_preview, open_effects = row
            check_version(conversation_id, expected_version, version)
            if not encoded:
                return version
            rows = codec.seal(owner, conversation_id, version + 1, encoded)
            new_version = version + len(encoded)
            preview_key, preview = codec.seal_preview(
                owner, conversation_id, facts.preview if no_preview else None
            )
            # one round trip: insert the batch and move the version
            await conn.execute(
                "WITH batch AS (INSERT INTO tether_messages (conversation, seq, key_id, data) "
                "SELECT %s, * FROM unnest(%s::bigint[], %s::text[], %s::bytea[])) "
                "UPDATE tether_conversations SET version = %s, updated_at = %s, "
                "last_model = COALESCE(%s, last_model), preview_key = COALESCE(%s, preview_key), "
                "preview = COALESCE(%s, preview) WHERE pk = %s",
                (
                    pk,
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [r[2] for r in rows],
                    new_version,
                    self._clock(),
                    facts.last_model,
                    preview_key,
                    preview,
                    pk,
                ),
            )
            if open_effects and facts.results:  # results stored: close their ledger entries
                await conn.execute(
                    "WITH closed AS (UPDATE tether_tool_effects e SET stored_seq = %s "
                    "FROM unnest(%s::text[], %s::text[]) AS r(run_id, call_id) "
                    "WHERE e.conversation = %s AND e.call_id = r.call_id AND e.stored_seq IS NULL "
                    "AND (r.run_id IS NULL OR e.run_id = r.run_id) RETURNING 1) "
                    "UPDATE tether_conversations "
                    "SET open_effects = open_effects - (SELECT count(*) FROM closed) WHERE pk = %s",
                    (
                        new_version,
                        [run_id for run_id, _ in facts.results],
                        [call_id for _, call_id in facts.results],
                        pk,
                        pk,
                    ),
                )
            return new_version

    async def load(
        self,
        owner: str,
        conversation_id: str,
        *,
        tail: int | None = None,
        since: int | None = None,
        on_corrupt: OnCorrupt = "raise",
    ) -> Loaded:
        """See ``Store.load``."""
        check_ids(owner, conversation_id)
        check_load(tail, since, on_corrupt)
        async with self._tx() as conn:
            # one snapshot for the version and the rows, even if the conversation is deleted meanwhile
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            cursor = await conn.execute(
                "SELECT pk, version FROM tether_conversations WHERE owner = %s AND id = %s",
                (owner, conversation_id),
            )
            row = await cursor.fetchone()
            if row is None:
                raise not_found(conversation_id)
            pk, version = row
            offset = load_offset(conversation_id, version, tail, since)
            cursor = await conn.execute(
                "SELECT seq, key_id, data FROM tether_messages "
                "WHERE conversation = %s AND seq > %s AND seq <= %s ORDER BY seq",
                (pk, offset, version),
                binary=True,
            )
            rows = await cursor.fetchall()

        def decode() -> tuple[list[Message], list[Any]]:
            return self._codec.decode_rows(owner, conversation_id, rows, offset + 1, version, on_corrupt)

        messages, bad = await asyncio.to_thread(decode) if len(rows) > _OFF_LOOP_ROWS else decode()
        return Loaded(conversation_id, tuple(messages), version, offset, tuple(bad))

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]:
        """See ``Store.conversations``."""
        check_id(owner, "owner")
        check_limit(limit)
        async with self._tx() as conn:
            cursor = await conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = %s "
                "ORDER BY updated_at DESC, pk DESC LIMIT %s OFFSET %s",
                (owner, limit, offset),
            )
            rows = await cursor.fetchall()
        return [self._codec.info(owner, r) for r in rows]

    async def info(self, owner: str, conversation_id: str) -> ConversationInfo:
        """See ``Store.info``."""
        check_ids(owner, conversation_id)
        async with self._tx() as conn:
            row = await self._row(conn, owner, conversation_id)
        return self._codec.info(owner, row)

    async def fork(
        self,
        owner: str,
        conversation_id: str,
        at_version: int | None = None,
        new_id: str | None = None,
    ) -> str:
        """See ``Store.fork``. Encrypted rows are re-sealed for the new conversation."""
        check_ids(owner, conversation_id)
        target = id_or_new(new_id, "new_id")
        codec = self._codec
        async with self._tx() as conn:
            source = await self._row(conn, owner, conversation_id, lock=True)  # not deleted mid-copy
            pk, at = source[0], fork_point(at_version, source[2])
            cursor = await conn.execute(
                "SELECT seq, key_id, data FROM tether_messages "
                "WHERE conversation = %s AND seq <= %s ORDER BY seq",
                (pk, at),
                binary=True,
            )
            rows = await cursor.fetchall()
            messages, _ = codec.decode_rows(owner, conversation_id, rows, 1, at, "raise")
            facts = batch_facts(messages)
            preview_key, preview = codec.seal_preview(owner, target, facts.preview)
            t = self._clock()
            cursor = await conn.execute(
                "INSERT INTO tether_conversations (owner, id, version, created_at, updated_at, preview_key, "
                "preview, last_model, forked_from, forked_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (owner, id) DO NOTHING RETURNING pk",
                (owner, target, at, t, t, preview_key, preview, facts.last_model, conversation_id, at),
            )
            created = await cursor.fetchone()
            if created is None:
                existing = await self._row(conn, owner, target)
                raise conflict(target, 0, existing[2])
            copied = codec.copy_rows(owner, conversation_id, target, rows)
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO tether_messages (conversation, seq, key_id, data) VALUES (%s, %s, %s, %s)",
                    [(created[0], *r) for r in copied],
                )
        return target

    async def delete(self, owner: str, conversation_id: str) -> None:
        """See ``Store.delete`` (messages and ledger entries go by ``ON DELETE CASCADE``)."""
        check_ids(owner, conversation_id)
        async with self._tx() as conn:
            cursor = await conn.execute(
                "DELETE FROM tether_conversations WHERE owner = %s AND id = %s", (owner, conversation_id)
            )
            if cursor.rowcount != 1:
                raise not_found(conversation_id)

    async def purge(
        self,
        older_than: timedelta,
        *,
        owner: str | None = None,
        on_expire: ExpireHook | None = None,
    ) -> int:
        """See ``Store.purge`` and ``SQLiteStore.purge``."""
        cutoff = purge_cutoff(self._clock(), older_than, owner)
        where, params = idle_filter(cutoff, owner, "%s")
        if on_expire is None:
            async with self._tx() as conn:
                cursor = await conn.execute(f"DELETE FROM tether_conversations WHERE {where}", params)
                return cursor.rowcount
        async with self._tx() as conn:
            cursor = await conn.execute(f"SELECT owner, id FROM tether_conversations WHERE {where}", params)
            idle = [(str(r[0]), str(r[1])) for r in await cursor.fetchall()]

        async def delete_if_unchanged(o: str, cid: str, version: int) -> bool:
            async with self._tx() as conn:
                cursor = await conn.execute(
                    "DELETE FROM tether_conversations WHERE owner = %s AND id = %s AND version = %s "
                    "AND updated_at < %s",
                    (o, cid, version, cutoff),
                )
                return cursor.rowcount == 1

        return await purge_with_hook(self, idle, on_expire, delete_if_unchanged)

    async def record_tool_started(
        self,
        owner: str,
        conversation_id: str,
        run_id: str,
        call_id: str,
        tool_name: str,
        arguments: str,
    ) -> bool:
        """See ``Store.record_tool_started``. Arguments are encrypted like messages."""
        check_ids(owner, conversation_id)
        check_tool_call(run_id, call_id, tool_name, arguments)
        key_id, sealed = self._codec.seal_field(owner, conversation_id, "tool", call_id, arguments)
        async with self._tx() as conn:
            pk = (await self._row(conn, owner, conversation_id))[0]
            cursor = await conn.execute(
                "INSERT INTO tether_tool_effects (conversation, call_id, run_id, tool_name, arguments_key, "
                "arguments, started_at) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                # a closed entry of the same run and call id is a later call reusing the id
                "ON CONFLICT (conversation, call_id, run_id) DO UPDATE SET tool_name = excluded.tool_name, "
                "arguments_key = excluded.arguments_key, arguments = excluded.arguments, "
                "started_at = excluded.started_at, finished_at = NULL, failed = FALSE, stored_seq = NULL "
                "WHERE tether_tool_effects.stored_seq IS NOT NULL",
                (pk, call_id, run_id, tool_name, key_id, sealed, self._clock()),
            )
            if cursor.rowcount != 1:
                return False
            await conn.execute(
                "UPDATE tether_conversations SET open_effects = open_effects + 1 WHERE pk = %s", (pk,)
            )
            return True

    async def record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, *, failed: bool = False
    ) -> None:
        """See ``Store.record_tool_finished``."""
        check_ids(owner, conversation_id)
        async with self._tx() as conn:
            pk = (await self._row(conn, owner, conversation_id))[0]
            cursor = await conn.execute(
                "UPDATE tether_tool_effects SET finished_at = %s, failed = %s "
                "WHERE conversation = %s AND call_id = %s AND run_id = %s",
                (self._clock(), failed, pk, call_id, run_id),
            )
            if cursor.rowcount != 1:
                raise unknown_call(call_id, run_id)

    async def pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        """See ``Store.pending_tool_effects``."""
        check_ids(owner, conversation_id)
        async with self._tx() as conn:
            pk = (await self._row(conn, owner, conversation_id))[0]
            cursor = await conn.execute(
                "SELECT run_id, call_id, tool_name, started_at, finished_at, failed, arguments_key, "
                "arguments FROM tether_tool_effects WHERE conversation = %s AND stored_seq IS NULL "
                "ORDER BY started_at, call_id",
                (pk,),
            )
            rows = await cursor.fetchall()
        return self._codec.effects(owner, conversation_id, rows)

    # -- maintenance --------------------------------------------------------------------------
    async def reencrypt(self, *, batch: int = 500) -> int:
        """Re-seal every row not sealed with the keyring's current key; see ``SQLiteStore.reencrypt``."""

        async def one_batch(current: str) -> int:
            async with self._tx() as conn:
                return await _reseal_batch(conn, self._codec, current, batch)

        return await reencrypt_batches(self._codec, one_batch)

    async def close(self) -> None:
        """Close the pool. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._pool.close()


async def _migrate(conn: _Conn, schema: str | None) -> None:
    """Apply the missing named migrations, recorded by name, in one transaction under an advisory lock."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('tether_migrations'))")
        if schema is not None:
            await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS tether_migrations "
            "(name TEXT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
        )
        cursor = await conn.execute("SELECT name FROM tether_migrations")
        for name, statements in pending_migrations({str(r[0]) for r in await cursor.fetchall()}, POSTGRES):
            for statement in statements:
                await conn.execute(statement.encode())
            await conn.execute(
                "INSERT INTO tether_migrations (name, applied_at) VALUES (%s, %s)", (name, now())
            )


async def _reseal_batch(conn: _Conn, codec: RowCodec, current: str, batch: int) -> int:
    """Re-seal up to ``batch`` message rows, previews and tool arguments not sealed with the
    ``current`` key (plaintext included); return how many were rewritten (0: done)."""
    cursor = await conn.execute(
        "SELECT m.conversation, c.owner, c.id, m.seq, m.key_id, m.data FROM tether_messages m "
        "JOIN tether_conversations c ON c.pk = m.conversation "
        "WHERE m.key_id IS DISTINCT FROM %s LIMIT %s FOR UPDATE OF m",
        (current, batch),
    )
    updates = [
        (*codec.reseal_row(o, cid, seq, key_id, data), pk, seq)
        for pk, o, cid, seq, key_id, data in await cursor.fetchall()
    ]
    if updates:
        async with conn.cursor() as cur:
            await cur.executemany(
                "UPDATE tether_messages SET key_id = %s, data = %s WHERE conversation = %s AND seq = %s",
                updates,
            )
    done = len(updates)
    cursor = await conn.execute(
        "SELECT pk, owner, id, preview_key, preview FROM tether_conversations "
        "WHERE preview IS NOT NULL AND preview_key IS DISTINCT FROM %s LIMIT %s FOR UPDATE",
        (current, batch),
    )
    for pk, o, cid, key_id, data in await cursor.fetchall():
        await conn.execute(
            "UPDATE tether_conversations SET preview_key = %s, preview = %s WHERE pk = %s",
            (*codec.reseal_field(o, cid, "preview", 0, key_id, data), pk),
        )
        done += 1
    cursor = await conn.execute(
        "SELECT e.conversation, c.owner, c.id, e.call_id, e.run_id, e.arguments_key, e.arguments "
        "FROM tether_tool_effects e JOIN tether_conversations c ON c.pk = e.conversation "
        "WHERE e.arguments_key IS DISTINCT FROM %s LIMIT %s FOR UPDATE OF e",
        (current, batch),
    )
    for pk, o, cid, call_id, run_id, key_id, data in await cursor.fetchall():
        await conn.execute(
            "UPDATE tether_tool_effects SET arguments_key = %s, arguments = %s "
            "WHERE conversation = %s AND call_id = %s AND run_id = %s",
            (*codec.reseal_field(o, cid, "tool", call_id, key_id, data), pk, call_id, run_id),
        )
        done += 1
    return done
