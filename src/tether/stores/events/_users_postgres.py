"""The users and tokens tables in PostgreSQL: the ``UserTables`` of ``PostgresEventLog``."""

from __future__ import annotations

from tether.errors import ConflictError
from tether.stores.events._users import no_active_user, no_user, user_exists
from tether.stores.events._users_sql import ACTIVE_USER, INSERT_TOKEN, INSERT_USER, REVOKE_TOKENS, REVOKE_USER
from tether.stores.postgres._db import PostgresPool, qmark

__all__ = ["PostgresUsers"]


class PostgresUsers:
    """The users and tokens statements, each call one transaction of ``pool``."""

    def __init__(self, pool: PostgresPool) -> None:
        self._pool = pool

    async def add_user(self, name: str, digest: str, t: float) -> None:
        """See ``UserTables.add_user``: the name's primary key refuses a second one, whichever
        process inserts it."""
        try:
            async with self._pool.tx(unique=True) as conn:
                await conn.execute(qmark(INSERT_USER), (name, t))
                await conn.execute(qmark(INSERT_TOKEN), (digest, name, t))
        except ConflictError:
            raise user_exists(name) from None

    async def add_token(self, name: str, digest: str, t: float) -> None:
        """See ``UserTables.add_token``."""
        async with self._pool.tx(unique=True) as conn:
            cursor = await conn.execute(qmark(ACTIVE_USER), (name,))
            if await cursor.fetchone() is None:
                raise no_active_user(name)
            await conn.execute(qmark(INSERT_TOKEN), (digest, name, t))

    async def revoke_user(self, name: str, t: float) -> None:
        """See ``UserTables.revoke_user``."""
        async with self._pool.tx(unique=True) as conn:
            cursor = await conn.execute(qmark(REVOKE_USER), (t, name))
            if not cursor.rowcount:
                raise no_user(name)
            await conn.execute(qmark(REVOKE_TOKENS), (t, name))
