"""SQLite queries of the tool-effect ledger and the replay guard (run on the store's thread,
inside the transaction ``SQLiteStore`` opened)."""

from __future__ import annotations

import sqlite3
from typing import Any

from tether.stores._common import GUARD_PURGE_BATCH

__all__ = ["claim", "finish_call", "pending_rows", "purge_guards", "start_call"]

# a closed entry (result stored) of the same run and call id is a later call reusing the id: it
# starts afresh; an open one means this very call was started before and must not run again
_START = (
    "INSERT INTO tether_tool_effects (conversation, call_id, run_id, tool_name, arguments_key, "
    "arguments, started_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (conversation, call_id, run_id) DO UPDATE SET tool_name = excluded.tool_name, "
    "arguments_key = excluded.arguments_key, arguments = excluded.arguments, "
    "started_at = excluded.started_at, finished_at = NULL, failed = 0, stored_seq = NULL "
    "WHERE tether_tool_effects.stored_seq IS NOT NULL"
)


def start_call(
    conn: sqlite3.Connection,
    pk: int,
    run_id: str,
    call_id: str,
    tool_name: str,
    sealed: tuple[str | None, bytes],
    t: float,
) -> bool:
    """Insert (or restart a closed) ledger entry; False when an open one exists."""
    if conn.execute(_START, (pk, call_id, run_id, tool_name, *sealed, t)).rowcount != 1:
        return False
    conn.execute("UPDATE tether_conversations SET open_effects = open_effects + 1 WHERE pk = ?", (pk,))
    return True


def finish_call(conn: sqlite3.Connection, pk: int, run_id: str, call_id: str, failed: bool, t: float) -> bool:
    """Mark a ledger entry finished; False when there is no such entry."""
    cursor = conn.execute(
        "UPDATE tether_tool_effects SET finished_at = ?, failed = ? "
        "WHERE conversation = ? AND call_id = ? AND run_id = ?",
        (t, int(failed), pk, call_id, run_id),
    )
    return cursor.rowcount == 1


def pending_rows(conn: sqlite3.Connection, pk: int) -> list[Any]:
    """Open ledger rows as ``RowCodec.effects`` reads them, oldest first."""
    return conn.execute(
        "SELECT run_id, call_id, tool_name, started_at, finished_at, failed, arguments_key, "
        "arguments FROM tether_tool_effects WHERE conversation = ? AND stored_seq IS NULL "
        "ORDER BY started_at, call_id",
        (pk,),
    ).fetchall()


def purge_guards(conn: sqlite3.Connection, t: float, limit: int = -1) -> int:
    """Delete replay-guard claims expired at ``t`` (at most ``limit``; -1: all)."""
    return conn.execute(
        "DELETE FROM tether_replay_guards WHERE digest IN (SELECT digest FROM tether_replay_guards "
        "WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)",
        (t, limit),
    ).rowcount


def claim(conn: sqlite3.Connection, digest: str, expires_at: float, t: float) -> bool:
    """Claim ``digest`` (inside ``BEGIN IMMEDIATE``: writers of every process queue on the
    database lock). An expired claim of the same digest is taken over; an unexpired one wins."""
    purge_guards(conn, t, GUARD_PURGE_BATCH)
    cursor = conn.execute(
        "INSERT INTO tether_replay_guards (digest, expires_at) VALUES (?, ?) "
        "ON CONFLICT (digest) DO UPDATE SET expires_at = excluded.expires_at "
        "WHERE tether_replay_guards.expires_at <= ?",
        (digest, expires_at, t),
    )
    return cursor.rowcount == 1
