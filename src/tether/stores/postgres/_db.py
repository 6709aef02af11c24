"""A PostgreSQL database as tether's stores use it: a connection pool opened and migrated on first
use (``PostgresPool``), the named migrations (``apply_migrations``), and SQL written for SQLite
too (``qmark``).

Imported only by modules that have checked the ``postgres`` extra (``MissingExtra`` otherwise).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from tether.errors import ConflictError, StoreError
from tether.stores._common import now, pending_migrations

__all__ = ["Conn", "PostgresPool", "apply_migrations", "qmark"]

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


def qmark(query: str) -> bytes:
    """A statement written with SQLite's ``?`` placeholders, for psycopg (``%s``)."""
    return query.replace("?", "%s").encode()


async def apply_migrations(
    conn: Conn,
    schema: str | None,
    migrations: Sequence[tuple[str, tuple[str, ...]]],
    *,
    family: str = "",
) -> None:
    """Apply the missing named migrations of ``migrations``, each recorded in
    ``tether_migrations``, inside the caller's transaction and under the advisory lock every
    migrator of the database takes (one at a time across processes); ``schema`` is created first
    when given. See ``pending_migrations``."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('tether_migrations'))")
    if schema is not None:
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS tether_migrations (name TEXT PRIMARY KEY, "
        "applied_at DOUBLE PRECISION NOT NULL)"
    )
    cursor = await conn.execute("SELECT name FROM tether_migrations")
    applied = {str(r[0]) for r in await cursor.fetchall()}
    for name, statements in pending_migrations(applied, migrations, family=family):
        for statement in statements:
            await conn.execute(statement.encode())
        await conn.execute("INSERT INTO tether_migrations (name, applied_at) VALUES (%s, %s)", (name, now()))


class PostgresPool:
    """A ``psycopg_pool`` pool of ``min_size``..``max_size`` autocommit connections to ``dsn``,
    their search path set to ``schema`` when given. It opens on the first ``open`` or ``tx``:
    waits up to ``open_timeout`` seconds for a connection (``StoreError`` after), runs ``migrate``
    on it once, then ``opened`` (if given). ``label`` names the owner in errors."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None,
        label: str,
        migrate: Callable[[Conn], Awaitable[None]],
        opened: Callable[[], None] | None = None,
        min_size: int = 1,
        max_size: int = 10,
        open_timeout: float = 30.0,
    ) -> None:
        self.schema = schema
        self._label = label
        self._migrate = migrate
        self._opened = opened
        self._pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            dsn,
            connection_class=psycopg.AsyncConnection[tuple[Any, ...]],
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True},
            configure=self._configure,
        )
        self._open_timeout = open_timeout
        self._ready = False
        self._closed = False
        self._lock = asyncio.Lock()

    async def _configure(self, conn: Conn) -> None:
        if self.schema is not None:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))

    async def open(self) -> AsyncConnectionPool[Conn]:
        """The pool, opened and migrated (once); ``StoreError`` after ``close``."""
        if self._closed:
            raise StoreError(f"{self._label} is closed")
        if not self._ready:
            async with self._lock:
                if not self._ready:
                    try:
                        await self._pool.open(wait=True, timeout=self._open_timeout)
                        async with self._pool.connection() as conn:
                            await self._migrate(conn)
                    except psycopg.Error as exc:
                        raise StoreError(f"PostgreSQL: {exc}") from exc
                    if self._opened is not None:
                        self._opened()
                    self._ready = True
        return self._pool

    @asynccontextmanager
    async def tx(self, *, single: bool = False, unique: bool = False) -> AsyncGenerator[Conn]:
        """A pooled connection inside a transaction; ``single``: in autocommit, for one statement
        that is atomic by itself (saves the BEGIN and COMMIT round trips). Database errors are
        ``StoreError``; with ``unique``, a unique violation is a ``ConflictError`` (the caller's
        insert met a row that exists)."""
        pool = await self.open()
        try:
            async with pool.connection() as conn:
                if single:
                    yield conn
                else:
                    async with conn.transaction():
                        yield conn
        except psycopg.Error as exc:
            if unique and isinstance(exc, psycopg.errors.UniqueViolation):
                raise ConflictError(f"PostgreSQL: {exc}", expected=0, actual=1) from exc
            raise StoreError(f"PostgreSQL: {exc}") from exc

    async def close(self) -> None:
        """Close the pool; every later call is a ``StoreError``. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._pool.close()
