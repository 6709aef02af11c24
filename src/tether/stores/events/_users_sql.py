"""``SQLUserStore``: the ``UserStore`` both SQL databases share (the reads; the checks and the
token rules are ``BaseUserStore``'s), over the users and tokens statements of one database (``UserTables``).

Tables ``tether_serve_users`` and ``tether_serve_tokens`` (``_migrations.py``). A user's
name is never reused; revoking a user revokes its tokens in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tether.stores._common import to_datetime
from tether.stores.events._base import BaseUserStore
from tether.stores.events._common import Queries
from tether.stores.events._users import UserInfo

__all__ = [
    "ACTIVE_USER",
    "INSERT_TOKEN",
    "INSERT_USER",
    "REVOKE_TOKENS",
    "REVOKE_USER",
    "SQLUserStore",
    "UserTables",
    "to_user",
]

# -- statements both databases run -----------------------------------------------------------
INSERT_USER = "INSERT INTO tether_serve_users (name, created_at) VALUES (?, ?)"
INSERT_TOKEN = "INSERT INTO tether_serve_tokens (digest, name, created_at) VALUES (?, ?, ?)"
ACTIVE_USER = "SELECT 1 FROM tether_serve_users WHERE name = ? AND revoked_at IS NULL"
REVOKE_USER = "UPDATE tether_serve_users SET revoked_at = COALESCE(revoked_at, ?) WHERE name = ?"
REVOKE_TOKENS = "UPDATE tether_serve_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL"


def to_user(row: Sequence[Any]) -> UserInfo:
    name, created, revoked, tokens = row
    return UserInfo(
        name=name,
        created_at=to_datetime(created),
        revoked_at=to_datetime(revoked) if revoked is not None else None,
        tokens=int(tokens),
    )


class UserTables(Protocol):
    """The transactions of the users and tokens tables in one database (its SQL)."""

    async def add_user(self, name: str, digest: str, t: float) -> None:
        """Insert user ``name`` made at ``t`` with its first token; ``ConflictError`` if the name exists."""
        ...

    async def add_token(self, name: str, digest: str, t: float) -> None:
        """Insert a token of ``name``; ``NotFound`` unless ``name`` is an active user."""
        ...

    async def revoke_user(self, name: str, t: float) -> None:
        """Revoke ``name`` (if not already) and its active tokens at ``t``; ``NotFound`` for an
        unknown name."""
        ...


class SQLUserStore(BaseUserStore):
    """A ``UserStore`` over ``db`` (its reads) and ``tables`` (its transactions)."""

    def __init__(self, db: Queries, tables: UserTables, clock: Callable[[], float]) -> None:
        self._db = db
        self._user_tables = tables
        self._clock = clock

    async def _add_user(self, name: str, digest: str, t: float) -> None:
        await self._user_tables.add_user(name, digest, t)

    async def _add_token(self, name: str, digest: str, t: float) -> None:
        await self._user_tables.add_token(name, digest, t)

    async def _revoke_user(self, name: str, t: float) -> None:
        await self._user_tables.revoke_user(name, t)

    async def users(self) -> list[UserInfo]:
        """See ``UserStore.users``."""
        rows = await self._db.all(
            "SELECT u.name, u.created_at, u.revoked_at, "
            "(SELECT COUNT(*) FROM tether_serve_tokens t WHERE t.name = u.name AND t.revoked_at IS NULL) "
            "FROM tether_serve_users u ORDER BY u.name"
        )
        return [to_user(r) for r in rows]

    async def _active_token(self, digest: str) -> tuple[str, str] | None:
        row = await self._db.one(
            "SELECT t.digest, t.name FROM tether_serve_tokens t JOIN tether_serve_users u ON u.name = t.name "
            "WHERE t.digest = ? AND t.revoked_at IS NULL AND u.revoked_at IS NULL",
            (digest,),
        )
        return (str(row[0]), str(row[1])) if row is not None else None
