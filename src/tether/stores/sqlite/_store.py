"""``SQLiteStore``: the default store — one file, WAL, safe for several processes on one machine.

Every call runs on one dedicated thread per store (the event loop never blocks on SQLite). Writes
take ``BEGIN IMMEDIATE`` so concurrent writers — threads or processes — queue on the database
lock (``busy_timeout``) instead of failing half way; each batch commits atomically or not at all.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from tether.errors import CorruptRecord, StoreError, TetherError
from tether.messages import Message
from tether.stores._common import (
    CONVERSATION_COLUMNS,
    DELETED,
    UNDELETE,
    batch_facts,
    check_append,
    check_batch,
    check_call,
    check_claim,
    check_failed,
    check_id,
    check_ids,
    check_load,
    check_optional_count,
    check_paging,
    check_purge,
    check_tool_call,
    conflict,
    deleted,
    encode_batch,
    exists,
    fork_point,
    id_or_new,
    idle_filter,
    load_offset,
    not_found,
    purge_cutoff,
    purge_with_hook,
    reencrypt_batches,
    unknown_call,
)
from tether.stores._protocol import (
    ConversationInfo,
    ExpireHook,
    Loaded,
    OnCorrupt,
    ToolEffect,
)
from tether.stores._rows import RowCodec
from tether.stores.sqlite import _ledger as ledger
from tether.stores.sqlite import _records as recs
from tether.stores.sqlite._rotate import reseal_or_mark
from tether.stores.sqlite._search import SQLiteSearch

__all__ = ["SQLiteStore"]

_SPAN = 1 << 32  # message row id = conversation pk * _SPAN + seq (see _migrations)


class SQLiteStore(SQLiteSearch):
    """A ``Store`` in one SQLite file (created with its schema on first use).

    ``keyring`` turns on encryption at rest for new rows (see ``Keyring``; ``reencrypt`` rotates).
    ``require_encryption`` refuses rows that are not sealed (``CorruptRecord``): ``True`` always,
    ``False`` never, ``None`` (default) once the database records that every row is sealed (a
    database created empty with a keyring, or after ``reencrypt``) — see ADR 0003.
    ``synchronous`` is SQLite's durability setting: ``"NORMAL"`` (default; with WAL a killed process
    never loses a committed batch, a power cut may lose the last ones) or ``"FULL"``.
    ``mmap_size`` is how many bytes of the file SQLite reads through a memory map (0: none).
    ``clock`` returns seconds since the epoch.
    """

    # -- the Store protocol -------------------------------------------------------------------
    async def create(self, owner: str, conversation_id: str | None = None, *, exist_ok: bool = False) -> str:
        """See ``Store.create``."""
        owner = check_id(owner, "owner")
        cid = id_or_new(conversation_id, "conversation_id")

        def tx(conn: sqlite3.Connection) -> str:
            row = conn.execute(
                "SELECT version FROM tether_conversations WHERE owner = ? AND id = ?", (owner, cid)
            ).fetchone()
            if row is not None:
                if exist_ok:
                    return cid
                raise exists(cid, row[0])
            if not exist_ok:
                conn.execute(UNDELETE, (owner, cid))
            elif conn.execute(DELETED, (owner, cid)).fetchone() is not None:
                raise deleted(cid)
            t = self._clock()
            conn.execute(
                "INSERT INTO tether_conversations (owner, id, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (owner, cid, t, t),
            )
            return cid

        return await self._db.write(tx)

    async def append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int | None = None,
    ) -> int:
        """See ``Store.append``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        check_append(messages, expected_version)
        encoded = encode_batch(messages)
        facts = batch_facts(messages)
        codec = self._codec
        n = len(encoded)
        clock = self._clock

        def tx(conn: sqlite3.Connection) -> int:
            codec.check_writable()  # the database's recorded state is known once connected
            # one statement checks the owner and expected_version and bumps the version (the row is
            # write-locked from here to COMMIT); nothing matched: missing, foreign or a conflict
            found = conn.execute(
                _BUMP, (n, clock(), facts.last_model, owner, conversation_id, expected_version)
            ).fetchall()  # exhausted: the statement is reset before COMMIT
            if not found:
                raise _missing_or_conflict(conn, owner, conversation_id, expected_version)
            pk, new_version, no_preview, open_effects = found[0]
            if not n:
                return new_version
            first = new_version - n + 1
            if new_version >= _SPAN:
                raise StoreError(f"a conversation holds at most {_SPAN - 1} messages")
            base = pk * _SPAN
            if codec.keyring is None:  # plaintext: the encoded JSON goes in as it is
                conn.executemany(
                    _INSERT, [(base + first + i, pk, first + i, None, data) for i, data in enumerate(encoded)]
                )
            else:
                conn.executemany(
                    _INSERT,
                    [
                        (base + seq, pk, seq, key, data)
                        for seq, key, data in codec.seal(owner, conversation_id, first, encoded)
                    ],
                )
            if open_effects and facts.results:  # results stored: close their ledger entries
                closed = conn.executemany(
                    "UPDATE tether_tool_effects SET stored_seq = ? WHERE conversation = ? "
                    "AND call_id = ? AND stored_seq IS NULL AND (? IS NULL OR run_id = ?)",
                    [(new_version, pk, call_id, run_id, run_id) for run_id, call_id in facts.results],
                ).rowcount
                if closed:
                    conn.execute(
                        "UPDATE tether_conversations SET open_effects = open_effects - ? WHERE pk = ?",
                        (closed, pk),
                    )
            if no_preview and facts.preview is not None:  # the first user text names the conversation
                preview_key, preview = codec.seal_preview(owner, conversation_id, facts.preview)
                conn.execute(
                    "UPDATE tether_conversations SET preview_key = ?, preview = ? WHERE pk = ?",
                    (preview_key, preview, pk),
                )
            return new_version

        return await self._db.write(tx)

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
        owner, conversation_id = check_ids(owner, conversation_id)
        check_load(tail, since, on_corrupt)

        def read(conn: sqlite3.Connection) -> Loaded:
            row = conn.execute(
                "SELECT pk, version FROM tether_conversations WHERE owner = ? AND id = ?",
                (owner, conversation_id),
            ).fetchone()
            if row is None:
                raise not_found(conversation_id)
            pk, version = row
            if type(version) is not int or not 0 <= version < _SPAN:
                raise CorruptRecord(
                    f"conversation row holds version {version!r}", conversation_id=conversation_id, seq=0
                )
            offset = load_offset(conversation_id, version, tail, since)
            window = (pk * _SPAN + offset, pk * _SPAN + version)
            if self._codec.keyring is None:  # fast path: only the JSON, one decode call per row
                datas = conn.execute(
                    "SELECT data FROM tether_messages WHERE id > ? AND id <= ? ORDER BY id", window
                ).fetchall()
                messages = RowCodec.decode_plain(datas) if len(datas) == version - offset else None
                del datas
                if messages is not None:
                    return Loaded(conversation_id, tuple(messages), version, offset)
            rows = conn.execute(
                "SELECT seq, key_id, data FROM tether_messages WHERE id > ? AND id <= ? ORDER BY id", window
            ).fetchall()
            messages, bad = self._codec.decode_rows(
                owner, conversation_id, rows, offset + 1, version, on_corrupt
            )
            return Loaded(conversation_id, tuple(messages), version, offset, tuple(bad))

        return await self._db.read(read)

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]:
        """See ``Store.conversations``."""
        owner = check_id(owner, "owner")
        limit, offset = check_paging(limit, offset)

        def read(conn: sqlite3.Connection) -> list[ConversationInfo]:
            rows = conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = ? "
                "ORDER BY updated_at DESC, pk DESC LIMIT ? OFFSET ?",
                (owner, -1 if limit is None else limit, offset),
            ).fetchall()
            return [self._codec.info(owner, r) for r in rows]

        return await self._db.read(read)

    async def info(self, owner: str, conversation_id: str) -> ConversationInfo:
        """See ``Store.info``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        return await self._db.read(
            lambda conn: self._codec.info(owner, self._row(conn, owner, conversation_id))
        )

    async def fork(
        self,
        owner: str,
        conversation_id: str,
        at_version: int | None = None,
        new_id: str | None = None,
    ) -> str:
        """See ``Store.fork``. Encrypted rows are re-sealed for the new conversation."""
        owner, conversation_id = check_ids(owner, conversation_id)
        at_version = check_optional_count(at_version, "at_version")
        target = id_or_new(new_id, "new_id")
        codec = self._codec

        def tx(conn: sqlite3.Connection) -> str:
            codec.check_writable()
            source = self._row(conn, owner, conversation_id)
            pk, at = source[0], fork_point(at_version, source[2])
            existing = conn.execute(
                "SELECT version FROM tether_conversations WHERE owner = ? AND id = ?", (owner, target)
            ).fetchone()
            if existing is not None:
                raise exists(target, existing[0])
            conn.execute(UNDELETE, (owner, target))
            rows = conn.execute(
                "SELECT seq, key_id, data FROM tether_messages WHERE id > ? AND id <= ? ORDER BY id",
                (pk * _SPAN, pk * _SPAN + at),
            ).fetchall()
            messages, _ = codec.decode_rows(owner, conversation_id, rows, 1, at, "raise")
            facts = batch_facts(messages)
            t = self._clock()
            preview_key, preview = codec.seal_preview(owner, target, facts.preview)
            cursor = conn.execute(
                "INSERT INTO tether_conversations (owner, id, version, created_at, updated_at, preview_key, "
                "preview, last_model, forked_from, forked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (owner, target, at, t, t, preview_key, preview, facts.last_model, conversation_id, at),
            )
            new_pk = int(cursor.lastrowid or 0)  # always set after a one-row INSERT
            conn.executemany(
                "INSERT INTO tether_messages (id, conversation, seq, key_id, data) VALUES (?, ?, ?, ?, ?)",
                _message_rows(new_pk, codec.copy_rows(owner, conversation_id, target, rows)),
            )
            recs.copy_records(conn, codec, owner, (conversation_id, pk), (target, new_pk), at)
            return target

        return await self._db.write(tx)

    async def delete(self, owner: str, conversation_id: str) -> None:
        """See ``Store.delete``."""
        owner, conversation_id = check_ids(owner, conversation_id)

        def tx(conn: sqlite3.Connection) -> None:
            _delete(conn, self._row(conn, owner, conversation_id)[0], self._fts)

        await self._db.write(tx)

    async def purge(
        self,
        older_than: timedelta,
        *,
        owner: str | None = None,
        on_expire: ExpireHook | None = None,
    ) -> int:
        """See ``Store.purge``. Without a hook every idle conversation goes in one transaction;
        with one, each is deleted after its hook returns True, unless it was appended to meanwhile."""
        check_purge(older_than, owner, on_expire)
        owner = None if owner is None else check_id(owner, "owner")
        t = self._clock()
        cutoff = purge_cutoff(t, older_than)
        where, params = idle_filter(cutoff, owner, "?")
        await self._db.write(lambda conn: ledger.purge_guards(conn, t))

        if on_expire is None:

            def purge_all(conn: sqlite3.Connection) -> int:
                pks = [
                    r[0] for r in conn.execute(f"SELECT pk FROM tether_conversations WHERE {where}", params)
                ]
                for pk in pks:
                    _delete(conn, pk, self._fts)
                return len(pks)

            return await self._db.write(purge_all)

        idle: list[tuple[str, str]] = await self._db.read(
            lambda conn: [
                (r[0], r[1])
                for r in conn.execute(f"SELECT owner, id FROM tether_conversations WHERE {where}", params)
            ],
        )

        async def delete_if_unchanged(o: str, cid: str, version: int) -> bool:
            def tx(conn: sqlite3.Connection) -> bool:
                row = conn.execute(
                    "SELECT pk FROM tether_conversations "
                    "WHERE owner = ? AND id = ? AND version = ? AND updated_at < ?",
                    (o, cid, version, cutoff),
                ).fetchone()
                if row is not None:
                    _delete(conn, row[0], self._fts)
                return row is not None

            return await self._db.write(tx)

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
        owner, conversation_id = check_ids(owner, conversation_id)
        run_id, call_id, tool_name, arguments = check_tool_call(run_id, call_id, tool_name, arguments)
        sealed = self._codec.seal_field(owner, conversation_id, "tool", call_id, arguments)

        def tx(conn: sqlite3.Connection) -> bool:
            self._codec.check_writable()
            pk = self._row(conn, owner, conversation_id)[0]
            return ledger.start_call(conn, pk, run_id, call_id, tool_name, sealed, self._clock())

        return await self._db.write(tx)

    async def record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, *, failed: bool = False
    ) -> None:
        """See ``Store.record_tool_finished``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        run_id, call_id = check_call(run_id, call_id)
        failed = check_failed(failed)

        def tx(conn: sqlite3.Connection) -> None:
            pk = self._row(conn, owner, conversation_id)[0]
            if not ledger.finish_call(conn, pk, run_id, call_id, failed, self._clock()):
                raise unknown_call(call_id, run_id)

        await self._db.write(tx)

    async def pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        """See ``Store.pending_tool_effects``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        codec = self._codec

        def read(conn: sqlite3.Connection) -> list[ToolEffect]:
            rows = ledger.pending_rows(conn, self._row(conn, owner, conversation_id)[0])
            return codec.effects(owner, conversation_id, rows)

        return await self._db.read(read)

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        """See ``Store.claim_token``. One ``BEGIN IMMEDIATE`` transaction: claims of every process
        on the file queue on the database lock."""
        digest, expires_at = check_claim(digest, expires_at)
        return await self._db.write(lambda conn: ledger.claim(conn, digest, expires_at, self._clock()))

    # -- maintenance --------------------------------------------------------------------------
    async def reencrypt(self, *, batch: int = 500) -> int:
        """Re-seal every row not sealed with the keyring's current key (including plaintext rows)
        and return how many were rewritten. Runs in transactions of ``batch`` rows, so it can run
        while the store is in use; afterwards keys other than ``current`` can be retired. The last
        transaction, finding nothing left to seal, records the database as sealed: from then on a
        store opened with a keyring refuses unsealed rows unless ``require_encryption=False``
        (in strict mode ``reencrypt`` itself refuses an unsealed row instead of sealing it)."""
        size = check_batch(batch)
        codec = self._codec

        async def one_batch(current: str) -> int:
            return await self._db.write(lambda conn: reseal_or_mark(conn, codec, current, size, self._fts))

        total = await reencrypt_batches(codec.current, one_batch)
        codec.settle(True)
        return total


# a batch of n messages: the version moves by n only when the expected version (if given) matches
_BUMP = (
    "UPDATE tether_conversations SET version = version + ?1, updated_at = IIF(?1, ?2, updated_at), "
    "last_model = COALESCE(?3, last_model) "
    "WHERE owner = ?4 AND id = ?5 AND (?6 IS NULL OR version = ?6) "
    "RETURNING pk, version, preview IS NULL, open_effects"
)
_INSERT = "INSERT INTO tether_messages (id, conversation, seq, key_id, data) VALUES (?, ?, ?, ?, ?)"


def _missing_or_conflict(
    conn: sqlite3.Connection, owner: str, conversation_id: str, expected: int | None
) -> TetherError:
    row = conn.execute(
        "SELECT version FROM tether_conversations WHERE owner = ? AND id = ?", (owner, conversation_id)
    ).fetchone()
    if row is None or expected is None:
        return not_found(conversation_id)
    return conflict(conversation_id, expected, row[0])


def _message_rows(pk: int, rows: list[tuple[int, str | None, bytes]]) -> list[tuple[Any, ...]]:
    if rows and rows[-1][0] >= _SPAN:
        raise StoreError(f"a conversation holds at most {_SPAN - 1} messages")
    base = pk * _SPAN
    return [(base + seq, pk, seq, key_id, data) for seq, key_id, data in rows]


def _delete(conn: sqlite3.Connection, pk: int, fts: bool) -> None:
    recs.delete_index(conn, pk, fts)
    conn.execute("DELETE FROM tether_messages WHERE id > ? AND id < ?", (pk * _SPAN, (pk + 1) * _SPAN))
    conn.execute("DELETE FROM tether_tool_effects WHERE conversation = ?", (pk,))
    conn.execute("DELETE FROM tether_conversations WHERE pk = ?", (pk,))
