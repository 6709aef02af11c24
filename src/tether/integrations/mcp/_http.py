"""The history server over streamable HTTP, for a service that authenticates its callers itself.

Stateless: every POST is its own MCP exchange, so nothing of one caller's session can be reached
with another caller's token. The service puts the authenticated owner into the request's scope
(``handle(..., owner=...)``); the tools read it from there and from nowhere else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

from tether.stores import Store

from ._history import OWNER_SCOPE_KEY, history_server, scope_owner

__all__ = ["HistoryEndpoint"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class HistoryEndpoint:
    """``history_server`` as an ASGI endpoint: run ``running()`` for the service's lifetime and
    pass each authenticated request to ``handle(scope, receive, send, owner=...)``."""

    def __init__(self, store: Callable[[], Store], *, max_body_bytes: int = 1024 * 1024) -> None:
        self.server = history_server(store, scope_owner)
        self.server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=max_body_bytes,
            # the service checks Host and Origin itself (and a token on every request)
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._manager = self.server.session_manager

    def running(self) -> AbstractAsyncContextManager[None]:
        return self._manager.run()

    async def handle(self, scope: Scope, receive: Receive, send: Send, *, owner: str) -> None:
        scoped = dict(scope)
        scoped[OWNER_SCOPE_KEY] = owner
        await self._manager.handle_request(scoped, receive, send)
