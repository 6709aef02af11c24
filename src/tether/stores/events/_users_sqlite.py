"""The users and tokens tables of a SQLite file: the ``UserTables`` of ``SQLiteEventLog``."""

from __future__ import annotations

import sqlite3

from tether.stores.events._users import no_active_user, no_user, user_exists
from tether.stores.events._users_sql import ACTIVE_USER, INSERT_TOKEN, INSERT_USER, REVOKE_TOKENS, REVOKE_USER
from tether.stores.sqlite._db import SQLiteThread

__all__ = ["SQLiteUsers"]


class SQLiteUsers:
    """The users and tokens statements, in transactions on ``db``'s thread."""

    def __init__(self, db: SQLiteThread) -> None:
        self._db = db

    async def add_user(self, name: str, digest: str, t: float) -> None:
        """See ``UserTables.add_user``."""

        def tx(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM tether_serve_users WHERE name = ?", (name,)).fetchone():
                raise user_exists(name)
            conn.execute(INSERT_USER, (name, t))
            conn.execute(INSERT_TOKEN, (digest, name, t))

        await self._db.write(tx)

    async def add_token(self, name: str, digest: str, t: float) -> None:
        """See ``UserTables.add_token``."""

        def tx(conn: sqlite3.Connection) -> None:
            if conn.execute(ACTIVE_USER, (name,)).fetchone() is None:
                raise no_active_user(name)
            conn.execute(INSERT_TOKEN, (digest, name, t))

        await self._db.write(tx)

    async def revoke_user(self, name: str, t: float) -> None:
        """See ``UserTables.revoke_user``."""

        def tx(conn: sqlite3.Connection) -> None:
            if not conn.execute(REVOKE_USER, (t, name)).rowcount:
                raise no_user(name)
            conn.execute(REVOKE_TOKENS, (t, name))

        await self._db.write(tx)
