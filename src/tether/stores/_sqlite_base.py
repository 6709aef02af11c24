"""The plumbing of ``SQLiteStore``: the constructor, the store's thread, transactions and the
conversation row lookup every query starts from."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import Any, Literal, Self, TypeVar

from tether.errors import StoreError, TetherError, UserError
from tether.stores import _sqlite_records as recs
from tether.stores._common import CONVERSATION_COLUMNS, not_found, now
from tether.stores._crypto import Keyring
from tether.stores._rows import RowCodec
from tether.stores._sqlite_db import read, write
from tether.stores._sqlite_schema import connect
from tether.stores._worker import Worker

__all__ = ["SQLiteBase", "nothing"]

R = TypeVar("R")
_Tx = Callable[[sqlite3.Connection], R]
_Row = tuple[Any, ...]


def nothing(conn: sqlite3.Connection) -> None:
    """A transaction that does nothing (``_run(_read, nothing)`` connects and migrates)."""


class SQLiteBase:
    """The connection, thread and transactions of ``SQLiteStore`` (see its docstring)."""

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
        self._conn: sqlite3.Connection | None = None
        self._fts = False
        self._worker = Worker("tether-sqlite")
        self._closed = False

    # -- plumbing ---------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self._run(self._read, nothing)  # connects (and migrates) now
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, fn: Callable[[_Tx[R]], R], tx: _Tx[R]) -> R:
        """``fn(tx)`` (``_write`` or ``_read``) on the store's thread, SQLite errors as ``StoreError``."""
        if self._closed:
            raise StoreError(f"SQLiteStore {self.path!r} is closed")
        return await self._worker.call(self._guard, fn, tx)

    def _guard(self, fn: Callable[[_Tx[R]], R], tx: _Tx[R]) -> R:
        try:
            return fn(tx)
        except TetherError:
            raise
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite {self.path!r}: {exc}") from exc

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = connect(self.path, self._busy_timeout, self._synchronous, self._mmap_size, self._codec)
            self._fts = recs.create_index(conn)
            self._conn = conn
        return self._conn

    def _write(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        return write(self._connection(), fn)

    def _read(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        return read(self._connection(), fn)  # one snapshot for the conversation row and its messages

    @staticmethod
    def _row(conn: sqlite3.Connection, owner: str, conversation_id: str) -> _Row:
        row = conn.execute(
            f"SELECT {CONVERSATION_COLUMNS} FROM tether_conversations WHERE owner = ? AND id = ?",
            (owner, conversation_id),
        ).fetchone()
        if row is None:
            raise not_found(conversation_id)
        return row

    async def close(self) -> None:
        """Close the connection and its thread. Idempotent."""
        if self._closed:
            return
        await self._worker.call(self._close_connection)
        self._closed = True
        self._worker.stop()

    def _close_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
