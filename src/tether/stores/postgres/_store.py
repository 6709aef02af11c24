"""``PostgresStore``: many stateless application servers sharing one PostgreSQL database.

psycopg 3 (async) over ``PostgresPool`` (the pool, its migrations under an advisory lock, each
named and recorded in ``tether_migrations`` within its transaction). An append locks its
conversation row (``SELECT ... FOR UPDATE``), so writers of one conversation queue while writers
of different conversations proceed in parallel; each batch commits atomically. The arguments are
checked by ``BaseStore``; this module is the SQL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Self

from tether.errors import CorruptRecord, MissingExtra, UserError
from tether.messages import Message
from tether.stores._base import BaseStore
from tether.stores._common import (
    CONVERSATION_COLUMNS,
    DELETED,
    MAX_COUNT,
    UNDELETE,
    BatchFacts,
    batch_facts,
    check_batch,
    check_id,
    check_version,
    deleted,
    exists,
    fork_point,
    idle_filter,
    load_offset,
    not_found,
    now,
    reencrypt_batches,
    unknown_call,
)
from tether.stores._crypto import Keyring
from tether.stores._protocol import ConversationInfo, Loaded, OnCorrupt, SearchResults, ToolEffect
from tether.stores._records import CompactionRecord
from tether.stores._rows import RowCodec
from tether.stores._search import scan_store

try:  # the PostgreSQL modules import psycopg and psycopg_pool
    from tether.stores.postgres import _ledger as ledger
    from tether.stores.postgres import _records as recs
    from tether.stores.postgres._db import Conn, PostgresPool
    from tether.stores.postgres._schema import migrate, reseal_or_mark
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("PostgresStore", "postgres", "psycopg[binary] psycopg-pool") from exc

__all__ = ["PostgresStore"]

_OFF_LOOP_ROWS = 256  # decode bigger loads on a worker thread

# ``PostgresStore._append_at``. Under READ COMMITTED the UPDATE waits for a concurrent writer of
# the row and then re-checks its WHERE against the row that writer left: two appends expecting
# one version cannot both pass. The preview is set only where there is none yet (SET reads the
# row before the update); results skip this path when the conversation has open ledger entries.
_APPEND_AT = (
    "WITH moved AS (UPDATE tether_conversations SET version = %(version)s, updated_at = %(t)s, "
    "last_model = COALESCE(%(model)s, last_model), "
    "preview_key = CASE WHEN preview IS NULL THEN COALESCE(%(preview_key)s, preview_key) "
    "ELSE preview_key END, preview = COALESCE(preview, %(preview)s) "
    "WHERE owner = %(owner)s AND id = %(id)s AND version = %(expected)s "
    "AND (open_effects = 0 OR NOT %(results)s) RETURNING pk) "
    "INSERT INTO tether_messages (conversation, seq, key_id, data) SELECT moved.pk, r.* FROM moved, "
    "unnest(%(seqs)s::bigint[], %(keys)s::text[], %(data)s::bytea[]) AS r"
)


class PostgresStore(BaseStore):
    """A ``Store`` in PostgreSQL. ``dsn`` is a libpq connection string; ``schema`` (created if
    missing) holds the tables, else the server's default search path decides. ``keyring``,
    ``require_encryption`` and ``clock`` as for ``SQLiteStore``. The pool (``min_size``..
    ``max_size`` connections) opens on first use or ``async with``; ``StoreError`` if it cannot
    connect within ``open_timeout`` seconds.

    ``search`` is full-text search (``tsvector`` of the words between punctuation, GIN,
    ``ts_rank_cd``) over the owner's plaintext messages, the index catching up first. With a
    keyring no index is written: the owner's conversations are decrypted and scanned, bounded
    (``max_conversations``, ``max_bytes``)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        keyring: Keyring | None = None,
        require_encryption: bool | None = None,
        min_size: int = 1,
        max_size: int = 10,
        open_timeout: float = 30.0,
        clock: Callable[[], float] = now,
    ) -> None:
        if schema is not None:
            schema = check_id(schema, "schema")
        if not callable(clock):
            raise UserError("clock must be a function returning seconds since the epoch")
        self.schema = schema
        self._codec = RowCodec(keyring, require_encryption)
        self._clock = clock
        self._db = PostgresPool(
            dsn,
            schema=schema,
            label="PostgresStore",
            migrate=self._migrate,
            min_size=min_size,
            max_size=max_size,
            open_timeout=open_timeout,
        )

    async def __aenter__(self) -> Self:
        await self._db.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the pool. Idempotent."""
        await self._db.close()

    async def _migrate(self, conn: Conn) -> None:
        await migrate(conn, self.schema, self._codec)

    async def _writable(self) -> None:
        """Refuse to write plaintext into a sealed database (its state is read on opening)."""
        await self._db.open()
        self._codec.check_writable()

    @staticmethod
    async def _row(conn: Conn, owner: str, conversation_id: str, *, lock: bool = False) -> tuple[Any, ...]:
        cursor = await conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = %s AND id = %s"
            + (" FOR SHARE" if lock else ""),
            (owner, conversation_id),
        )
        row = await cursor.fetchone()
        if row is None:
            raise not_found(conversation_id)
        return row

    # -- conversations --------------------------------------------------------------------------
    async def _create(self, owner: str, conversation_id: str, exist_ok: bool) -> str:
        cid = conversation_id
        t = self._clock()
        async with self._db.tx() as conn:
            cursor = await conn.execute(
                "INSERT INTO tether_conversations (owner, id, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (owner, id) DO NOTHING RETURNING pk",
                (owner, cid, t, t),
            )
            if await cursor.fetchone() is None:
                if exist_ok:
                    return cid
                existing = await self._row(conn, owner, cid)
                raise exists(cid, existing[2])
            if exist_ok:
                await _refuse_deleted(conn, owner, cid)
            else:
                await conn.execute(UNDELETE.replace("?", "%s"), (owner, cid))
        return cid

    async def _append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        encoded: list[bytes],
        facts: BatchFacts,
        expected_version: int | None,
    ) -> int:
        codec = self._codec
        await self._writable()
        if expected_version is not None and encoded and expected_version + len(encoded) <= MAX_COUNT:
            stored = await self._append_at(owner, conversation_id, encoded, facts, expected_version)
            if stored is not None:
                return stored
        async with self._db.tx() as conn:
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

    async def _append_at(
        self, owner: str, conversation_id: str, encoded: list[bytes], facts: BatchFacts, expected: int
    ) -> int | None:
        """The append of a batch expected at version ``expected`` in one statement (one round
        trip, atomic on its own): the conversation row moves only from ``expected``, under its row
        lock, and the batch goes in only if it moved. ``None`` when it did not (no such
        conversation, another version, or results that may close ledger entries): the caller
        takes the locked path, which tells these apart."""
        codec = self._codec
        rows = codec.seal(owner, conversation_id, expected + 1, encoded)
        preview_key, preview = codec.seal_preview(owner, conversation_id, facts.preview)
        new_version = expected + len(encoded)
        async with self._db.tx(single=True) as conn:
            cursor = await conn.execute(
                _APPEND_AT,
                {
                    "owner": owner,
                    "id": conversation_id,
                    "expected": expected,
                    "version": new_version,
                    "t": self._clock(),
                    "model": facts.last_model,
                    "preview_key": preview_key,
                    "preview": preview,
                    "results": bool(facts.results),
                    "seqs": [r[0] for r in rows],
                    "keys": [r[1] for r in rows],
                    "data": [r[2] for r in rows],
                },
            )
            return new_version if cursor.rowcount == len(rows) else None

    async def _load(
        self, owner: str, conversation_id: str, tail: int | None, since: int | None, on_corrupt: OnCorrupt
    ) -> Loaded:
        async with self._db.tx() as conn:
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
            if version < 0:
                raise CorruptRecord(
                    f"conversation row holds version {version}", conversation_id=conversation_id, seq=0
                )
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

    async def _conversations(self, owner: str, limit: int | None, offset: int) -> list[ConversationInfo]:
        async with self._db.tx() as conn:
            cursor = await conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = %s "
                "ORDER BY updated_at DESC, pk DESC LIMIT %s OFFSET %s",
                (owner, limit, offset),
            )
            rows = await cursor.fetchall()
        return [self._codec.info(owner, r) for r in rows]

    async def _info(self, owner: str, conversation_id: str) -> ConversationInfo:
        async with self._db.tx() as conn:
            row = await self._row(conn, owner, conversation_id)
        return self._codec.info(owner, row)

    async def _fork(self, owner: str, conversation_id: str, at_version: int | None, target: str) -> str:
        codec = self._codec
        await self._writable()
        async with self._db.tx() as conn:
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
                raise exists(target, existing[2])
            await conn.execute(UNDELETE.replace("?", "%s"), (owner, target))
            copied = codec.copy_rows(owner, conversation_id, target, rows)
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO tether_messages (conversation, seq, key_id, data) VALUES (%s, %s, %s, %s)",
                    [(created[0], *r) for r in copied],
                )
            await recs.copy_records(conn, codec, owner, (conversation_id, pk), (target, created[0]), at)
        return target

    async def _delete(self, owner: str, conversation_id: str) -> None:
        # messages, ledger entries, records and index rows go by ON DELETE CASCADE
        async with self._db.tx() as conn:
            cursor = await conn.execute(
                "DELETE FROM tether_conversations WHERE owner = %s AND id = %s", (owner, conversation_id)
            )
            if cursor.rowcount != 1:
                raise not_found(conversation_id)

    async def _expire_claims(self, t: float) -> None:
        async with self._db.tx() as conn:
            await ledger.purge_guards(conn, t)

    async def _delete_idle(self, cutoff: float, owner: str | None) -> int:
        where, params = idle_filter(cutoff, owner, "%s")
        async with self._db.tx() as conn:
            cursor = await conn.execute(f"DELETE FROM tether_conversations WHERE {where}", params)
            return cursor.rowcount

    async def _idle(self, cutoff: float, owner: str | None) -> list[tuple[str, str]]:
        where, params = idle_filter(cutoff, owner, "%s")
        async with self._db.tx() as conn:
            cursor = await conn.execute(f"SELECT owner, id FROM tether_conversations WHERE {where}", params)
            return [(str(r[0]), str(r[1])) for r in await cursor.fetchall()]

    async def _delete_if_unchanged(
        self, owner: str, conversation_id: str, version: int, cutoff: float
    ) -> bool:
        async with self._db.tx() as conn:
            cursor = await conn.execute(
                "DELETE FROM tether_conversations WHERE owner = %s AND id = %s AND version = %s "
                "AND updated_at < %s",
                (owner, conversation_id, version, cutoff),
            )
            return cursor.rowcount == 1

    # -- the tool-effect ledger and replay guard ------------------------------------------------
    async def _record_tool_started(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, tool_name: str, arguments: str
    ) -> bool:
        await self._writable()
        sealed = self._codec.seal_field(owner, conversation_id, "tool", call_id, arguments)
        where = (owner, conversation_id)
        async with self._db.tx(single=True) as conn:  # one round trip when the entry is new
            if await ledger.start_call_at(conn, where, run_id, call_id, tool_name, sealed, self._clock()):
                return True
        async with self._db.tx() as conn:  # nothing written: tell no conversation from an open entry
            pk = (await self._row(conn, owner, conversation_id))[0]
            return await ledger.start_call(conn, pk, run_id, call_id, tool_name, sealed, self._clock())

    async def _record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, failed: bool
    ) -> None:
        where = (owner, conversation_id)
        async with self._db.tx(single=True) as conn:
            if await ledger.finish_call_at(conn, where, run_id, call_id, failed, self._clock()):
                return
        async with self._db.tx() as conn:  # nothing written: which error
            pk = (await self._row(conn, owner, conversation_id))[0]
            if not await ledger.finish_call(conn, pk, run_id, call_id, failed, self._clock()):
                raise unknown_call(call_id, run_id)

    async def _pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        async with self._db.tx() as conn:
            rows = await ledger.pending_rows(conn, (await self._row(conn, owner, conversation_id))[0])
        return self._codec.effects(owner, conversation_id, rows)

    async def _claim_token(self, digest: str, expires_at: float) -> bool:
        # one statement, atomic on its own: stores of every process agree on the single winner
        async with self._db.tx(single=True) as conn:
            return await ledger.claim(conn, digest, expires_at, self._clock())

    # -- compaction records and search ------------------------------------------------------------
    async def _append_record(self, owner: str, record: CompactionRecord) -> None:
        await self._writable()
        async with self._db.tx() as conn:
            row = await self._row(conn, owner, record.conversation_id, lock=True)
            await recs.append_record(conn, self._codec, owner, record, row[0], row[2])

    async def _latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        async with self._db.tx() as conn:
            pk = (await self._row(conn, owner, conversation_id))[0]
            return await recs.latest_record(conn, self._codec, owner, conversation_id, pk)

    async def _records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        async with self._db.tx() as conn:
            pk = (await self._row(conn, owner, conversation_id))[0]
            return await recs.records(conn, self._codec, owner, conversation_id, pk)

    async def _delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        async with self._db.tx() as conn:
            pk = (await self._row(conn, owner, conversation_id))[0]
            await recs.delete_record(conn, conversation_id, pk, record_id)

    async def _search(
        self, owner: str, query: str, terms: list[str], limit: int, max_conversations: int, max_bytes: int
    ) -> SearchResults:
        if self._codec.keyring is not None:
            return await scan_store(
                self, owner, query, limit=limit, max_conversations=max_conversations, max_bytes=max_bytes
            )
        async with self._db.tx() as conn:
            hits, count = await recs.fts_search(conn, owner, terms, limit)
        return SearchResults(tuple(hits), "postgres", count)

    # -- maintenance --------------------------------------------------------------------------
    async def reencrypt(self, *, batch: int = 500) -> int:
        """Re-seal every row not sealed with the keyring's current key, then record the database
        as sealed; see ``SQLiteStore.reencrypt``."""
        size = check_batch(batch)
        codec = self._codec

        async def one_batch(current: str) -> int:
            async with self._db.tx() as conn:
                return await reseal_or_mark(conn, codec, current, size)

        total = await reencrypt_batches(codec.current, one_batch)
        codec.settle(True)
        return total


async def _refuse_deleted(conn: Conn, owner: str, cid: str) -> None:
    """``deleted`` when ``(owner, cid)`` was a deleted conversation. Checked after the insert, in
    its transaction: an insert that waited on the row of a delete committing meanwhile sees the
    delete's record here (a statement's snapshot starts after that wait), and rolls back."""
    cursor = await conn.execute(DELETED.replace("?", "%s"), (owner, cid))
    if await cursor.fetchone() is not None:
        raise deleted(cid)
