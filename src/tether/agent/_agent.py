"""``Agent``: a model, its instructions and its tools, run over a conversation."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from tether.errors import RunError, UserError
from tether.messages import Message
from tether.models import Model, ModelSettings, infer_model

from ._approvals import DeferredResults
from ._context import RunContext
from ._output import OUTPUT_TOOL, OutputSpec
from ._result import Event, Result
from ._run import Prompt, Run, RunConfig
from ._store import StoreBinding
from ._stream import RunStream
from ._tools import Tool, ToolLike, as_tools

if TYPE_CHECKING:
    from tether.stores import Store

__all__ = ["Agent"]

Deps = TypeVar("Deps")
Output = TypeVar("Output")
_D = TypeVar("_D")
_O = TypeVar("_O")
InstructionsFn = Callable[[RunContext[Any]], str | Awaitable[str | None] | None]


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


class Agent(Generic[Deps, Output]):
    """Runs a model and its tools over a conversation.

    ``Agent(model, instructions=..., tools=[...], output_type=MyType)``; ``model`` is a ``Model``
    or a ``"provider:model"`` string. ``instructions_fn(ctx)`` adds dynamic instructions after
    the static ones (a blank line between). ``history_processor(history)`` or
    ``history_processor(history, ctx)`` runs once per run on the supplied history. ``max_steps``
    bounds the model requests of a run; ``retries`` bounds consecutive invalid calls of one tool
    (and invalid outputs). ``approval_secret`` turns on HMAC tokens for deferred decisions.
    """

    @overload
    def __init__(
        self: Agent[Any, str],
        model: Model | str,
        *,
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Sequence[ToolLike] = (),
        output_type: type[str] = str,
        deps_type: None = None,
        history_processor: Callable[..., Any] | None = None,
        max_steps: int = 25,
        retries: int = 1,
        approval_secret: bytes | str | None = None,
        settings: ModelSettings | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[Any, _O],
        model: Model | str,
        *,
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Sequence[ToolLike] = (),
        output_type: type[_O],
        deps_type: None = None,
        history_processor: Callable[..., Any] | None = None,
        max_steps: int = 25,
        retries: int = 1,
        approval_secret: bytes | str | None = None,
        settings: ModelSettings | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[_D, str],
        model: Model | str,
        *,
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Sequence[ToolLike] = (),
        output_type: type[str] = str,
        deps_type: type[_D],
        history_processor: Callable[..., Any] | None = None,
        max_steps: int = 25,
        retries: int = 1,
        approval_secret: bytes | str | None = None,
        settings: ModelSettings | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[_D, _O],
        model: Model | str,
        *,
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Sequence[ToolLike] = (),
        output_type: type[_O],
        deps_type: type[_D],
        history_processor: Callable[..., Any] | None = None,
        max_steps: int = 25,
        retries: int = 1,
        approval_secret: bytes | str | None = None,
        settings: ModelSettings | None = None,
    ) -> None: ...
    def __init__(
        self,
        model: Model | str,
        *,
        instructions: str | None = None,
        instructions_fn: InstructionsFn | None = None,
        tools: Sequence[ToolLike] = (),
        output_type: type[Any] = str,
        deps_type: type[Any] | None = None,
        history_processor: Callable[..., Any] | None = None,
        max_steps: int = 25,
        retries: int = 1,
        approval_secret: bytes | str | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        if max_steps < 1:
            raise UserError(f"max_steps must be at least 1, got {max_steps}")
        if retries < 0:
            raise UserError(f"retries must be 0 or more, got {retries}")
        self.model: Model = infer_model(model)
        self.instructions = instructions
        self.instructions_fn = instructions_fn
        self.output_type = output_type
        self.deps_type = deps_type
        self.history_processor = history_processor
        self.max_steps = max_steps
        self.retries = retries
        self.settings = settings
        secret = approval_secret.encode() if isinstance(approval_secret, str) else approval_secret
        if secret is not None and len(secret) < 16:
            raise UserError("approval_secret must be at least 16 bytes")
        self._secret = secret
        try:
            self._output: OutputSpec[Any] = OutputSpec(output_type)
        except TypeError as exc:
            raise UserError(str(exc)) from None
        self._processor_ctx = history_processor is not None and _takes_context(history_processor)
        self._base = self._config(tools)

    def _config(self, tools: Sequence[ToolLike]) -> RunConfig:
        table = as_tools(tools)
        if not self._output.is_text and OUTPUT_TOOL in table:
            raise UserError(f"the tool name {OUTPUT_TOOL!r} is reserved for structured output")
        definitions = tuple(t.definition for t in table.values())
        if self._output.definition is not None:
            definitions = (*definitions, self._output.definition)
        return RunConfig(
            self.model,
            table,
            definitions,
            self._output,
            self.instructions,
            self.instructions_fn,
            self.history_processor,
            self._processor_ctx,
            self.max_steps,
            self.retries,
            self._secret,
            self.settings,
        )

    @property
    def tools(self) -> tuple[Tool[Any], ...]:
        """The agent's default tools."""
        return tuple(self._base.tools.values())

    # -- running --------------------------------------------------------------------------------
    async def run(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        deps: Deps | None = None,
        tools: Sequence[ToolLike] | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        deferred: DeferredResults | None = None,
        store: Store | None = None,
        owner: str | None = None,
    ) -> Result[Output]:
        """Run once and return the ``Result``; failures raise ``RunError`` with ``partial``.

        ``tools=`` replaces the agent's tools for this run. With ``store`` (and ``owner``), the
        history is loaded from the store and the new messages are appended to it.
        """
        return await self._start(
            prompt, history, deps, tools, run_id, conversation_id, deferred, store, owner, None
        )

    def run_sync(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        deps: Deps | None = None,
        tools: Sequence[ToolLike] | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        deferred: DeferredResults | None = None,
        store: Store | None = None,
        owner: str | None = None,
    ) -> Result[Output]:
        """``run`` for synchronous code (not inside a running event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UserError("run_sync cannot be called inside a running event loop; use await agent.run(...)")
        return asyncio.run(
            self._start(prompt, history, deps, tools, run_id, conversation_id, deferred, store, owner, None)
        )

    def run_stream(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        deps: Deps | None = None,
        tools: Sequence[ToolLike] | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        deferred: DeferredResults | None = None,
        store: Store | None = None,
        owner: str | None = None,
    ) -> RunStream[Output]:
        """The run as a stream of events (``async with ... as stream: async for event in stream``),
        ending with ``RunCompleted`` carrying the same ``Result`` as ``run``."""

        def start(emit: Callable[[Event], None]) -> Awaitable[Result[Output]]:
            return self._start(
                prompt, history, deps, tools, run_id, conversation_id, deferred, store, owner, emit
            )

        return RunStream(start)

    async def _start(
        self,
        prompt: Prompt | None,
        history: Sequence[Message],
        deps: Deps | None,
        tools: Sequence[ToolLike] | None,
        run_id: str | None,
        conversation_id: str | None,
        deferred: DeferredResults | None,
        store: Store | None,
        owner: str | None,
        emit: Callable[[Event], None] | None,
    ) -> Result[Output]:
        given = cast(object, history)
        if isinstance(given, str | bytes):
            raise UserError("history must be a sequence of Message, not a string (use tether.loads)")
        if not isinstance(given, Sequence):
            raise UserError(f"history must be a sequence of Message, not {type(given).__name__}")
        for label, value in (
            ("run_id", cast(object, run_id)),
            ("conversation_id", cast(object, conversation_id)),
        ):
            if value is not None and (not isinstance(value, str) or not value):
                raise UserError(f"{label} must be a non-empty string, got {value!r}")
        given_deferred = cast(object, deferred)
        if given_deferred is not None and not isinstance(given_deferred, DeferredResults):
            raise UserError(f"deferred must be a DeferredResults, not {type(given_deferred).__name__}")
        cfg = self._base if tools is None else self._config(tools)
        if store is None:
            run = Run(
                cfg,
                prompt=prompt,
                history=history,
                deps=deps,
                run_id=run_id,
                conversation_id=conversation_id,
                deferred=deferred,
                emit=emit,
            )
            return cast(Result[Output], await run.execute())
        if owner is None:
            raise UserError("a run with a store needs owner= (the authenticated caller or tenant)")
        if history:
            raise UserError("pass either history= or store=: with a store the history is loaded from it")
        from_store = conversation_id is not None
        binding = StoreBinding(store, owner, conversation_id or "")
        if not from_store:
            binding.conversation_id = await store.create(owner)
        loaded = await binding.load(repair=prompt is not None and deferred is None) if from_store else []
        run = Run(
            cfg,
            prompt=prompt,
            history=loaded,
            deps=deps,
            run_id=run_id,
            conversation_id=binding.conversation_id,
            deferred=deferred,
            emit=emit,
            hooks=binding,
        )
        try:
            result = await run.execute()
        except RunError as exc:
            await binding.fail(exc)
            raise
        await binding.finish(result)
        return cast(Result[Output], result)
