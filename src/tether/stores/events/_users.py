"""Users and API tokens of the service: the ``UserStore`` protocol and the token rules.

A token is ``tth_`` + 43 characters of base64url: 256 random bits. Only its SHA-256 digest is
stored; the token itself is shown once, when it is made. Authentication looks the digest up and
compares it in constant time (``hmac.compare_digest``); a revoked user or token authenticates
nothing. User names are the ``owner`` of every store call the user makes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from tether.errors import ConflictError, NotFound, UserError

__all__ = [
    "RESERVED_NAMES",
    "TOKEN_PREFIX",
    "UserInfo",
    "UserStore",
    "check_new_user_name",
    "check_user_name",
    "new_token",
    "no_active_user",
    "no_user",
    "token_digest",
    "token_matches",
    "user_exists",
    "well_formed",
]

TOKEN_PREFIX = "tth_"
_TOKEN_SHAPE = re.compile(r"^tth_[A-Za-z0-9_-]{43}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


@dataclass(frozen=True, slots=True)
class UserInfo:
    """One user: name, when made, when revoked (``None``: active), how many active tokens."""

    name: str
    created_at: datetime
    revoked_at: datetime | None
    tokens: int


def check_user_name(name: object) -> str:
    """A user name: 1 to 64 characters of letters, digits and ``. _ @ -``, not starting with a symbol."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(
            "user name must be 1-64 letters, digits or . _ @ - (starting with a "
            f"letter or digit), not {name!r}"
        )
    return name


RESERVED_NAMES = frozenset({"local"})
"""Owners no service user may take: ``local`` owns ``tether chat``'s conversations (and those of
``tether serve --no-auth``) in the same database."""


def check_new_user_name(name: object) -> str:
    """A name for a new user: well formed (``check_user_name``) and not reserved."""
    name = check_user_name(name)
    if name in RESERVED_NAMES:
        raise UserError(
            f"user name {name!r} is reserved: it owns tether chat's conversations (and those of "
            "tether serve --no-auth) in this database; choose another name"
        )
    return name


def new_token() -> str:
    """A fresh API token (256 random bits)."""
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def token_digest(token: str) -> str:
    """The stored form of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str, digest: str) -> bool:
    """Constant-time comparison of a presented token with a stored digest."""
    return hmac.compare_digest(token_digest(token), digest)


def well_formed(token: str) -> bool:
    """True when ``token`` has the shape of a tether token (checked before any lookup)."""
    return bool(_TOKEN_SHAPE.fullmatch(token))


def user_exists(name: str) -> ConflictError:
    """The error of ``add_user`` with a name already taken (revoked users included)."""
    return ConflictError(f"user {name!r} exists (names are never reused)", expected=0, actual=1)


def no_active_user(name: str) -> NotFound:
    """The error of ``add_token`` for a name that is not an active user."""
    return NotFound(f"no active user {name!r}")


def no_user(name: str) -> NotFound:
    """The error of ``revoke_user`` for an unknown name."""
    return NotFound(f"no user {name!r}")


@runtime_checkable
class UserStore(Protocol):
    """The service's users and their tokens. Every method is async."""

    async def add_user(self, name: str) -> str:
        """Create a user and return its first token (shown once). ``ConflictError`` if the name
        exists (revoked users included: names are never reused)."""
        ...

    async def add_token(self, name: str) -> str:
        """Another token for an active user (``NotFound`` otherwise)."""
        ...

    async def revoke_user(self, name: str) -> None:
        """Revoke a user and every token of it (``NotFound`` for an unknown name)."""
        ...

    async def users(self) -> list[UserInfo]:
        """Every user, by name."""
        ...

    async def authenticate(self, token: str) -> str | None:
        """The name of the active user holding ``token``, or ``None``."""
        ...

    async def close(self) -> None:
        """Release connections and threads. Idempotent."""
        ...
