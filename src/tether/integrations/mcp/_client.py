"""``MCPTools``: an MCP server's tools as a tether toolset (stdio command or streamable HTTP URL).

One connection per toolset, owned by a task of its own (the SDK's session must be entered and left
in one task, and runs use tasks of theirs). The tools are listed when the first run starts and
again after the server says its list changed (``notifications/tools/list_changed``); every
request is bounded by ``timeout``. A server that died, hangs or answers garbage fails the call
(``MCPFailure``): the model reads the failure, or the run ends (``on_failure="fail"``). The next
call after a dead connection reconnects (a stdio server is started again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import sys
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import httpx2
import mcp_types as mt
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tether.agent import SchemaTool, Tool
from tether.errors import TetherError, UserError

from ._mapping import ApprovalPolicy, ToolPolicy, check_against, policy_for, tether_name, to_result

__all__ = ["MCPFailure", "MCPTools"]

log = logging.getLogger("tether.integrations.mcp")
Transport = Callable[[], AbstractAsyncContextManager[Any]]


class MCPFailure(TetherError):
    """An MCP server could not be reached, died, timed out or answered something that is not MCP.
    Raised by an MCP tool's call (the run shows it to the model, or ends with ``ToolError`` when
    the toolset says ``on_failure="fail"``) and by listing at run start (``RunError``)."""


@dataclass(slots=True)
class _Live:
    session: ClientSession
    task: asyncio.Task[None]
    closing: asyncio.Event
    loop: asyncio.AbstractEventLoop


class MCPTools:
    """The tools of one MCP server, for ``Agent(tools=[...])``.

    ``MCPTools.stdio("command args")`` starts the server as a subprocess;
    ``MCPTools.http(url, headers={"Authorization": "Bearer …"})`` connects over streamable HTTP.
    ``prefix`` is put before every tool name (``prefix_name``); ``tools`` keeps only those MCP
    tool names. Guarantees come from the server's annotations (hints from a server you chose to
    trust; see docs/mcp.md): read-only or idempotent tools are idempotent, the others are side
    effects under the ledger, possibly destructive ones need approval (``approval=``, and
    per tool ``overrides={"name": ToolPolicy(...)}``). ``timeout`` bounds listing and each call
    (seconds); ``connect_timeout`` (default: ``timeout``) bounds starting and initializing.
    Close with ``await tools.aclose()`` or ``Agent.aclose()``.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        label: str,
        prefix: str | None = None,
        tools: Sequence[str] | None = None,
        approval: ApprovalPolicy = "destructive",
        overrides: Mapping[str, ToolPolicy] | None = None,
        timeout: float = 60.0,
        connect_timeout: float | None = None,
        on_failure: Literal["continue", "fail"] = "continue",
    ) -> None:
        if approval not in ("destructive", "all", "none"):
            raise UserError(f"approval must be 'destructive', 'all' or 'none', not {approval!r}")
        if on_failure not in ("continue", "fail"):
            raise UserError(f"on_failure must be 'continue' or 'fail', not {on_failure!r}")
        for option, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            given: object = value
            if given is None and option == "connect_timeout":
                continue
            if isinstance(given, bool) or not isinstance(given, int | float) or not 0 < given <= 3600:
                raise UserError(f"{option} must be seconds between 0 and 3600, not {given!r}")
        self._transport = transport
        self.label = label
        self.prefix = prefix
        self.only = None if tools is None else frozenset(tools)
        self.approval: ApprovalPolicy = approval
        self.overrides = dict(overrides or {})
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout) if connect_timeout is not None else self.timeout
        self.on_failure = on_failure
        self._live: _Live | None = None
        self._listed: list[Tool[Any]] | None = None
        self._lock: asyncio.Lock | None = None
        self._closed = False

    # -- constructors ----------------------------------------------------------------------------
    @classmethod
    def stdio(
        cls,
        command: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: TextIO | None = None,
        **options: Any,
    ) -> MCPTools:
        """A server started as ``command`` (a shell-style string or an argument list), spoken to
        over its stdin/stdout. ``env`` is added to a minimal environment (the SDK's default: no
        secrets of this process leak to the server unless given here); its stderr goes to
        ``errlog`` (default: this process's stderr)."""
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise UserError("MCPTools.stdio needs a command")
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env=dict(env) if env else None, cwd=cwd
        )

        def transport() -> AbstractAsyncContextManager[Any]:
            return stdio_client(params, errlog=_real_file(errlog if errlog is not None else sys.stderr))

        options.setdefault("label", shlex.join(argv))
        return cls(transport, **options)

    @classmethod
    def http(cls, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> MCPTools:
        """A server at ``url`` over streamable HTTP; ``headers`` go with every request (an
        ``Authorization`` header for a server that needs a token)."""
        if not url.startswith(("http://", "https://")):
            raise UserError(f"an MCP server URL starts with http:// or https://, not {url[:40]!r}")
        given = dict(headers or {})
        timeout = float(options.get("timeout", 60.0))

        @contextlib.asynccontextmanager
        async def transport() -> AsyncGenerator[Any]:
            async with (
                httpx2.AsyncClient(headers=given, timeout=httpx2.Timeout(timeout)) as client,
                streamable_http_client(url, http_client=client) as streams,
            ):
                yield streams

        options.setdefault("label", url)
        return cls(transport, **options)

    @classmethod
    def from_spec(cls, spec: str, *, headers: Sequence[str] = (), **options: Any) -> MCPTools:
        """What ``--mcp SPEC`` names: an ``http(s)://`` URL (``headers`` as ``"Name: value"``
        lines go with its requests) or a command line started over stdio."""
        if spec.startswith(("http://", "https://")):
            parsed: dict[str, str] = {}
            for line in headers:
                name, sep, value = line.partition(":")
                if not sep or not name.strip():
                    raise UserError(f"an MCP header is 'Name: value', not {line[:40]!r}")
                parsed[name.strip()] = value.strip()
            return cls.http(spec, headers=parsed, **options)
        if not spec.strip():
            raise UserError("--mcp needs a command or an http(s):// URL")
        return cls.stdio(spec, **options)

    def __repr__(self) -> str:
        return f"MCPTools({self.label!r})"

    # -- Toolset ---------------------------------------------------------------------------------
    async def list_tools(self) -> Sequence[Tool[Any]]:
        """The server's tools as tether tools (listed again only after a list change)."""
        async with self._guard():
            live = await self._connection()
            if self._listed is None:
                self._listed = await self._list(live.session)
            return list(self._listed)

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()

    async def __aenter__(self) -> MCPTools:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- connection ------------------------------------------------------------------------------
    def _guard(self) -> asyncio.Lock:
        if self._lock is None or (
            self._live is not None and self._live.loop is not asyncio.get_running_loop()
        ):
            self._lock = asyncio.Lock()
        return self._lock

    async def _connection(self) -> _Live:
        if self._closed:
            raise UserError(f"{self!r} is closed")
        live = self._live
        if live is not None and live.loop is asyncio.get_running_loop() and not live.task.done():
            return live
        await self._drop()
        self._listed = None
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(_retrieved)  # a failure after a timeout is not "never retrieved"
        closing = asyncio.Event()
        task = asyncio.create_task(self._hold(ready, closing), name=f"tether-mcp {self.label}")
        try:
            session = await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except TimeoutError:
            closing.set()
            task.cancel()
            raise MCPFailure(
                f"MCP server {self.label} gave no answer to initialize within {self.connect_timeout:g}s"
            ) from None
        except Exception as exc:
            raise MCPFailure(f"MCP server {self.label} could not be started or reached: {_why(exc)}") from exc
        self._live = _Live(session, task, closing, asyncio.get_running_loop())
        return self._live

    async def _hold(self, ready: asyncio.Future[ClientSession], closing: asyncio.Event) -> None:
        try:
            async with (
                self._transport() as (read, write, *_),
                ClientSession(read, write, message_handler=self._on_message) as session,
            ):
                await session.initialize()
                ready.set_result(session)
                await closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else MCPFailure("connection canceled"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s: connection ended: %s", self.label, _why(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._listed = None  # the next run lists again
        elif isinstance(message, Exception):
            log.warning("MCP server %s sent something that is not MCP: %s", self.label, _why(message))

    async def _drop(self) -> None:
        live, self._live = self._live, None
        if live is None or live.loop is not asyncio.get_running_loop():
            return  # a connection of a loop that is gone went with it
        live.closing.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(live.task), 5)
        if not live.task.done():
            live.task.cancel()
            with contextlib.suppress(BaseException):
                await live.task

    # -- listing and calling ---------------------------------------------------------------------
    async def _list(self, session: ClientSession) -> list[Tool[Any]]:
        found: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server paging forever is garbage too
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self._bounded(session.list_tools(params=params), "tools/list")
            found.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        tools: dict[str, Tool[Any]] = {}
        for spec in found:
            if self.only is not None and spec.name not in self.only:
                continue
            override = self.overrides.get(spec.name)
            if override is not None and not override.enabled:
                continue
            tool = self._tool(spec, override)
            if tool.name in tools:
                log.warning(
                    "MCP server %s: two tools map to %r; the second is left out", self.label, tool.name
                )
                continue
            tools[tool.name] = tool
        return list(tools.values())

    def _tool(self, spec: mt.Tool, override: ToolPolicy | None) -> Tool[Any]:
        guarantees = policy_for(spec, self.approval, override)
        mcp_name = spec.name
        name = tether_name(self.prefix, mcp_name)

        async def call(arguments: dict[str, Any]) -> Any:
            return await self._call(mcp_name, name, arguments)

        schema = spec.input_schema if spec.input_schema.get("type") == "object" else {"type": "object"}
        return SchemaTool(
            name,
            spec.description or spec.title or "",
            schema,
            call,
            check=check_against(schema),
            idempotent=guarantees.idempotent,
            requires_approval=guarantees.requires_approval,
            propagate=self.on_failure == "fail",
        )

    async def _call(self, mcp_name: str, name: str, arguments: dict[str, Any]) -> Any:
        async with self._guard():
            live = await self._connection()
        result = await self._bounded(
            live.session.call_tool(mcp_name, arguments, read_timeout_seconds=self.timeout),
            f"tools/call {mcp_name}",
        )
        if not isinstance(result, mt.CallToolResult):
            raise MCPFailure(
                f"MCP server {self.label}: tools/call {mcp_name} answered {type(result).__name__}"
            )
        return to_result(self.label, mcp_name, result, name=name)

    async def _bounded(self, request: Any, what: str) -> Any:
        """``request`` within ``timeout``; a timeout, a closed connection or garbage is an
        ``MCPFailure`` and drops the connection (the next request connects again), an error the
        server answered is an ``MCPFailure`` on a connection that stays."""
        try:
            return await asyncio.wait_for(request, self.timeout)
        except asyncio.CancelledError:
            raise
        except MCPError as exc:
            if exc.code != mt.CONNECTION_CLOSED:
                raise MCPFailure(f"MCP server {self.label} refused {what}: {exc.error.message}") from exc
            problem = "closed the connection (the server stopped or crashed)"
        except TimeoutError:
            problem = f"gave no answer within {self.timeout:g}s"
        except Exception as exc:
            problem = f"failed: {_why(exc)}"
        await self._drop()
        raise MCPFailure(f"MCP server {self.label} {problem} during {what}")


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _real_file(stream: TextIO) -> TextIO:
    """``stream`` if it has a file descriptor (a subprocess writes to it), else the process's
    own stderr (a test runner's captured stream has none)."""
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__ if sys.__stderr__ is not None else stream
    return stream


def _why(exc: BaseException) -> str:
    """An exception (or the first leaf of an exception group) in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # pyright: ignore[reportUnknownMemberType]
        exc = exc.exceptions[0]  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    text = str(exc) or type(exc).__name__  # pyright: ignore[reportUnknownArgumentType]
    return text if len(text) <= 300 else text[:300] + "..."
