"""SQLite key rotation: re-seal rows sealed with an older key (or stored in plaintext)."""

from __future__ import annotations

import sqlite3

from tether.stores._rows import RowCodec
from tether.stores.sqlite._records import drop_index, reseal_records
from tether.stores.sqlite._schema import mark_sealed

__all__ = ["reseal_batch", "reseal_or_mark"]


def reseal_or_mark(conn: sqlite3.Connection, codec: RowCodec, current: str, batch: int, fts: bool) -> int:
    """One ``reencrypt`` transaction: re-seal a batch, or — nothing left — record the database
    sealed in the same transaction that found nothing unsealed, and empty the full-text index
    (plaintext of what is now sealed)."""
    done = reseal_batch(conn, codec, current, batch)
    if not done:
        drop_index(conn, fts)
        mark_sealed(conn)
    return done


def reseal_batch(conn: sqlite3.Connection, codec: RowCodec, current: str, batch: int) -> int:
    """Re-seal up to ``batch`` message rows, previews, tool arguments and compaction records not
    sealed with the
    ``current`` key (plaintext included); return how many were rewritten (0: done)."""
    rows = conn.execute(
        "SELECT m.id, c.owner, c.id, m.seq, m.key_id, m.data FROM tether_messages m "
        "JOIN tether_conversations c ON c.pk = m.conversation "
        "WHERE m.key_id IS NULL OR m.key_id != ? LIMIT ?",
        (current, batch),
    ).fetchall()
    for row_id, o, cid, seq, key_id, data in rows:
        conn.execute(
            "UPDATE tether_messages SET key_id = ?, data = ? WHERE id = ?",
            (*codec.reseal_row(o, cid, seq, key_id, data), row_id),
        )
    fields = conn.execute(
        "SELECT pk, owner, id, preview_key, preview FROM tether_conversations "
        "WHERE preview IS NOT NULL AND (preview_key IS NULL OR preview_key != ?) LIMIT ?",
        (current, batch),
    ).fetchall()
    for pk, o, cid, key_id, data in fields:
        conn.execute(
            "UPDATE tether_conversations SET preview_key = ?, preview = ? WHERE pk = ?",
            (*codec.reseal_field(o, cid, "preview", 0, key_id, data), pk),
        )
    effects = conn.execute(
        "SELECT e.conversation, c.owner, c.id, e.call_id, e.run_id, e.arguments_key, e.arguments "
        "FROM tether_tool_effects e JOIN tether_conversations c ON c.pk = e.conversation "
        "WHERE e.arguments_key IS NULL OR e.arguments_key != ? LIMIT ?",
        (current, batch),
    ).fetchall()
    for pk, o, cid, call_id, run_id, key_id, data in effects:
        conn.execute(
            "UPDATE tether_tool_effects SET arguments_key = ?, arguments = ? "
            "WHERE conversation = ? AND call_id = ? AND run_id = ?",
            (*codec.reseal_field(o, cid, "tool", call_id, key_id, data), pk, call_id, run_id),
        )
    return len(rows) + len(fields) + len(effects) + reseal_records(conn, codec, current, batch)
