"""SQLite key rotation: re-seal rows sealed with an older key (or stored in plaintext)."""

from __future__ import annotations

import sqlite3

from tether.errors import EncryptionError
from tether.stores._common import RowCodec

__all__ = ["reseal_batch"]


def reseal_batch(conn: sqlite3.Connection, codec: RowCodec, batch: int) -> int:
    """Re-seal up to ``batch`` message rows, previews and tool arguments not sealed with the
    keyring's current key (plaintext included); return how many were rewritten (0: done)."""
    if codec.keyring is None:
        raise EncryptionError("reencrypt needs a store opened with a keyring")
    current = codec.keyring.current
    done = 0
    rows = conn.execute(
        "SELECT m.id, c.owner, c.id, m.seq, m.key_id, m.data FROM tether_messages m "
        "JOIN tether_conversations c ON c.pk = m.conversation "
        "WHERE m.key_id IS NULL OR m.key_id != ? LIMIT ?",
        (current, batch),
    ).fetchall()
    for row_id, o, cid, seq, key_id, data in rows:
        plain = codec.open_row(o, cid, seq, key_id, data)
        _, new_key, sealed = codec.seal(o, cid, seq, [plain])[0]
        conn.execute(
            "UPDATE tether_messages SET key_id = ?, data = ? WHERE id = ?", (new_key, sealed, row_id)
        )
    done += len(rows)
    fields = conn.execute(
        "SELECT pk, owner, id, preview_key, preview FROM tether_conversations "
        "WHERE preview IS NOT NULL AND (preview_key IS NULL OR preview_key != ?) LIMIT ?",
        (current, batch),
    ).fetchall()
    for pk, o, cid, key_id, data in fields:
        text = codec.open_field(o, cid, "preview", 0, key_id, data)
        new_key, sealed = codec.seal_field(o, cid, "preview", 0, text)
        conn.execute(
            "UPDATE tether_conversations SET preview_key = ?, preview = ? WHERE pk = ?",
            (new_key, sealed, pk),
        )
    done += len(fields)
    effects = conn.execute(
        "SELECT e.conversation, c.owner, c.id, e.call_id, e.arguments_key, e.arguments "
        "FROM tether_tool_effects e JOIN tether_conversations c ON c.pk = e.conversation "
        "WHERE e.arguments_key IS NULL OR e.arguments_key != ? LIMIT ?",
        (current, batch),
    ).fetchall()
    for pk, o, cid, call_id, key_id, data in effects:
        text = codec.open_field(o, cid, "tool", call_id, key_id, data)
        new_key, sealed = codec.seal_field(o, cid, "tool", call_id, text)
        conn.execute(
            "UPDATE tether_tool_effects SET arguments_key = ?, arguments = ? "
            "WHERE conversation = ? AND call_id = ?",
            (new_key, sealed, pk, call_id),
        )
    return done + len(effects)
