"""The ASGI application: routes from the table, JSON errors, security headers, the lifespan that
opens the store, the event log and the run manager."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import tether.stores as stores
from tether.agent import Agent
from tether.agent.compaction import default_compaction
from tether.models import Model
from tether.stores import SQLiteStore, Store
from tether.stores import events as event_logs
from tether.stores.events import EventLog, SQLiteEventLog, UserStore

from . import _routes_conversations, _routes_runs, agui, aisdk
from ._api import Api, Call, check_json_request, json_response, read_json
from ._auth import Authenticator
from ._config import ServeConfig
from ._durable import engine_for
from ._errors import handle_exception, handle_http
from ._guard import check_browser_boundary
from ._loading import load_model, load_tools
from ._mcp import McpEndpoint, mcp_toolsets
from ._openapi import openapi_document
from ._runs import Caller, RunManager
from ._schemas import Me
from ._state import ServeState

__all__ = ["API", "SECURITY_HEADERS", "ServeState", "create_app"]

log = logging.getLogger("tether.serve")
STATIC = Path(__file__).parent / "static"
VERSION = "1"

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
"""On every response (CORS is off: no Access-Control-* header is ever sent)."""

API = Api()
_routes_conversations.register(API)
_routes_runs.register(API)
agui.register(API)
aisdk.register(API)  # the AI SDK's chat stream (docs/ai-sdk.md)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@API.route("GET", "/v1/me", summary="Who the token belongs to", response=Me, errors=(401,), tags=("service",))
async def me(call: Call[None]) -> Response:
    return json_response(Me(call.caller.owner, call.state.auth.users is not None))


class SecurityHeaders:
    """Adds ``SECURITY_HEADERS`` (and ``Cache-Control: no-store`` unless set) to every response,
    error pages of the server itself included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
                if "cache-control" not in headers:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _endpoint(op: Any, state: ServeState) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        try:
            check_browser_boundary(request, auth=state.config.auth)
            caller = await state.auth.caller(request) if op.auth else Caller("")
            check_json_request(request, takes_body=op.body is not None)
            body = None
            if op.body is not None:
                body = await read_json(
                    request, op.body, state.config.max_body_bytes, required=op.body_required
                )
            return await op.handler(Call(request, caller, body, state))
        except Exception as exc:
            return await handle_exception(request, exc)

    return handle


def _open_backends(config: ServeConfig) -> tuple[Store, EventLog, UserStore]:
    if config.db is not None:
        events = SQLiteEventLog(config.db, poll_interval=config.poll_interval)
        return SQLiteStore(config.db), events, events
    # the postgres extra is optional: its modules load only when a DSN is given (MissingExtra)
    assert config.postgres is not None
    pg_events = event_logs.PostgresEventLog(
        config.postgres,
        schema=config.postgres_schema,
        notify=config.notify,
        poll_interval=config.poll_interval,
    )
    pg_store = stores.PostgresStore(config.postgres, schema=config.postgres_schema)
    return pg_store, pg_events, pg_events


def create_app(config: ServeConfig, *, model: Model | None = None) -> ASGIApp:
    """The service as an ASGI application (run it with uvicorn). ``model`` replaces the one
    ``config.model`` names (the command line loads it first, to fail before binding)."""
    state = ServeState(config)
    mcp = McpEndpoint(state)  # /mcp: the caller's conversations over MCP

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncGenerator[None]:
        store, events, users = _open_backends(config)
        try:
            secret = await events.secret("approval")  # connects and migrates before serving
            chosen = model if model is not None else load_model(config.model)
            agent = Agent(
                chosen,
                instructions=config.instructions,
                tools=[*load_tools(config.tools), *mcp_toolsets(config)],
                # a long conversation is compacted as in tether chat (recall with the tools)
                compaction=default_compaction(chosen, recall=config.tools is not None)
                if config.compaction
                else None,
                approval_secret=secret,
                # a reply cut at its length limit is kept and shown (marked), as in tether chat:
                # a chat is not a pipeline that must refuse a truncated output
                accept_truncated=True,
                approval_ttl=config.approval_ttl,
            )
            state.store, state.events = store, events
            state.auth = Authenticator(users if config.auth else None)
            state.manager = RunManager(
                store=store,
                events=events,
                agent=agent,
                approval_ttl=config.approval_ttl,
                heartbeat_interval=config.heartbeat_interval,
                stale_after=config.stale_after,
                max_active_runs=config.max_active_runs,
                max_part_bytes=config.max_part_bytes,
                engine=engine_for(config),
            )
            await state.manager.open()
            try:
                async with mcp.running():
                    yield
            finally:
                await state.manager.close(drain=config.drain_timeout)
                await agent.aclose()  # the --mcp connections
        finally:
            await events.close()
            await store.close()

    document = openapi_document(API, title="tether serve", version=VERSION, auth=config.auth)

    async def openapi(_: Request) -> Response:
        return json_response(document)

    async def health(_: Request) -> Response:
        return json_response({"ok": True})  # no token here: nothing about anyone's runs

    async def index(_: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    routes: list[BaseRoute] = [
        Route(op.path, _endpoint(op, state), methods=[op.method], name=op.name) for op in API.operations
    ]
    routes += [
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        Route("/", index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: handle_http, Exception: handle_exception},
    )
    # /v1/conversations/ is an unknown route (a JSON 404), not a redirect built from the
    # client's Host header
    app.router.redirect_slashes = False
    return SecurityHeaders(app)
