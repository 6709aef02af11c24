"""The run loop: prepare the history once, then request, execute tools, repeat.

Per run, in order: the history processor (once, on what the caller supplied), validation, repair
(``normalize_history``, once), then the tool loop. After the first request each step touches only
the messages it adds: the model receives an O(1) view of the growing list, never a copy.

Failures and cancellation end in one place (``execute``): the ``Partial`` is built from the run's
state, the recorder receives what it does not hold yet (shielded from further cancellation and
bounded in time), and then the error is raised — ``RunError`` for a failure or an explicit stop,
``asyncio.CancelledError`` (carrying the partial) when the task awaiting the run was cancelled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from msgspec.structs import replace

from tether.errors import (
    ApprovalError,
    MaxStepsError,
    ModelError,
    Partial,
    RunCanceled,
    RunError,
    RunStage,
    StoreError,
    UserError,
)
from tether.history import close_calls, normalize_history
from tether.messages import Message, new_id
from tether.models import ModelResponse, ReasoningDelta, TextDelta, ToolCallDelta

from ._accept import DeltaText, accept_response, valid_text
from ._approvals import Deferred, PendingCall, TokenClaims, mint_token, turn_digest
from ._config import Prompt, RunConfig, RunOptions
from ._context import MessagesView, RunContext
from ._decisions import Resolution
from ._output import OUTPUT_TOOL
from ._prepare import (
    apply_processor,
    check_resumable,
    distinct_calls,
    donor_conversation_id,
    take_pending,
    user_message,
)
from ._recorder import NO_RECORDER, CompactedLog, RunRecorder, settle
from ._result import (
    MISSING,
    Event,
    MessageCompleted,
    ReasoningEvent,
    Result,
    TextEvent,
    ToolCallDeltaEvent,
)
from ._state import RunState
from ._tools import ArgumentsInvalid
from ._toolstep import ToolStep
from ._trace import NO_TRACE, Trace
from .compaction._run import NO_COMPACTION, RECALL_TOOL, NoCompaction, RunCompaction

if TYPE_CHECKING:
    from tether.telemetry import RunTrace

__all__ = ["STEP_LIMIT_TEXT", "Run", "attach_partial", "cancelled_partial"]

STEP_LIMIT_TEXT = "not run (step limit): the run reached its step limit before executing this call"
TEXT_NOT_ACCEPTED = (
    "A plain text answer is not accepted here: give the final answer by calling the "
    f"{OUTPUT_TOOL} tool with arguments matching its schema."
)
_BAD_STOPS = frozenset({"length", "content_filter", "error"})


def replace_config(cfg: RunConfig, tool: Any) -> RunConfig:
    """``cfg`` with one more tool (the run's ``recall``)."""
    return dataclasses.replace(
        cfg, tools={**cfg.tools, tool.name: tool}, definitions=(*cfg.definitions, tool.definition)
    )


def _discard(event: Event) -> None:
    """The event sink of a run nobody streams."""


def _same(a: Sequence[Message], b: Sequence[Message]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def attach_partial(error: BaseException, partial: Partial | None) -> None:
    """Put a cancelled run's evidence on the ``CancelledError`` that propagates."""
    error.partial = partial  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]


def cancelled_partial(error: BaseException) -> Partial | None:
    """The ``Partial`` of a run whose task was cancelled (``asyncio.CancelledError``), or of any
    ``RunError``; ``None`` for other exceptions."""
    partial = getattr(error, "partial", None)
    return partial if isinstance(partial, Partial) else None


class Run:
    """One run. Create, then ``await execute()`` once.

    ``owned``: the run has a task of its own (``run_stream``), so a cancellation of that task is
    an explicit stop and ends the run with ``RunCanceled``; otherwise the cancellation belongs to
    the caller's task and propagates.

    Its collaborators are never ``None``: without telemetry, compaction, a stream or a store the
    run holds stand-ins that do nothing (``NO_TRACE``, ``NO_COMPACTION``, an event sink that
    discards, ``NO_RECORDER``). Two flags say what a stand-in cannot: ``streaming`` (events are
    built only then, and the model is streamed) and ``stored`` (the history comes from the
    recorder and the run's messages go to it).
    """

    def __init__(
        self,
        cfg: RunConfig,
        options: RunOptions,
        *,
        emit: Callable[[Event], None] | None = None,
        recorder: RunRecorder | None = None,
        trace: RunTrace | None = None,
        owned: bool = False,
    ) -> None:
        self.cfg = cfg
        self.prompt = prompt = options.prompt
        self.supplied = history = options.history
        self.deps = options.deps
        self.deferred_in = deferred = options.deferred
        self.emit = emit if emit is not None else _discard
        self.streaming = emit is not None
        self.recorder: RunRecorder = recorder if recorder is not None else NO_RECORDER
        self.stored = recorder is not None
        self.trace: Trace = trace if trace is not None else NO_TRACE
        """The run's telemetry (``tether.telemetry``); ``NO_TRACE`` while telemetry is off."""
        self.traced = trace is not None
        self.owned = owned
        cid = options.conversation_id or (None if self.stored else donor_conversation_id(history))
        self.state = RunState(options.run_id or new_id(), cid or "")
        self.stage: RunStage = "history"
        self.stop_reason: str | None = None
        self._resolution: Resolution | None = None
        provider = cfg.model.profile.provider
        self._stamp = (provider, cfg.model.name.removeprefix(provider + ":"))
        self.instructions: str | None = None
        self.tools = ToolStep(self)
        self.compaction: RunCompaction | NoCompaction = NO_COMPACTION
        """The run's compaction (``Agent(compaction=...)``); ``NO_COMPACTION``: none."""
        self._view: Sequence[Message] | None = None
        self._opened: Sequence[Message] | None = None
        """The history as opened (the recorder's, or the supplied one), once known."""
        self._prompt_pending = prompt is not None and deferred is None
        """The prompt is not in the run yet: a stop before it is added still keeps it."""
        if cfg.compaction is not None:
            compaction = self.compaction = RunCompaction(cfg.compaction, cfg.model, cfg.settings)
            if cfg.compaction.recall and RECALL_TOOL not in cfg.tools:
                recall = compaction.recall(recorder, lambda: self.state.messages)
                self.cfg = replace_config(cfg, recall)

    # -- entry ------------------------------------------------------------------------------------
    async def execute(self) -> Result[Any]:
        try:
            output, deferred = await self._execute()
            await self.persist(final=True)
        except asyncio.CancelledError as exc:
            await self.compaction.abandon()
            partial, note = await self._stopped()
            if not self.owned:
                attach_partial(exc, partial)
                if note:
                    exc.add_note(note)
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            stop = RunCanceled("the run was stopped", stage=self.stage, partial=partial)
            if note:
                stop.add_note(note)
            raise stop from None
        except RunError as exc:
            await self.compaction.abandon()
            if exc.partial is None:
                exc.partial = self.state.partial(stopped=isinstance(exc, RunCanceled))
            if exc.stage != "store":
                await self._record_failure(exc)
            raise
        except BaseException:
            await self.compaction.abandon()
            raise
        await self.compaction.aclose()
        view = self.compaction.view(self.state.messages)
        return self.state.result(output, deferred, self.stop_reason, view)

    async def _stopped(self) -> tuple[Partial | None, str | None]:
        """The evidence of a cancelled run, recorded (shielded, bounded) when there is a recorder;
        and a note when it could not be stored."""
        state = self.state
        self._keep_prompt()
        last = state.new[-1] if state.new else None
        if last is not None and last.role == "assistant" and last.tool_calls:
            self.tools.close_unstarted(last)  # stopped while its turn was stored (ADR 0015)
        unfinished = state.unfinished(*self._stamp)
        partial = state.partial(stopped=True, unfinished=unfinished)
        if not self.stored or not (state.unrecorded() or unfinished is not None):
            return partial, None
        moved, note = state.conversation_id, None
        try:
            await settle(self._write_failure(partial), self.recorder.write_timeout)
        except asyncio.CancelledError:
            pass  # the run is ending because of a cancellation already
        except StoreError as exc:
            note = f"the partial evidence could not be stored: {exc}"
        if state.conversation_id != moved:
            partial = state.partial(stopped=True, unfinished=state.unfinished(*self._stamp))
        return partial, note

    def _keep_prompt(self) -> None:
        """A run stopped while its conversation was opened or its history processed has not added
        its prompt yet: add it after the history as opened, so a stop keeps what the user said."""
        if not self._prompt_pending or self._opened is None or self.prompt is None:
            return
        try:
            user = self._user(self.prompt)
        except UserError:  # a prompt the run would have refused: nothing of it to keep
            return
        if not self.state.messages:
            self.state.start(list(self._opened))
        self._prompt_pending = False
        self.add(user)

    def _add_prompt(self, prompt: Prompt) -> None:
        self._prompt_pending = False
        self.add(self._user(prompt))

    async def _record_failure(self, error: RunError) -> None:
        """Store a failed run's evidence (its prompt is stored already, before the first request:
        ADR 0015)."""
        if not self.stored or error.partial is None or not self.state.unrecorded():
            return
        try:
            await settle(self._write_failure(error.partial), self.recorder.write_timeout)
        except StoreError as exc:
            error.add_note(f"the partial evidence could not be stored: {exc}")
        except asyncio.CancelledError:
            if not self.owned:
                raise
        if error.partial.conversation_id != self.state.conversation_id:
            error.partial = self.state.partial(stopped=isinstance(error, RunCanceled))

    async def _write_failure(self, partial: Partial | None) -> None:
        batch = self.state.unrecorded()
        cid = await self.recorder.failed(batch, partial)
        self.state.recorded += len(batch)
        if cid != self.state.conversation_id:
            self.state.move(cid)
        await self.compaction.flush(self.recorder)

    async def persist(self, *, final: bool = False) -> None:
        """Hand the recorder the new messages it does not hold yet (a checkpoint, or the end)."""
        if not self.stored or not self.state.unrecorded():
            return
        try:
            await settle(self._write(), self.recorder.write_timeout)
        except StoreError as exc:
            what = "the run finished but its messages could not be stored" if final else "the store failed"
            raise RunError(f"{what}: {exc}", stage="store") from exc

    async def _write(self) -> None:
        batch = self.state.unrecorded()
        cid = await self.recorder.record(batch)
        self.state.recorded += len(batch)
        if cid != self.state.conversation_id:
            self.state.move(cid)
        await self.compaction.flush(self.recorder)  # the records' messages are stored now

    # -- state ------------------------------------------------------------------------------------
    def add(self, message: Message) -> None:
        self.state.add(message)
        if self.streaming:  # the event is built only for a stream
            self.emit(MessageCompleted(self.state.run_id, self.state.conversation_id, message))

    def context(self, call_id: str | None = None, tool_name: str | None = None) -> RunContext[Any]:
        s = self.state
        return RunContext(
            self.deps,
            s.run_id,
            s.conversation_id,
            MessagesView(s.sent),
            s.usage,
            s.requests,
            call_id,
            tool_name,
        )

    def _user(self, prompt: Prompt) -> Message:
        return user_message(prompt, self.state.run_id, self.state.conversation_id)

    # -- the loop ---------------------------------------------------------------------------------
    async def _execute(self) -> tuple[Any, Deferred | None]:
        pending_turn = await self._prepare()
        if self.prompt is not None and pending_turn is None:
            self._add_prompt(self.prompt)
        await self._resolve_instructions()
        if pending_turn is not None:
            output = await self._resume_deferred(pending_turn)
            if output is not MISSING:
                return output, None
            if self.prompt is not None:
                self.add(self._user(self.prompt))
        self.compaction.measure(self.instructions, self.cfg.definitions)
        while True:
            await self.persist()  # durable step (ADR 0015): the prompt, a batch's results, before a request
            self._view = await self._compacted()
            response = await self.trace.chat(self, self._request)
            s = self.state
            message = replace(response.message, run_id=s.run_id, conversation_id=s.conversation_id)
            message = distinct_calls(message, s.run_id, s.requests)
            self.add(message)
            await self.persist()  # durable step (ADR 0015): a completed turn, before its tools or the end
            calls = message.tool_calls
            if not calls:
                output = self._final_text(message, response.stop_reason)
                if output is not MISSING:
                    return output, None
                continue
            if s.requests >= self.cfg.max_steps and not self._has_valid_output(calls):
                self._step_limit(message)
            deferred = self._deferral(message)
            if deferred is not None:
                self.trace.tools.pending(self, message, deferred)
                return MISSING, deferred
            output = await self.tools.batch(message, {})
            if output is not MISSING:
                return output, None

    # -- preparation ----------------------------------------------------------------------------
    async def _prepare(self) -> Message | None:
        cfg, state = self.cfg, self.state
        history = self.supplied
        opened: CompactedLog | None = None
        if self.stored:
            # settled: an open may write (a tail closure), and a stop during it must know the
            # conversation's version to keep the prompt after it
            opened = await settle(self._open(self.recorder), self.recorder.write_timeout)
            history = opened.history
        else:
            if not state.conversation_id:
                state.conversation_id = new_id()
            self._opened = history
        kept = True  # the history processor kept the history as it was
        if cfg.history_processor is not None:
            given, before = len(history), history
            history = await apply_processor(
                cfg.history_processor, cfg.processor_takes_ctx, history, self.context()
            )
            kept = _same(history, before)
            self.trace.history_processed(cfg.history_processor, given, len(history))
        self.stage = "validate"
        if self.deferred_in is not None:
            self.stage = "approval"
        history, pending_turn, resolution = take_pending(
            history,
            self.deferred_in,
            self.prompt is None,
            self.stored,
            cfg,
            state.conversation_id,
        )
        self._resolution = resolution or self._resolution
        messages, state.repair = normalize_history(history)
        self.trace.history_normalized(state.repair, len(messages))
        if pending_turn is None and self.prompt is None:
            check_resumable(messages)  # repair may have removed what made the raw history resumable
        if pending_turn is not None:
            messages.append(pending_turn)
        state.start(messages)
        # positions match stored seqs only if nothing was inserted, cut or repaired
        exact = kept and (opened is None or opened.exact) and not state.repair.changed
        self.compaction.start(
            state.conversation_id,
            record=opened.record if opened is not None else None,
            offset=opened.offset if opened is not None else 0,
            exact=exact,
            stored=self.stored,
        )
        return pending_turn

    async def _open(self, recorder: RunRecorder) -> CompactedLog:
        """Open the recorder's conversation and keep what it gave on the run (even when the run is
        stopped meanwhile: ``settle`` finishes this first)."""
        repair = self.prompt is not None and self.deferred_in is None
        opened = await self.compaction.open(recorder, repair=repair)
        self.state.conversation_id, self._opened = opened.conversation_id, opened.history
        return opened

    async def _resolve_instructions(self) -> None:
        parts: list[str] = []
        if self.cfg.instructions:
            parts.append(self.cfg.instructions)
        fn = self.cfg.instructions_fn
        if fn is not None:
            try:
                dynamic: Any = fn(self.context())
                if inspect.isawaitable(dynamic):
                    dynamic = await dynamic
            except Exception as exc:
                raise RunError(f"the instructions function failed: {exc}", stage="validate") from exc
            if dynamic:
                parts.append(str(dynamic))
        self.instructions = "\n\n".join(parts) if parts else None

    # -- model ------------------------------------------------------------------------------------
    def _compacted(self) -> Awaitable[Sequence[Message] | None]:
        """The view to send, compacted when it passes its threshold (never fails the turn:
        summarizer failures fall back inside the compactor and are reported); ``None`` without
        compaction: the request sends the run's own messages."""
        s = self.state
        return self.compaction.prepare(
            s.messages,
            step=s.requests + 1,
            ids=(s.run_id, s.conversation_id),
            emit=self.emit,
            trace=self.trace,
            reports=s.compactions,
        )

    async def _request(self) -> ModelResponse:
        self.stage = "model"
        s, cfg = self.state, self.cfg
        view: Sequence[Message] = MessagesView(s.sent) if self._view is None else self._view
        self._view = None
        s.streamed.clear()
        try:
            if self.streaming:
                response = await self._stream_request(view)
            else:
                response = await cfg.model.generate(
                    view, instructions=self.instructions, tools=cfg.definitions, settings=cfg.settings
                )
        except RunError:
            raise
        except Exception as exc:
            raise ModelError(f"the model failed: {type(exc).__name__}: {exc}", stage="model") from exc
        if type(response) is not ModelResponse or response.message.role != "assistant":
            raise ModelError(
                f"the model returned {type(response).__name__} instead of a ModelResponse with an "
                "assistant message",
                stage="model",
            )
        response = accept_response(response, s.run_id, s.requests + 1)
        s.streamed.clear()
        s.requests += 1
        s.usage = s.usage + response.usage
        return response

    async def _stream_request(self, view: Sequence[Message]) -> ModelResponse:
        emit = self.emit
        s, cfg = self.state, self.cfg
        final: ModelResponse | None = None
        step = s.requests + 1
        stream = cfg.model.stream(
            view, instructions=self.instructions, tools=cfg.definitions, settings=cfg.settings
        )
        valid = DeltaText()  # no delta reaches an event with half of a surrogate pair
        async for event in stream:
            kind = type(event)
            if kind is TextDelta:
                delta = cast(TextDelta, event)
                text = valid.text(delta.index, delta.text)
                s.streamed.append(text)
                emit(TextEvent(s.run_id, s.conversation_id, step, delta.index, text))
            elif kind is ReasoningDelta:
                rdelta = cast(ReasoningDelta, event)
                text = valid.reasoning(rdelta.index, rdelta.text)
                emit(ReasoningEvent(s.run_id, s.conversation_id, step, rdelta.index, text))
            elif kind is ToolCallDelta:
                c = cast(ToolCallDelta, event)
                name = c.name if c.name is None else valid_text(c.name)
                call_id = c.id if c.id is None else valid_text(c.id)
                arguments = valid.arguments(c.index, c.arguments)
                emit(ToolCallDeltaEvent(s.run_id, s.conversation_id, step, c.index, call_id, name, arguments))
            elif kind is ModelResponse:
                final = cast(ModelResponse, event)
        for held in valid.flush(s.run_id, s.conversation_id, step):  # halves whose pair never came
            if type(held) is TextEvent:
                s.streamed.append(held.text)
            emit(held)
        if final is None:
            raise ModelError("the model stream ended without a final response", stage="model")
        return final

    def _final_text(self, message: Message, stop_reason: str) -> Any:
        """The output for an answer without tool calls, or ``MISSING`` after a correction."""
        self.stop_reason = stop_reason
        accepted = stop_reason == "length" and self.cfg.accept_truncated and self.cfg.output.is_text
        # An empty answer with a stop reason other than "stop" (a provider value passed through:
        # MALFORMED_FUNCTION_CALL, pause_turn, …) is a failed step, never an empty output.
        empty_odd = stop_reason != "stop" and not message.text
        if (stop_reason in _BAD_STOPS or empty_odd) and not accepted:
            raise ModelError(f"the model stopped with {stop_reason!r} before giving an answer", stage="model")
        if self.cfg.output.is_text:
            return message.text
        self.stage = "output"
        self.tools.count_failure(OUTPUT_TOOL, TEXT_NOT_ACCEPTED, output=True)
        if self.state.requests >= self.cfg.max_steps:
            raise MaxStepsError(
                f"the step limit ({self.cfg.max_steps}) was reached without a valid output", stage="output"
            )
        self.add(self._user(TEXT_NOT_ACCEPTED))
        return MISSING

    def _has_valid_output(self, calls: Sequence[Any]) -> bool:
        """True when the turn gives a valid structured output: no further request is needed."""
        output = self.cfg.output
        if output.is_text:
            return False
        for call in calls:
            if call.name == OUTPUT_TOOL:
                try:
                    output.parse(call)
                except ArgumentsInvalid:
                    continue
                return True
        return False

    def _step_limit(self, message: Message) -> None:
        s = self.state
        closing = close_calls(
            message, text=STEP_LIMIT_TEXT, failed=True, run_id=s.run_id, conversation_id=s.conversation_id
        )
        closed = 0
        if closing is not None:
            closed = len(closing.tool_results)
            self.tools.add_tool_message(message, closing)
        raise MaxStepsError(
            f"the step limit ({self.cfg.max_steps} model requests) was reached; the last turn's "
            f"{closed} tool call(s) were not run",
            stage="tools",
        )

    # -- approvals --------------------------------------------------------------------------------
    def _deferral(self, turn: Message) -> Deferred | None:
        tools, secret, cid = self.cfg.tools, self.cfg.secret, self.state.conversation_id
        gated = [
            (call, t)
            for call in turn.tool_calls
            if call.id and (t := tools.get(call.name)) is not None and (t.requires_approval or t.external)
        ]
        if not gated:
            return None
        pause_id = new_id()
        expires_at = math.ceil(time.time() + self.cfg.approval_ttl) if secret is not None else None
        digest = turn_digest(turn) if secret is not None else ""
        pending: list[PendingCall] = []
        for call, tool in gated:
            token = None
            if secret is not None and expires_at is not None:
                token = mint_token(secret, TokenClaims(pause_id, cid, call.id or "", digest, expires_at))
            pending.append(PendingCall(call, "external" if tool.external else "approval", token))
        return Deferred(tuple(pending), pause_id, expires_at)

    async def _resume_deferred(self, turn: Message) -> Any:
        self.stage = "approval"
        resolution = self._resolution
        assert resolution is not None
        if resolution.claim is not None:
            digest, expires_at = resolution.claim
            try:
                fresh = await self.cfg.replay_guard.claim_token(digest, expires_at)
            except StoreError as exc:
                raise RunError(f"the replay guard failed: {exc}", stage="store") from exc
            if not fresh:
                raise ApprovalError(
                    "these decisions were used before: a paused turn is resumed once (approval "
                    "tokens are single-use)",
                    stage="approval",
                )
        return await self.tools.batch(turn, resolution.decided)
