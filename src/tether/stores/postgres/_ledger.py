"""PostgreSQL queries of the tool-effect ledger and the replay guard (inside the transaction
``PostgresStore`` opened)."""

from __future__ import annotations

from typing import Any

import psycopg

from tether.stores._common import GUARD_PURGE_BATCH

__all__ = [
    "claim",
    "finish_call",
    "finish_call_at",
    "pending_rows",
    "purge_guards",
    "start_call",
    "start_call_at",
]

_Conn = psycopg.AsyncConnection[tuple[Any, ...]]

_COLUMNS = "conversation, call_id, run_id, tool_name, arguments_key, arguments, started_at"
# a closed entry (result stored) of the same run and call id is a later call reusing the id: it
# starts afresh; an open one means this very call was started before and must not run again
_RESTART = (
    "ON CONFLICT (conversation, call_id, run_id) DO UPDATE SET tool_name = excluded.tool_name, "
    "arguments_key = excluded.arguments_key, arguments = excluded.arguments, "
    "started_at = excluded.started_at, finished_at = NULL, failed = FALSE, stored_seq = NULL "
    "WHERE tether_tool_effects.stored_seq IS NOT NULL"
)
_START = f"INSERT INTO tether_tool_effects ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) {_RESTART}"

# ``start_call_at``: ``_START`` and the conversation's count of open entries in one statement, the
# conversation found by owner and id (none: nothing is written)
_START_AT = (
    f"WITH started AS (INSERT INTO tether_tool_effects ({_COLUMNS}) SELECT pk, %s::text, %s::text, "
    "%s::text, %s::text, %s::bytea, %s::double precision FROM tether_conversations "
    f"WHERE owner = %s AND id = %s {_RESTART} RETURNING conversation) "
    "UPDATE tether_conversations SET open_effects = open_effects + 1 "
    "WHERE pk = (SELECT conversation FROM started)"
)

# Expired claims of other digests go first (a few, skipping rows another claim holds); then the
# digest is inserted, or takes over its own expired claim. Under READ COMMITTED a concurrent
# claim of the same digest waits for this row's lock and then sees the unexpired claim: False.
_CLAIM = (
    "WITH purged AS (DELETE FROM tether_replay_guards WHERE digest IN ("
    "SELECT digest FROM tether_replay_guards WHERE expires_at <= %(now)s AND digest <> %(digest)s "
    "ORDER BY expires_at LIMIT %(purge)s FOR UPDATE SKIP LOCKED)) "
    "INSERT INTO tether_replay_guards (digest, expires_at) VALUES (%(digest)s, %(expires)s) "
    "ON CONFLICT (digest) DO UPDATE SET expires_at = excluded.expires_at "
    "WHERE tether_replay_guards.expires_at <= %(now)s RETURNING 1"
)


async def start_call(
    conn: _Conn,
    pk: int,
    run_id: str,
    call_id: str,
    tool_name: str,
    sealed: tuple[str | None, bytes],
    t: float,
) -> bool:
    """Insert (or restart a closed) ledger entry; False when an open one exists."""
    cursor = await conn.execute(_START, (pk, call_id, run_id, tool_name, *sealed, t))
    if cursor.rowcount != 1:
        return False
    await conn.execute("UPDATE tether_conversations SET open_effects = open_effects + 1 WHERE pk = %s", (pk,))
    return True


async def start_call_at(
    conn: _Conn,
    conversation: tuple[str, str],
    run_id: str,
    call_id: str,
    tool_name: str,
    sealed: tuple[str | None, bytes],
    t: float,
) -> bool:
    """``start_call`` in one statement (atomic on its own) for the conversation ``(owner, id)``;
    False when nothing was written: no such conversation, or an open entry exists."""
    cursor = await conn.execute(_START_AT, (call_id, run_id, tool_name, *sealed, t, *conversation))
    return cursor.rowcount == 1


async def finish_call_at(
    conn: _Conn, conversation: tuple[str, str], run_id: str, call_id: str, failed: bool, t: float
) -> bool:
    """``finish_call`` for the conversation ``(owner, id)``; False when there is no such entry
    (or no such conversation)."""
    cursor = await conn.execute(
        "UPDATE tether_tool_effects SET finished_at = %s, failed = %s WHERE conversation = "
        "(SELECT pk FROM tether_conversations WHERE owner = %s AND id = %s) "
        "AND call_id = %s AND run_id = %s",
        (t, failed, *conversation, call_id, run_id),
    )
    return cursor.rowcount == 1


async def finish_call(conn: _Conn, pk: int, run_id: str, call_id: str, failed: bool, t: float) -> bool:
    """Mark a ledger entry finished; False when there is no such entry."""
    cursor = await conn.execute(
        "UPDATE tether_tool_effects SET finished_at = %s, failed = %s "
        "WHERE conversation = %s AND call_id = %s AND run_id = %s",
        (t, failed, pk, call_id, run_id),
    )
    return cursor.rowcount == 1


async def pending_rows(conn: _Conn, pk: int) -> list[tuple[Any, ...]]:
    """Open ledger rows as ``RowCodec.effects`` reads them, oldest first."""
    cursor = await conn.execute(
        "SELECT run_id, call_id, tool_name, started_at, finished_at, failed, arguments_key, "
        "arguments FROM tether_tool_effects WHERE conversation = %s AND stored_seq IS NULL "
        "ORDER BY started_at, call_id",
        (pk,),
    )
    return await cursor.fetchall()


async def purge_guards(conn: _Conn, t: float) -> int:
    """Delete every replay-guard claim expired at ``t``."""
    cursor = await conn.execute("DELETE FROM tether_replay_guards WHERE expires_at <= %s", (t,))
    return cursor.rowcount


async def claim(conn: _Conn, digest: str, expires_at: float, t: float) -> bool:
    """Claim ``digest``: True when this call recorded it (see ``_CLAIM``)."""
    cursor = await conn.execute(
        _CLAIM, {"now": t, "digest": digest, "expires": expires_at, "purge": GUARD_PURGE_BATCH}
    )
    return await cursor.fetchone() is not None
