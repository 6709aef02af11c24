"""PostgreSQL migrations, the recorded encryption state and key rotation batches."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from tether.stores._common import now, pending_migrations
from tether.stores._migrations import POSTGRES
from tether.stores._rows import ENCRYPTION_FLAG, SEALED, RowCodec
from tether.stores.postgres._records import drop_index, reseal_records

__all__ = ["migrate", "reseal_or_mark"]

_Conn = psycopg.AsyncConnection[tuple[Any, ...]]


async def migrate(conn: _Conn, schema: str | None, codec: RowCodec) -> None:
    """Apply the missing named migrations, recorded by name, in one transaction under an advisory
    lock, and read the database's encryption state into ``codec``."""
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
        await _settle_encryption(conn, codec)


async def _mark_sealed(conn: _Conn) -> None:
    await conn.execute(
        "INSERT INTO tether_meta (name, value) VALUES (%s, %s) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (ENCRYPTION_FLAG, SEALED),
    )


async def _settle_encryption(conn: _Conn, codec: RowCodec) -> None:
    """See the SQLite twin in ``stores.sqlite._schema``: a keyring store finding no conversation records
    the database sealed."""
    cursor = await conn.execute("SELECT value FROM tether_meta WHERE name = %s", (ENCRYPTION_FLAG,))
    row = await cursor.fetchone()
    sealed = row is not None and row[0] == SEALED
    if not sealed and codec.keyring is not None:
        cursor = await conn.execute("SELECT 1 FROM tether_conversations LIMIT 1")
        if await cursor.fetchone() is None:
            await _mark_sealed(conn)
            sealed = True
    codec.settle(sealed)


async def reseal_or_mark(conn: _Conn, codec: RowCodec, current: str, batch: int) -> int:
    """One ``reencrypt`` transaction: re-seal a batch, or — nothing left — record the database
    sealed in the transaction that found nothing unsealed."""
    done = await _reseal_batch(conn, codec, current, batch)
    done += await reseal_records(conn, codec, current, batch)
    if not done:
        await drop_index(conn)  # plaintext of what is now sealed
        await _mark_sealed(conn)
    return done


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
