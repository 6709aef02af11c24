"""Opening an SQLite database: pragmas, named migrations and the recorded encryption state."""

from __future__ import annotations

import sqlite3

from tether.errors import StoreError
from tether.stores._common import now, pending_migrations
from tether.stores._migrations import SQLITE
from tether.stores._rows import ENCRYPTION_FLAG, SEALED, RowCodec
from tether.stores.sqlite._db import enable_wal

__all__ = ["connect", "mark_sealed"]


def connect(
    path: str, busy_timeout: float, synchronous: str, mmap_size: int, codec: RowCodec
) -> sqlite3.Connection:
    """A connection in autocommit mode (the store opens its own transactions), WAL, migrated;
    the database's encryption state read into ``codec``."""
    if sqlite3.sqlite_version_info < (3, 35):  # UPDATE ... RETURNING
        raise StoreError(f"SQLiteStore needs SQLite >= 3.35, this Python has {sqlite3.sqlite_version}")
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        mode = enable_wal(conn, busy_timeout)
        if mode.lower() != "wal":
            raise StoreError(f"SQLite {path!r} cannot use WAL (journal mode {mode})")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(f"PRAGMA mmap_size = {mmap_size}")  # reads skip a copy and a syscall
        _migrate(conn, codec)
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, codec: RowCodec) -> None:
    """Apply the missing named migrations, each recorded in the same transaction, and read the
    database's encryption state into ``codec``."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS tether_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        applied = {r[0] for r in conn.execute("SELECT name FROM tether_migrations")}
        for name, statements in pending_migrations(applied, SQLITE):
            for statement in statements:
                conn.execute(statement)
            conn.execute("INSERT INTO tether_migrations (name, applied_at) VALUES (?, ?)", (name, now()))
        _settle_encryption(conn, codec)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def mark_sealed(conn: sqlite3.Connection) -> None:
    """Record that every row of the database is sealed (strict by default from now on)."""
    conn.execute(
        "INSERT INTO tether_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = ?",
        (ENCRYPTION_FLAG, SEALED, SEALED),
    )


def _settle_encryption(conn: sqlite3.Connection, codec: RowCodec) -> None:
    """Read the recorded state into ``codec`` (inside the opening write transaction). A store with
    a keyring that finds the database holding no conversation records it sealed: an empty
    database has no plaintext row to tolerate."""
    row = conn.execute("SELECT value FROM tether_meta WHERE name = ?", (ENCRYPTION_FLAG,)).fetchone()
    sealed = row is not None and row[0] == SEALED
    empty = conn.execute("SELECT 1 FROM tether_conversations LIMIT 1").fetchone() is None
    if not sealed and codec.keyring is not None and empty:
        mark_sealed(conn)
        sealed = True
    codec.settle(sealed)
