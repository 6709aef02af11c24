"""``Agent``: a model, its instructions and its tools, run over a conversation."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, Unpack, cast, overload

from tether.errors import UserError
from tether.messages import Message
from tether.models import Model, ModelSettings, infer_model
from tether.telemetry import Telemetry, run_trace

from ._approvals import DeferredResults, ReplayGuard, process_replay_guard
from ._config import Prompt, RunConfig, RunOptions
from ._context import RunContext
from ._output import OUTPUT_TOOL, OutputSpec
from ._recorder import RunRecorder, StoreRecorder
from ._result import Event, Result
from ._run import Run
from ._stream import RunStream
from ._tools import Tool, ToolLike, as_tools
from ._toolset import Toolset, list_toolsets, split_tools
from .compaction._compactor import Prepared
from .compaction._config import Compaction
from .compaction._defaults import compaction_window
from .compaction._now import compact_now
from .compaction._run import RECALL_TOOL

if TYPE_CHECKING:
    from tether.stores import Store

__all__ = ["Agent"]

Deps = TypeVar("Deps")
Output = TypeVar("Output")
_D = TypeVar("_D")
_O = TypeVar("_O")
InstructionsFn = Callable[[RunContext[Any]], str | Awaitable[str | None] | None]
DEFAULT_APPROVAL_TTL = timedelta(hours=24)


class _AgentOptions(TypedDict, total=False):
    """The keyword arguments of ``Agent`` other than its types (see ``Agent``)."""

    instructions: str | None
    instructions_fn: InstructionsFn | None
    tools: Sequence[ToolLike | Toolset]
    history_processor: Callable[..., Any] | None
    max_steps: int
    retries: int
    approval_secret: bytes | str | None
    approval_ttl: timedelta | float
    replay_guard: ReplayGuard | None
    accept_truncated: bool
    settings: ModelSettings | None
    name: str | None
    telemetry: Telemetry | None
    compaction: Compaction | None


class _RunKwargs(TypedDict, Generic[_D], total=False):
    """The keyword arguments of ``run``, ``run_sync`` and ``run_stream`` (see ``Agent.run``)."""

    history: Sequence[Message]
    deps: _D | None
    tools: Sequence[ToolLike | Toolset] | None
    run_id: str | None
    conversation_id: str | None
    deferred: DeferredResults | None
    store: Store | None
    owner: str | None
    recorder: RunRecorder | None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


def _check_limits(max_steps: int, retries: int) -> None:
    if not _is_int(max_steps) or max_steps < 1:
        raise UserError(f"max_steps must be an int of at least 1, got {max_steps!r}")
    if not _is_int(retries) or retries < 0:
        raise UserError(f"retries must be an int of 0 or more, got {retries!r}")


def _check_naming(name: str | None, telemetry: Telemetry | None, instructions: str | None) -> None:
    """The agent's name, telemetry and static instructions, checked once (not per run)."""
    if name is not None and (not isinstance(name, str) or not name):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"name must be a non-empty string, got {name!r}")
    if telemetry is not None and not isinstance(telemetry, Telemetry):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"telemetry must be a tether.telemetry.Telemetry, not {type(telemetry).__name__}")
    if instructions is not None and not instructions.isascii():
        try:
            instructions.encode()
        except UnicodeEncodeError as exc:  # no provider could take them: say so now, not per run
            raise UserError(
                f"instructions are not valid Unicode: a lone surrogate at character {exc.start}"
            ) from None


def _approval_options(
    approval_secret: bytes | str | None, approval_ttl: timedelta | float, replay_guard: ReplayGuard | None
) -> tuple[bytes | None, float, ReplayGuard]:
    """The signing secret, the pause lifetime in seconds and the replay guard, checked."""
    secret = approval_secret.encode() if isinstance(approval_secret, str) else approval_secret
    if secret is not None and len(secret) < 16:
        raise UserError("approval_secret must be at least 16 bytes")
    given_ttl = cast(object, approval_ttl)
    if isinstance(given_ttl, timedelta):
        ttl = given_ttl.total_seconds()
    elif isinstance(given_ttl, int | float) and not isinstance(given_ttl, bool):
        ttl = float(given_ttl)
    else:
        raise UserError(f"approval_ttl must be a timedelta or seconds, not {type(given_ttl).__name__}")
    if not (ttl > 0 and math.isfinite(ttl)):
        raise UserError(f"approval_ttl must be a positive, finite time, got {approval_ttl!r}")
    if replay_guard is not None and not isinstance(cast(object, replay_guard), ReplayGuard):
        raise UserError(
            "replay_guard must have an async claim_token(digest, expires_at) method (any tether "
            f"store has one), not {type(replay_guard).__name__}"
        )
    return secret, ttl, replay_guard if replay_guard is not None else process_replay_guard()


def _check_compaction(compaction: Compaction, base: RunConfig) -> None:
    """What makes ``compaction`` unusable with the agent's tools and model, said now (not by a
    run that never compacts)."""
    if compaction.recall and RECALL_TOOL in base.tools:
        raise UserError(
            f"the agent has a tool named {RECALL_TOOL!r} and compaction would add its own: rename "
            "the tool or pass Compaction(recall=False)"
        )
    compaction_window(compaction, base.model)


class Agent(Generic[Deps, Output]):
    """Runs a model and its tools over a conversation.

    ``Agent(model, instructions=..., tools=[...], output_type=MyType)``; ``model`` is a ``Model``
    or a ``"provider:model"`` string. ``instructions_fn(ctx)`` adds dynamic instructions after
    the static ones (a blank line between). ``history_processor(history)`` or
    ``history_processor(history, ctx)`` runs once per run on the supplied history. ``max_steps``
    bounds the model requests of a run; ``retries`` bounds consecutive invalid calls of one tool
    (and invalid outputs). ``approval_secret`` signs every pause (v2 tokens, see ADR 0011); its
    tokens expire after ``approval_ttl`` and are single-use through ``replay_guard`` (by default one
    bounded in-memory guard shared by every agent of the process; pass a store to cover several
    processes).
    ``accept_truncated`` returns a text answer cut at the token limit (``result.stop_reason ==
    "length"``) instead of failing the run with ``ModelError``. ``name`` names the agent in
    telemetry (``gen_ai.agent.name``; default: the model's name); ``telemetry`` sets where this
    agent's spans and metrics go (default: ``tether.telemetry.configure``, see docs/telemetry.md).
    ``compaction`` compacts long conversations before each model request (``Compaction``: elide
    old tool output, summarize, budget; records kept in the store; a ``recall`` tool; see
    docs/compaction.md).
    """

    @overload
    def __init__(
        self: Agent[Any, str],
        model: Model | str,
        *,
        output_type: type[str] = str,
        deps_type: None = None,
        **options: Unpack[_AgentOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[Any, _O],
        model: Model | str,
        *,
        output_type: type[_O],
        deps_type: None = None,
        **options: Unpack[_AgentOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[_D, str],
        model: Model | str,
        *,
        output_type: type[str] = str,
        deps_type: type[_D],
        **options: Unpack[_AgentOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[_D, _O],
        model: Model | str,
        *,
        output_type: type[_O],
        deps_type: type[_D],
        **options: Unpack[_AgentOptions],
    ) -> None: ...
    def __init__(
        self,
        model: Model | str,
        *,
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Sequence[ToolLike | Toolset] = (),
        output_type: type[Any] = str,
        deps_type: type[Any] | None = None,
        history_processor: Callable[..., Any] | None = None,
        max_steps: int = 25,
        retries: int = 1,
        approval_secret: bytes | str | None = None,
        approval_ttl: timedelta | float = DEFAULT_APPROVAL_TTL,
        replay_guard: ReplayGuard | None = None,
        accept_truncated: bool = False,
        settings: ModelSettings | None = None,
        name: str | None = None,
        telemetry: Telemetry | None = None,
        compaction: Compaction | None = None,
    ) -> None:
        _check_limits(max_steps, retries)
        self.model: Model = infer_model(model)
        _check_naming(name, telemetry, instructions)
        self.name = name
        self.telemetry = telemetry
        self.instructions = instructions
        self.instructions_fn = instructions_fn
        self.output_type = output_type
        self.deps_type = deps_type
        self.history_processor = history_processor
        self.max_steps = max_steps
        self.retries = retries
        self.settings = settings
        approvals = _approval_options(approval_secret, approval_ttl, replay_guard)
        self._secret, self._approval_ttl, self._replay_guard = approvals
        self.accept_truncated = accept_truncated
        try:
            self._output: OutputSpec[Any] = OutputSpec(output_type)
        except TypeError as exc:
            raise UserError(str(exc)) from None
        self._processor_ctx = history_processor is not None and _takes_context(history_processor)
        if compaction is not None and not isinstance(cast(object, compaction), Compaction):
            raise UserError(f"compaction must be a tether.agent.Compaction, not {type(compaction).__name__}")
        self.compaction = compaction
        static, self._toolsets = split_tools(tools)
        self._base = self._config(static)
        if compaction is not None:
            _check_compaction(compaction, self._base)

    def _config(self, tools: Sequence[ToolLike]) -> RunConfig:
        table = as_tools(tools)
        if not self._output.is_text and OUTPUT_TOOL in table:
            raise UserError(f"the tool name {OUTPUT_TOOL!r} is reserved for structured output")
        definitions = tuple(t.definition for t in table.values())
        if self._output.definition is not None:
            definitions = (*definitions, self._output.definition)
        return RunConfig(
            model=self.model,
            tools=table,
            definitions=definitions,
            output=self._output,
            instructions=self.instructions,
            instructions_fn=self.instructions_fn,
            history_processor=self.history_processor,
            processor_takes_ctx=self._processor_ctx,
            max_steps=self.max_steps,
            retries=self.retries,
            secret=self._secret,
            approval_ttl=self._approval_ttl,
            replay_guard=self._replay_guard,
            accept_truncated=self.accept_truncated,
            settings=self.settings,
            compaction=self.compaction,
        )

    @property
    def tools(self) -> tuple[Tool[Any], ...]:
        """The agent's default tools (without those its toolsets list at each run)."""
        return tuple(self._base.tools.values())

    @property
    def toolsets(self) -> tuple[Toolset, ...]:
        """The agent's toolsets (asked for their tools at the start of each run)."""
        return self._toolsets

    async def aclose(self) -> None:
        """Close the agent's toolsets (MCP connections); ``async with agent:`` does it on exit."""
        for toolset in self._toolsets:
            await toolset.aclose()

    async def __aenter__(self) -> Agent[Deps, Output]:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- running --------------------------------------------------------------------------------
    async def run(
        self,
        prompt: Prompt | None = None,
        **options: Unpack[_RunKwargs[Deps]],
    ) -> Result[Output]:
        """Run once and return the ``Result``; failures raise ``RunError`` with ``partial``.

        ``tools=`` replaces the agent's tools for this run. With ``store`` (and ``owner``), the
        history is loaded from the store and the new messages are appended to it
        (``recorder=StoreRecorder(store, owner, ..., on_conflict="fork")`` chooses the policies).
        Cancelling the task that awaits this lets ``asyncio.CancelledError`` propagate once the
        partial evidence is recorded; the error carries it as ``partial``.
        """
        return await self._start(RunOptions(prompt, **options), None, owned=False)

    def run_sync(
        self,
        prompt: Prompt | None = None,
        **options: Unpack[_RunKwargs[Deps]],
    ) -> Result[Output]:
        """``run`` for synchronous code (not inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError("run_sync cannot be called inside a running event loop; use await agent.run(...)")
        return asyncio.run(self._start(RunOptions(prompt, **options), None, owned=False))

    def run_stream(
        self,
        prompt: Prompt | None = None,
        **options: Unpack[_RunKwargs[Deps]],
    ) -> RunStream[Output]:
        """The run as a stream of events (``async with ... as stream: async for event in stream``),
        ending with ``RunCompleted`` carrying the same ``Result`` as ``run``. The run has a task of
        its own: leaving the stream early or ``stream.cancel()`` stops it (``RunCanceled``)."""
        run_options = RunOptions(prompt, **options)

        def start(emit: Callable[[Event], None]) -> Coroutine[Any, Any, Result[Output]]:
            return self._start(run_options, emit, owned=True)

        return RunStream(start)

    async def compact(
        self,
        *,
        history: Sequence[Message] = (),
        store: Store | None = None,
        owner: str | None = None,
        conversation_id: str | None = None,
        recorder: RunRecorder | None = None,
        force: bool = True,
    ) -> Prepared:
        """Compact a conversation now, without a model turn (``/compact``): with ``store`` (and
        ``owner``, ``conversation_id``) or ``recorder``, the stored conversation from its latest
        record, the new record kept in the store; otherwise ``history``. ``force=False`` compacts
        only when it is over the threshold. Returns the view, the records made and the reports
        (``prepared.report.line()``). Needs ``Agent(compaction=...)`` and a known context window."""
        if self.compaction is None:
            raise UserError("agent.compact needs Agent(compaction=Compaction(...))")
        if store is not None:
            if recorder is not None:
                raise UserError("pass either store= (with owner=) or recorder=, not both")
            if owner is None or conversation_id is None:
                raise UserError("agent.compact with a store needs owner= and conversation_id=")
            recorder = StoreRecorder(store, owner, conversation_id)
        if recorder is not None and history:
            raise UserError("pass either history= or store=: with a store the history is loaded from it")
        return await compact_now(self._base, history=history, recorder=recorder, force=force)

    async def _start(
        self, o: RunOptions, emit: Callable[[Event], None] | None, *, owned: bool
    ) -> Result[Output]:
        given = cast(object, o.history)
        if isinstance(given, str | bytes):
            raise UserError("history must be a sequence of Message, not a string (use tether.loads)")
        if not isinstance(given, Sequence):
            raise UserError(f"history must be a sequence of Message, not {type(given).__name__}")
        for label, value in (
            ("run_id", cast(object, o.run_id)),
            ("conversation_id", cast(object, o.conversation_id)),
        ):
            if value is not None and (not isinstance(value, str) or not value):
                raise UserError(f"{label} must be a non-empty string, got {value!r}")
        given_deferred = cast(object, o.deferred)
        if given_deferred is not None and not isinstance(given_deferred, DeferredResults):
            raise UserError(f"deferred must be a DeferredResults, not {type(given_deferred).__name__}")
        recorder = o.recorder
        if o.store is not None:
            if recorder is not None:
                raise UserError("pass either store= (with owner=) or recorder=, not both")
            if o.owner is None:
                raise UserError("a run with a store needs owner= (the authenticated caller or tenant)")
            recorder = StoreRecorder(o.store, o.owner, o.conversation_id)
        elif recorder is not None and o.conversation_id is not None:
            raise UserError("with recorder= the conversation is the recorder's: do not pass conversation_id=")
        if recorder is not None and o.history:
            raise UserError("pass either history= or store=: with a store the history is loaded from it")
        static, toolsets = (None, self._toolsets) if o.tools is None else split_tools(o.tools)
        cfg = self._base if static is None else self._config(static)
        if toolsets:  # tools known only now (MCP servers): listed once per run
            cfg = self._config([*cfg.tools.values(), *await list_toolsets(toolsets)])
        trace = run_trace(self.telemetry, self.name or self.model.name)
        run = Run(cfg, o, emit=emit, recorder=recorder, trace=trace, owned=owned)
        return cast(Result[Output], await run.trace.around(run, run.execute))
