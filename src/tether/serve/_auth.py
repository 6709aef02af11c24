"""Authentication at the transport: ``Authorization: Bearer <token>`` on every API request.

The authenticated user's name is the ``owner`` of every store and event-log call the request
makes; nothing a client sends can name another owner. ``--no-auth`` (loopback binds only) makes
every request the owner ``local``, the owner ``tether chat`` uses.
"""

from __future__ import annotations

from starlette.requests import Request

from tether.stores.events import UserStore

from ._errors import ApiError
from ._runs import Caller

__all__ = ["LOCAL_OWNER", "Authenticator"]

LOCAL_OWNER = "local"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="tether"'}


class Authenticator:
    """Turns a request into a ``Caller`` or a 401."""

    def __init__(self, users: UserStore | None) -> None:
        self.users = users  # None: --no-auth

    async def caller(self, request: Request) -> Caller:
        headers = {
            k.lower(): v for k, v in request.headers.items() if k.lower() in ("traceparent", "tracestate")
        }
        if self.users is None:
            return Caller(LOCAL_OWNER, headers)
        given = request.headers.getlist("authorization")
        if len(given) > 1:  # which one counts would be up to each proxy on the way: refuse
            raise ApiError(401, "several Authorization headers: send exactly one", headers=_CHALLENGE)
        header = given[0] if given else ""
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(
                401, "missing bearer token: send Authorization: Bearer <token>", headers=_CHALLENGE
            )
        name = await self.users.authenticate(token.strip())
        if name is None:
            raise ApiError(401, "invalid or revoked token", headers=_CHALLENGE)
        return Caller(name, headers)

    async def still_allowed(self, request: Request, caller: Caller) -> bool:
        """Whether ``request``'s token still authenticates ``caller`` (asked again by long
        streams: a token or user revoked after the stream opened ends it)."""
        if self.users is None:
            return True
        try:
            return (await self.caller(request)).owner == caller.owner
        except ApiError:
            return False
