"""SQLite queries of compaction records and of the full-text index (run on the store's thread,
inside the transaction ``SQLiteStore`` opened).

The index is an FTS5 table, ``tether_search(role UNINDEXED, body)``, whose rowid is the message
row's id (conversation pk * 2**32 + seq). It holds the transcript text of plaintext messages
only and is never written by a store with a keyring. It catches up on search: the conversation
row's ``indexed`` column says how many messages it holds, so an append costs nothing more, and a
database made before the index existed is indexed by its first search. A hit counts only up to
``indexed`` of a conversation that still exists, so rows a deleted conversation left behind
(a store without FTS5 cannot delete them) never show.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from tether.messages import Message
from tether.stores._protocol import MessageHit
from tether.stores._records import CompactionRecord, boundary_error, duplicate_record, record_not_found
from tether.stores._rows import RowCodec
from tether.stores._search import SNIPPET_CHARS, index_text

__all__ = [
    "SEARCH_TABLE",
    "append_record",
    "copy_records",
    "create_index",
    "delete_index",
    "delete_record",
    "drop_index",
    "fts_search",
    "latest_record",
    "records",
    "reseal_records",
]

SEARCH_TABLE = "tether_search"
_SPAN = 1 << 32
_message_decoder = msgspec.json.Decoder(Message)
_COLUMNS = "id, key_id, data"
_INSERT = "INSERT INTO tether_compactions (conversation, id, boundary, key_id, data) VALUES (?, ?, ?, ?, ?)"


def create_index(conn: sqlite3.Connection) -> bool:
    """Create the FTS5 index if missing; False when this SQLite has no FTS5 (search scans)."""
    try:
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {SEARCH_TABLE} USING fts5(role UNINDEXED, body)")
    except sqlite3.OperationalError:
        return False
    return True


# -- records ---------------------------------------------------------------------------------------
def append_record(
    conn: sqlite3.Connection, codec: RowCodec, owner: str, record: CompactionRecord, pk: int, version: int
) -> None:
    if record.boundary > version:
        raise boundary_error(record, version)
    key_id, data = codec.seal_record(owner, record)
    try:
        conn.execute(_INSERT, (pk, record.id, record.boundary, key_id, data))
    except sqlite3.IntegrityError:
        raise duplicate_record(record) from None


def _open(codec: RowCodec, owner: str, cid: str, rows: list[Any]) -> list[CompactionRecord]:
    return [codec.open_record(owner, cid, rid, key_id, data) for rid, key_id, data in rows]


def latest_record(
    conn: sqlite3.Connection, codec: RowCodec, owner: str, cid: str, pk: int
) -> CompactionRecord | None:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tether_compactions WHERE conversation = ? ORDER BY pk DESC LIMIT 1", (pk,)
    ).fetchall()
    return _open(codec, owner, cid, rows)[0] if rows else None


def records(
    conn: sqlite3.Connection, codec: RowCodec, owner: str, cid: str, pk: int
) -> list[CompactionRecord]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tether_compactions WHERE conversation = ? ORDER BY pk", (pk,)
    ).fetchall()
    return _open(codec, owner, cid, rows)


def delete_record(conn: sqlite3.Connection, cid: str, pk: int, record_id: str) -> None:
    cursor = conn.execute("DELETE FROM tether_compactions WHERE conversation = ? AND id = ?", (pk, record_id))
    if cursor.rowcount != 1:
        raise record_not_found(cid, record_id)


def copy_records(
    conn: sqlite3.Connection,
    codec: RowCodec,
    owner: str,
    source: tuple[str, int],
    target: tuple[str, int],
    at: int,
) -> None:
    """Copy the records of ``source`` (id, pk) whose boundary is at most ``at`` to its fork."""
    (source_id, source_pk), (target_id, target_pk) = source, target
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM tether_compactions WHERE conversation = ? AND boundary <= ? ORDER BY pk",
        (source_pk, at),
    ).fetchall()
    for rid, key_id, data in rows:
        record, new_key, sealed = codec.copy_record(owner, source_id, target_id, rid, key_id, data)
        conn.execute(_INSERT, (target_pk, record.id, record.boundary, new_key, sealed))


def reseal_records(conn: sqlite3.Connection, codec: RowCodec, current: str, batch: int) -> int:
    """Re-seal up to ``batch`` record rows not sealed with ``current``; how many were rewritten."""
    rows = conn.execute(
        "SELECT r.pk, c.owner, c.id, r.id, r.key_id, r.data FROM tether_compactions r "
        "JOIN tether_conversations c ON c.pk = r.conversation "
        "WHERE r.key_id IS NULL OR r.key_id != ? LIMIT ?",
        (current, batch),
    ).fetchall()
    for pk, o, cid, rid, key_id, data in rows:
        conn.execute(
            "UPDATE tether_compactions SET key_id = ?, data = ? WHERE pk = ?",
            (*codec.reseal_record(o, cid, rid, key_id, data), pk),
        )
    return len(rows)


# -- the full-text index ---------------------------------------------------------------------------
def delete_index(conn: sqlite3.Connection, pk: int, fts: bool) -> None:
    """Remove a conversation's index rows and records (it is being deleted)."""
    conn.execute("DELETE FROM tether_compactions WHERE conversation = ?", (pk,))
    if fts:
        conn.execute(
            f"DELETE FROM {SEARCH_TABLE} WHERE rowid > ? AND rowid < ?", (pk * _SPAN, (pk + 1) * _SPAN)
        )


def drop_index(conn: sqlite3.Connection, fts: bool) -> None:
    """Empty the index (the database is being sealed: its plaintext must go)."""
    if fts:
        conn.execute(f"DELETE FROM {SEARCH_TABLE}")
    conn.execute("UPDATE tether_conversations SET indexed = 0 WHERE indexed != 0")


def _catch_up(conn: sqlite3.Connection, owner: str) -> None:
    """Index the owner's plaintext messages the index does not hold yet."""
    behind = conn.execute(
        "SELECT pk, version, indexed FROM tether_conversations WHERE owner = ? AND indexed < version",
        (owner,),
    ).fetchall()
    decode = _message_decoder.decode
    for pk, version, indexed in behind:
        base = pk * _SPAN
        rows = conn.execute(
            "SELECT id, data FROM tether_messages WHERE id > ? AND id <= ? AND key_id IS NULL ORDER BY id",
            (base + indexed, base + version),
        ).fetchall()
        entries: list[tuple[int, str, str]] = []
        for row_id, data in rows:
            try:
                message = decode(data)
            except (msgspec.DecodeError, RecursionError, TypeError, ValueError):
                continue  # a corrupt row is not searchable; load names it
            entries.append((row_id, message.role, index_text(message)))
        conn.executemany(
            f"INSERT OR REPLACE INTO {SEARCH_TABLE} (rowid, role, body) VALUES (?, ?, ?)", entries
        )
        conn.execute("UPDATE tether_conversations SET indexed = ? WHERE pk = ?", (version, pk))


def fts_query(terms: list[str]) -> str:
    """An FTS5 query: any of the terms, each a quoted phrase (so ``src/app.py`` and ``DEP-4471``
    match as written, whatever the tokenizer splits them into)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def fts_search(
    conn: sqlite3.Connection, owner: str, terms: list[str], limit: int
) -> tuple[list[MessageHit], int]:
    """Catch the owner's index up, then the best ``limit`` hits (BM25) and how many
    conversations the owner has (all searched)."""
    _catch_up(conn, owner)
    tokens = max(SNIPPET_CHARS // 8, 8)
    rows = conn.execute(
        f"SELECT c.id, s.rowid % {_SPAN}, s.role, -bm25({SEARCH_TABLE}), "
        f"snippet({SEARCH_TABLE}, 1, '', '', '…', {tokens}) "
        f"FROM {SEARCH_TABLE} s JOIN tether_conversations c ON c.pk = s.rowid / {_SPAN} "
        f"WHERE {SEARCH_TABLE} MATCH ? AND c.owner = ? AND s.rowid % {_SPAN} <= c.indexed "
        f"ORDER BY bm25({SEARCH_TABLE}), s.rowid DESC LIMIT ?",
        (fts_query(terms), owner, limit),
    ).fetchall()
    hits = [
        MessageHit(str(cid), int(seq), str(role), float(score), str(snippet))
        for cid, seq, role, score, snippet in rows
    ]
    count = conn.execute("SELECT count(*) FROM tether_conversations WHERE owner = ?", (owner,)).fetchone()[0]
    return hits, int(count)
