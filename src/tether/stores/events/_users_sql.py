"""``SQLUserStore``: the ``UserStore`` both SQL databases share (the token rules, the argument
checks, the reads), over the users and tokens statements of one database (``UserTables``).

Tables ``tether_serve_users`` and ``tether_serve_tokens`` (``_migrations.py``). A user's
name is never reused; revoking a user revokes its tokens in the same transaction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tether.stores._common import to_datetime
from tether.stores.events._common import Queries
from tether.stores.events._users import (
    UserInfo,
    check_new_user_name,
    check_user_name,
    new_token,
    token_digest,
    token_matches,
    well_formed,
)

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


class SQLUserStore(ABC):
    """A ``UserStore`` over ``db`` (its reads) and ``tables`` (its transactions)."""

    def __init__(self, db: Queries, tables: UserTables, clock: Callable[[], float]) -> None:
        self._db = db
        self._user_tables = tables
        self._clock = clock

    async def add_user(self, name: str) -> str:
        """See ``UserStore.add_user``."""
        check_new_user_name(name)
        token = new_token()
        await self._user_tables.add_user(name, token_digest(token), self._clock())
        return token

    async def add_token(self, name: str) -> str:
        """See ``UserStore.add_token``."""
        check_user_name(name)
        token = new_token()
        await self._user_tables.add_token(name, token_digest(token), self._clock())
        return token

    async def revoke_user(self, name: str) -> None:
        """See ``UserStore.revoke_user``."""
        await self._user_tables.revoke_user(name, self._clock())

    async def users(self) -> list[UserInfo]:
        """See ``UserStore.users``."""
        rows = await self._db.all(
            "SELECT u.name, u.created_at, u.revoked_at, "
            "(SELECT COUNT(*) FROM tether_serve_tokens t WHERE t.name = u.name AND t.revoked_at IS NULL) "
            "FROM tether_serve_users u ORDER BY u.name"
        )
        return [to_user(r) for r in rows]

    async def authenticate(self, token: str) -> str | None:
        """See ``UserStore.authenticate``."""
        if not isinstance(token, str) or not well_formed(token):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        row = await self._db.one(
            "SELECT t.digest, t.name FROM tether_serve_tokens t JOIN tether_serve_users u ON u.name = t.name "
            "WHERE t.digest = ? AND t.revoked_at IS NULL AND u.revoked_at IS NULL",
            (token_digest(token),),
        )
        if row is None or not token_matches(token, row[0]):
            return None
        return str(row[1])

    @abstractmethod
    async def close(self) -> None:
        """Release connections and threads. Idempotent."""
