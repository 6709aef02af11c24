"""``/mcp``: the user's conversations over MCP (streamable HTTP), behind the same bearer tokens
as the rest of the API, and the MCP servers whose tools the service's agent uses (``--mcp``).

The history server answers for the authenticated caller only (``tether.integrations.mcp``
scopes every tool to the owner this module puts into the request). Without the ``mcp`` extra
the route answers 501 naming the pip command, and ``--mcp`` fails at start.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.requests import Request

from tether.errors import MissingExtra

from ._config import ServeConfig
from ._errors import ApiError, handle_exception
from ._guard import check_browser_boundary
from ._state import ServeState

__all__ = ["McpEndpoint", "mcp_toolsets"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def _integration() -> Any:
    return importlib.import_module("tether.integrations.mcp")  # the optional extra, when asked for


def mcp_toolsets(config: ServeConfig) -> list[Any]:
    """The toolsets of ``--mcp`` (MissingExtra without the extra)."""
    if not config.mcp:
        return []
    module = _integration()
    return [module.MCPTools.from_spec(spec, headers=config.mcp_headers) for spec in config.mcp]


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``; ``running()`` spans the service's lifetime."""

    def __init__(self, state: ServeState) -> None:
        self.state = state
        self.missing: str | None = None
        self.endpoint: Any = None
        try:
            module = _integration()
        except MissingExtra as exc:
            self.missing = str(exc)
        else:
            self.endpoint = module.HistoryEndpoint(
                lambda: state.store, max_body_bytes=state.config.max_body_bytes
            )

    def running(self) -> AbstractAsyncContextManager[Any]:
        return self.endpoint.running() if self.endpoint is not None else contextlib.nullcontext()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            check_browser_boundary(request, auth=self.state.config.auth)
            if self.endpoint is None:
                raise ApiError(501, f"the MCP endpoint is not available: {self.missing}")
            caller = await self.state.auth.caller(request)
        except Exception as exc:
            response = await handle_exception(request, exc)
            await response(scope, receive, send)
            return
        await self.endpoint.handle(scope, receive, send, owner=caller.owner)
