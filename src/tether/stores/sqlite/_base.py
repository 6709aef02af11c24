"""The plumbing of ``SQLiteStore``: the constructor, its ``SQLiteThread`` (the connection, the
thread and the transactions every SQLite database of tether uses) and the conversation row
lookup every query starts from."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import Any, Literal, Self

from tether.errors import UserError
from tether.stores._common import CONVERSATION_COLUMNS, not_found, now
from tether.stores._crypto import Keyring
from tether.stores._rows import RowCodec
from tether.stores.sqlite import _records as recs
from tether.stores.sqlite._db import SQLiteThread
from tether.stores.sqlite._schema import connect

__all__ = ["SQLiteBase"]

_Row = tuple[Any, ...]


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
        self._fts = False
        self._db = SQLiteThread(self.path, self._connect, name="tether-sqlite", label="SQLiteStore")

    # -- plumbing ---------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        await self._db.open()  # connects (and migrates) now
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _connect(self) -> sqlite3.Connection:
        """The connection, migrated, on the store's thread (``SQLiteThread`` calls it once)."""
        conn = connect(self.path, self._busy_timeout, self._synchronous, self._mmap_size, self._codec)
        self._fts = recs.create_index(conn)
        return conn

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
        await self._db.close()
