"""An SQLite database as tether's stores use it: one connection on one dedicated thread
(``SQLiteThread``), its transactions (``write``, ``read``) and the named migrations
(``apply_migrations``).

Every call runs on the thread (the event loop never blocks on SQLite). A write takes
``BEGIN IMMEDIATE`` so concurrent writers, threads or processes, queue on the database lock
(``busy_timeout``) instead of failing half way; a read is one snapshot (``BEGIN`` … ``COMMIT``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tether.errors import StoreError, TetherError
from tether.stores._common import now, pending_migrations
from tether.stores.sqlite._worker import Worker

__all__ = ["SQLiteThread", "Tx", "apply_migrations", "enable_wal", "read", "write"]

R = TypeVar("R")
Tx = Callable[[sqlite3.Connection], R]
"""A transaction's body: what it does with the connection, run on the database's thread."""


def enable_wal(conn: sqlite3.Connection, busy_timeout: float) -> str:
    """Switch ``conn``'s database to WAL and return the journal mode SQLite reports. Changing the
    journal mode needs the database to itself, and SQLite answers "database is locked" at once
    instead of calling the busy handler while another connection opens the same new file: retry
    until ``busy_timeout`` seconds have passed, as every other statement waits."""
    deadline = time.monotonic() + busy_timeout
    pause = 0.002
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def write(conn: sqlite3.Connection, fn: Tx[R]) -> R:
    """``fn`` in a write transaction: committed when it returns, rolled back when it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def read(conn: sqlite3.Connection, fn: Tx[R]) -> R:
    """``fn`` in a read transaction (one snapshot for every statement of it)."""
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        conn.execute("COMMIT")


def apply_migrations(
    conn: sqlite3.Connection, migrations: Sequence[tuple[str, tuple[str, ...]]], *, family: str = ""
) -> None:
    """Apply the missing named migrations of ``migrations``, each recorded in
    ``tether_migrations``, inside the caller's write transaction (see ``pending_migrations``)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS tether_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    applied = {r[0] for r in conn.execute("SELECT name FROM tether_migrations")}
    for name, statements in pending_migrations(applied, migrations, family=family):
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO tether_migrations (name, applied_at) VALUES (?, ?)", (name, now()))


class SQLiteThread:
    """The connection to the SQLite file at ``path``, opened by ``connect`` on first use and used
    only from a thread named ``name``. SQLite errors surface as ``StoreError`` naming ``label``
    (the class that owns it) and the path; after ``close`` every call is a ``StoreError``."""

    def __init__(
        self, path: str, connect: Callable[[], sqlite3.Connection], *, name: str, label: str
    ) -> None:
        self.path = path
        self._connect = connect
        self._label = label
        self._conn: sqlite3.Connection | None = None
        self._worker = Worker(name)
        self._closed = False

    async def open(self) -> None:
        """Connect (and migrate) now rather than on the first call."""
        await self.read(_nothing)

    async def write(self, tx: Tx[R]) -> R:
        """``tx`` in a write transaction on the thread."""
        return await self._run(write, tx)

    async def read(self, tx: Tx[R]) -> R:
        """``tx`` in a read transaction on the thread."""
        return await self._run(read, tx)

    async def one(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        """The first row of one read statement."""
        return await self.read(lambda conn: conn.execute(query, params).fetchone())

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Every row of one read statement."""
        return await self.read(lambda conn: conn.execute(query, params).fetchall())

    async def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        """One statement in its own write transaction."""

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute(query, params)

        await self.write(tx)

    async def close(self) -> None:
        """Close the connection and end the thread. Idempotent."""
        if self._closed:
            return
        await self._worker.call(self._close_connection)
        self._closed = True
        self._worker.stop()

    async def _run(self, transaction: Callable[[sqlite3.Connection, Tx[R]], R], tx: Tx[R]) -> R:
        if self._closed:
            raise StoreError(f"{self._label} {self.path!r} is closed")
        return await self._worker.call(self._guard, transaction, tx)

    def _guard(self, transaction: Callable[[sqlite3.Connection, Tx[R]], R], tx: Tx[R]) -> R:
        try:
            return transaction(self._connection(), tx)
        except TetherError:
            raise
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite {self.path!r}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _nothing(conn: sqlite3.Connection) -> None:
    return None
