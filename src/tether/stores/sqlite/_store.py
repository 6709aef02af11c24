"""``SQLiteStore``: the default store — one file, WAL, safe for several processes on one machine.

Every call runs on one dedicated thread per store (``SQLiteThread``: the event loop never blocks on
SQLite). Writes take ``BEGIN IMMEDIATE`` so concurrent writers — threads or processes — queue on the
database lock (``busy_timeout``) instead of failing half way; each batch commits atomically or not
at all. The arguments are checked by ``BaseStore``; this module is the SQL.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Literal, Self, cast

from tether.errors import CorruptRecord, StoreError, TetherError, UserError
from tether.messages import Message
from tether.stores._base import BaseStore
from tether.stores._common import (
    CONVERSATION_COLUMNS,
    DELETED,
    UNDELETE,
    BatchFacts,
    batch_facts,
    check_batch,
    conflict,
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
from tether.stores._search import Listed, scan_store
from tether.stores.sqlite import _ledger as ledger
from tether.stores.sqlite import _records as recs
from tether.stores.sqlite._db import SQLiteThread
from tether.stores.sqlite._rotate import reseal_or_mark
from tether.stores.sqlite._schema import connect

__all__ = ["SQLiteStore"]

_SPAN = 1 << 32  # message row id = conversation pk * _SPAN + seq (see _migrations)
_Row = tuple[Any, ...]


class SQLiteStore(BaseStore):
    """A ``Store`` in one SQLite file (created with its schema on first use).

    ``keyring`` turns on encryption at rest for new rows (see ``Keyring``; ``reencrypt`` rotates).
    ``require_encryption`` refuses rows that are not sealed (``CorruptRecord``): ``True`` always,
    ``False`` never, ``None`` (default) once the database records that every row is sealed (a
    database created empty with a keyring, or after ``reencrypt``) — see ADR 0003.
    ``synchronous`` is SQLite's durability setting: ``"NORMAL"`` (default; with WAL a killed process
    never loses a committed batch, a power cut may lose the last ones) or ``"FULL"``.
    ``mmap_size`` is how many bytes of the file SQLite reads through a memory map (0: none).
    ``clock`` returns seconds since the epoch.

    ``search`` uses FTS5 (BM25, snippets) over the owner's plaintext messages, the index catching
    up first. With a keyring no index is written: the owner's conversations are decrypted and
    scanned, bounded (``max_conversations``, ``max_bytes``). A SQLite built without FTS5 scans
    too, and the result says so.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        keyring: Keyring | None = None,
        require_encryption: bool | None = None,
        busy_timeout: float = 30.0,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        mmap_size: int = 256 * 1024 * 1024,
        clock: Callable[[], float] = now,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise UserError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        if type(busy_timeout) not in (int, float) or not 0 <= busy_timeout <= 86_400:
            raise UserError(f"busy_timeout must be seconds from 0 to 86400, not {busy_timeout!r}")
        if not callable(clock):
            raise UserError("clock must be a function returning seconds since the epoch")
        try:
            self.path = os.fspath(path)
        except TypeError:
            raise UserError(f"path must be a file path, not a {type(path).__name__}") from None
        if "\x00" in str(self.path):
            raise UserError("path must not contain a NUL character")
        self._codec = RowCodec(keyring, require_encryption)
        self._busy_timeout = busy_timeout
        self._synchronous = synchronous
        if type(mmap_size) is not int or mmap_size < 0:
            raise UserError(f"mmap_size must be an int >= 0, not {mmap_size!r}")
        self._mmap_size = mmap_size
        self._clock = clock
        self._fts = False
        self._db = SQLiteThread(self.path, self._connect, name="tether-sqlite", label="SQLiteStore")

    async def __aenter__(self) -> Self:
        await self._db.open()  # connects (and migrates) now
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection and its thread. Idempotent."""
        await self._db.close()

    def _connect(self) -> sqlite3.Connection:
        """The connection, migrated, on the store's thread (``SQLiteThread`` calls it once)."""
        conn = connect(self.path, self._busy_timeout, self._synchronous, self._mmap_size, self._codec)
        self._fts = recs.create_index(conn)
        return conn

    @staticmethod
    def _row(conn: sqlite3.Connection, owner: str, conversation_id: str) -> _Row:
        row = conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = ? AND id = ?",
            (owner, conversation_id),
        ).fetchone()
        if row is None:
            raise not_found(conversation_id)
        return row

    # -- conversations --------------------------------------------------------------------------
    async def _create(self, owner: str, conversation_id: str, exist_ok: bool) -> str:
        cid = conversation_id

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

    async def _load(
        self, owner: str, conversation_id: str, tail: int | None, since: int | None, on_corrupt: OnCorrupt
    ) -> Loaded:
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

    async def _conversations(self, owner: str, limit: int | None, offset: int) -> list[ConversationInfo]:
        def read(conn: sqlite3.Connection) -> list[ConversationInfo]:
            rows = conn.execute(
                f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = ? "
                "ORDER BY updated_at DESC, pk DESC LIMIT ? OFFSET ?",
                (owner, -1 if limit is None else limit, offset),
            ).fetchall()
            return [self._codec.info(owner, r) for r in rows]

        return await self._db.read(read)

    async def _info(self, owner: str, conversation_id: str) -> ConversationInfo:
        return await self._db.read(
            lambda conn: self._codec.info(owner, self._row(conn, owner, conversation_id))
        )

    async def _fork(self, owner: str, conversation_id: str, at_version: int | None, target: str) -> str:
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

    async def _delete(self, owner: str, conversation_id: str) -> None:
        def tx(conn: sqlite3.Connection) -> None:
            _delete(conn, self._row(conn, owner, conversation_id)[0], self._fts)

        await self._db.write(tx)

    async def _expire_claims(self, t: float) -> None:
        await self._db.write(lambda conn: ledger.purge_guards(conn, t))

    async def _delete_idle(self, cutoff: float, owner: str | None) -> int:
        where, params = idle_filter(cutoff, owner, "?")

        def tx(conn: sqlite3.Connection) -> int:
            pks = [r[0] for r in conn.execute(f"SELECT pk FROM tether_conversations WHERE {where}", params)]
            for pk in pks:
                _delete(conn, pk, self._fts)
            return len(pks)

        return await self._db.write(tx)

    async def _idle(self, cutoff: float, owner: str | None) -> list[tuple[str, str]]:
        where, params = idle_filter(cutoff, owner, "?")
        rows = await self._db.all(f"SELECT owner, id FROM tether_conversations WHERE {where}", params)
        return [(r[0], r[1]) for r in rows]

    async def _delete_if_unchanged(
        self, owner: str, conversation_id: str, version: int, cutoff: float
    ) -> bool:
        def tx(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT pk FROM tether_conversations "
                "WHERE owner = ? AND id = ? AND version = ? AND updated_at < ?",
                (owner, conversation_id, version, cutoff),
            ).fetchone()
            if row is not None:
                _delete(conn, row[0], self._fts)
            return row is not None

        return await self._db.write(tx)

    # -- the tool-effect ledger and replay guard ------------------------------------------------
    async def _record_tool_started(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, tool_name: str, arguments: str
    ) -> bool:
        sealed = self._codec.seal_field(owner, conversation_id, "tool", call_id, arguments)

        def tx(conn: sqlite3.Connection) -> bool:
            self._codec.check_writable()
            pk = self._row(conn, owner, conversation_id)[0]
            return ledger.start_call(conn, pk, run_id, call_id, tool_name, sealed, self._clock())

        return await self._db.write(tx)

    async def _record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, failed: bool
    ) -> None:
        def tx(conn: sqlite3.Connection) -> None:
            pk = self._row(conn, owner, conversation_id)[0]
            if not ledger.finish_call(conn, pk, run_id, call_id, failed, self._clock()):
                raise unknown_call(call_id, run_id)

        await self._db.write(tx)

    async def _pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        codec = self._codec

        def read(conn: sqlite3.Connection) -> list[ToolEffect]:
            rows = ledger.pending_rows(conn, self._row(conn, owner, conversation_id)[0])
            return codec.effects(owner, conversation_id, rows)

        return await self._db.read(read)

    async def _claim_token(self, digest: str, expires_at: float) -> bool:
        # one BEGIN IMMEDIATE transaction: claims of every process on the file queue on the lock
        return await self._db.write(lambda conn: ledger.claim(conn, digest, expires_at, self._clock()))

    # -- compaction records and search ------------------------------------------------------------
    async def _append_record(self, owner: str, record: CompactionRecord) -> None:
        codec = self._codec

        def tx(conn: sqlite3.Connection) -> None:
            codec.check_writable()
            row = self._row(conn, owner, record.conversation_id)
            recs.append_record(conn, codec, owner, record, row[0], row[2])

        await self._db.write(tx)

    async def _latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        def read(conn: sqlite3.Connection) -> CompactionRecord | None:
            pk = self._row(conn, owner, conversation_id)[0]
            return recs.latest_record(conn, self._codec, owner, conversation_id, pk)

        return await self._db.read(read)

    async def _records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        def read(conn: sqlite3.Connection) -> list[CompactionRecord]:
            pk = self._row(conn, owner, conversation_id)[0]
            return recs.records(conn, self._codec, owner, conversation_id, pk)

        return await self._db.read(read)

    async def _delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        def tx(conn: sqlite3.Connection) -> None:
            recs.delete_record(conn, conversation_id, self._row(conn, owner, conversation_id)[0], record_id)

        await self._db.write(tx)

    async def _search(
        self, owner: str, query: str, terms: list[str], limit: int, max_conversations: int, max_bytes: int
    ) -> SearchResults:
        await self._db.open()  # connected: the FTS5 and keyring facts are known
        if self._codec.keyring is None and self._fts:
            hits, count = await self._db.write(lambda conn: recs.fts_search(conn, owner, terms, limit))
            return SearchResults(tuple(hits), "fts5", count)
        listed = cast(Listed, self)  # a SQLiteStore, which lists and loads
        found = await scan_store(
            listed, owner, query, limit=limit, max_conversations=max_conversations, max_bytes=max_bytes
        )
        if self._codec.keyring is None:  # no FTS5 in this SQLite
            note = "this SQLite has no FTS5: the messages were scanned"
            return SearchResults(
                found.hits,
                "scan",
                found.conversations,
                found.complete,
                f"{found.note}; {note}" if found.note else note,
            )
        return found

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
