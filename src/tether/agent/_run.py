"""The run loop: prepare the history once, then request, execute tools, repeat.

Per run, in order: the history processor (once, on what the caller supplied), validation, repair
(``normalize_history``, once), then the tool loop. After the first request each step touches only
the messages it adds: the model receives an O(1) view of the growing list, never a copy.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from msgspec.structs import replace

from tether.errors import (
    ApprovalError,
    MaxStepsError,
    ModelError,
    OutputValidationError,
    Partial,
    RunCanceled,
    RunError,
    RunStage,
    StoreError,
    ToolError,
)
from tether.history import close_calls, normalize_history
from tether.messages import Message, Part, Text, ToolCall, ToolResult, Usage, new_id
from tether.models import ModelResponse, ReasoningDelta, TextDelta

from ._approvals import Deferred, DeferredResults, PendingCall, approval_token
from ._batch import UNKNOWN_OUTCOME_TEXT, BatchCanceled, Job, ToolRaised, canceled_result, run_jobs
from ._config import RunConfig, RunHooks
from ._context import MessagesView, RunContext
from ._decisions import resolve_decisions
from ._output import OUTPUT_TOOL
from ._prepare import Prompt, apply_processor, check_resumable, donor_conversation_id, user_message
from ._result import (
    MISSING,
    Event,
    MessageCompleted,
    ReasoningEvent,
    Result,
    TextEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from ._tools import ArgumentsInvalid

__all__ = ["STEP_LIMIT_TEXT", "Prompt", "Run", "RunConfig", "RunHooks"]

STEP_LIMIT_TEXT = "not run (step limit): the run reached its step limit before executing this call"
TEXT_NOT_ACCEPTED = (
    "A plain text answer is not accepted here: give the final answer by calling the "
    f"{OUTPUT_TOOL} tool with arguments matching its schema."
)
_BAD_STOPS = frozenset({"length", "content_filter", "error"})


class Run:
    """One run. Create, then ``await execute()`` once."""

    def __init__(
        self,
        cfg: RunConfig,
        *,
        prompt: Prompt | None,
        history: Sequence[Message],
        deps: Any,
        run_id: str | None,
        conversation_id: str | None,
        deferred: DeferredResults | None,
        emit: Callable[[Event], None] | None = None,
        hooks: RunHooks | None = None,
    ) -> None:
        self.cfg = cfg
        self.prompt = prompt
        self.supplied = history
        self.deps = deps
        self.run_id = run_id or new_id()
        self.conversation_id = conversation_id or donor_conversation_id(history) or new_id()
        self.deferred_in = deferred
        self.emit = emit
        self.hooks = hooks
        self.messages: list[Message] = []
        self.sent: list[Message] = self.messages
        self.new: list[Message] = []
        self.usage = Usage()
        self.requests = 0
        self.tool_executions = 0
        self.stage: RunStage = "history"
        self.instructions: str | None = None
        self.repair: Any = None
        self._failures: dict[str, int] = {}
        self._decided: dict[str, ToolResult | None] = {}

    # -- evidence -------------------------------------------------------------------------------
    def partial(self) -> Partial | None:
        """Resumable evidence, or ``None`` when no model turn or tool execution completed."""
        if self.requests == 0 and self.tool_executions == 0:
            return None
        return Partial(
            tuple(self.messages),
            tuple(self.new),
            self.usage,
            self.requests,
            self.tool_executions,
            self.run_id,
            self.conversation_id,
        )

    def add(self, message: Message) -> None:
        self.messages.append(message)
        if self.sent is not self.messages:
            self.sent.append(message)
        self.new.append(message)
        if self.emit is not None:
            self.emit(MessageCompleted(self.run_id, self.conversation_id, message))

    def context(self, call: ToolCall | None = None) -> RunContext[Any]:
        return RunContext(
            self.deps,
            self.run_id,
            self.conversation_id,
            MessagesView(self.sent),
            self.usage,
            self.requests,
            call.id if call is not None else None,
            call.name if call is not None else None,
        )

    def _result(self, output: Any, deferred: Deferred | None = None) -> Result[Any]:
        return Result(
            tuple(self.messages),
            tuple(self.new),
            self.usage,
            self.requests,
            self.tool_executions,
            self.run_id,
            self.conversation_id,
            deferred,
            self.repair,
            output,
        )

    # -- entry ------------------------------------------------------------------------------------
    async def execute(self) -> Result[Any]:
        try:
            return await self._execute()
        except asyncio.CancelledError:
            raise RunCanceled("the run was cancelled", stage=self.stage, partial=self.partial()) from None

    async def _execute(self) -> Result[Any]:
        pending_turn = await self._prepare()
        if self.prompt is not None and pending_turn is None:
            self.add(user_message(self.prompt, self.run_id, self.conversation_id))
        await self._resolve_instructions()
        if pending_turn is not None:
            output = await self._resume_deferred(pending_turn)
            if output is not MISSING:
                return self._result(output)
            if self.prompt is not None:
                self.add(user_message(self.prompt, self.run_id, self.conversation_id))
        while True:
            response = await self._request()
            message = replace(response.message, run_id=self.run_id, conversation_id=self.conversation_id)
            message = self._distinct_calls(message)
            self.add(message)
            calls = message.tool_calls
            if not calls:
                output = self._final_text(message, response.stop_reason)
                if output is not MISSING:
                    return self._result(output)
                continue
            if self.requests >= self.cfg.max_steps and not self._has_valid_output(calls):
                self._step_limit(message)
            deferred = self._deferral(calls)
            if deferred is not None:
                return self._result(MISSING, deferred)
            output = await self._batch(message, {})
            if output is not MISSING:
                return self._result(output)

    # -- preparation ----------------------------------------------------------------------------
    async def _prepare(self) -> Message | None:
        cfg = self.cfg
        history = self.supplied
        if cfg.history_processor is not None:
            history = await apply_processor(
                cfg.history_processor, cfg.processor_takes_ctx, history, self.context()
            )
        self.stage = "validate"
        pending_turn: Message | None = None
        if self.deferred_in is not None:
            last = history[-1] if history else None
            if type(last) is not Message or last.role != "assistant" or not last.tool_calls:
                raise ApprovalError(
                    "deferred results need the history to end with the assistant turn that "
                    "requested the pending calls",
                    stage="approval",
                )
            pending_turn = last
            history = history[:-1]
            self.stage = "approval"
            self._decided = resolve_decisions(
                last, self.deferred_in, cfg.tools, cfg.secret, self.conversation_id
            )
        elif self.prompt is None:
            check_resumable(history)
        messages, self.repair = normalize_history(history)
        if pending_turn is None and self.prompt is None:
            check_resumable(messages)  # repair may have removed what made the raw history resumable
        if pending_turn is not None:
            messages.append(pending_turn)
        self.messages = messages
        if any(m.role == "system" for m in messages):
            self.sent = [m for m in messages if m.role != "system"]
        else:
            self.sent = messages
        return pending_turn

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
    async def _request(self) -> ModelResponse:
        self.stage = "model"
        view = MessagesView(self.sent)
        cfg = self.cfg
        try:
            if self.emit is None:
                response = await cfg.model.generate(
                    view, instructions=self.instructions, tools=cfg.definitions, settings=cfg.settings
                )
            else:
                response = await self._stream_request(view)
        except RunError as exc:
            if exc.partial is None:
                exc.partial = self.partial()
            raise
        except Exception as exc:
            raise ModelError(
                f"the model failed: {type(exc).__name__}: {exc}", stage="model", partial=self.partial()
            ) from exc
        if type(response) is not ModelResponse or response.message.role != "assistant":
            raise ModelError(
                f"the model returned {type(response).__name__} instead of a ModelResponse with an "
                "assistant message",
                stage="model",
                partial=self.partial(),
            )
        self.requests += 1
        self.usage = self.usage + response.usage
        return response

    async def _stream_request(self, view: MessagesView) -> ModelResponse:
        emit = self.emit
        assert emit is not None
        cfg = self.cfg
        final: ModelResponse | None = None
        step = self.requests + 1
        stream = cfg.model.stream(
            view, instructions=self.instructions, tools=cfg.definitions, settings=cfg.settings
        )
        async for event in stream:
            kind = type(event)
            if kind is TextDelta:
                delta = cast(TextDelta, event)
                emit(TextEvent(self.run_id, self.conversation_id, step, delta.index, delta.text))
            elif kind is ReasoningDelta:
                rdelta = cast(ReasoningDelta, event)
                emit(ReasoningEvent(self.run_id, self.conversation_id, step, rdelta.index, rdelta.text))
            elif kind is ModelResponse:
                final = cast(ModelResponse, event)
        if final is None:
            raise ModelError(
                "the model stream ended without a final response", stage="model", partial=self.partial()
            )
        return final

    def _final_text(self, message: Message, stop_reason: str) -> Any:
        """The output for an answer without tool calls, or ``MISSING`` after a correction."""
        if stop_reason in _BAD_STOPS:
            raise ModelError(
                f"the model stopped with {stop_reason!r} before giving an answer",
                stage="model",
                partial=self.partial(),
            )
        if self.cfg.output.is_text:
            return message.text
        self.stage = "output"
        self._count_failure(OUTPUT_TOOL, TEXT_NOT_ACCEPTED, output=True)
        if self.requests >= self.cfg.max_steps:
            raise MaxStepsError(
                f"the step limit ({self.cfg.max_steps}) was reached without a valid output",
                stage="output",
                partial=self.partial(),
            )
        self.add(
            Message(
                "user", (Text(TEXT_NOT_ACCEPTED),), run_id=self.run_id, conversation_id=self.conversation_id
            )
        )
        return MISSING

    def _has_valid_output(self, calls: Sequence[ToolCall]) -> bool:
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

    def _distinct_calls(self, message: Message) -> Message:
        """The model turn with one distinct id per call, so its results can always be paired.

        A call without an id, or repeating an earlier call's id with another name or other
        arguments, gets a deterministic fresh id (run id, step, part index) and runs as its own
        call; an exact repeat (same id, name and arguments) is the same call said twice and is
        dropped, so its tool runs once.
        """
        calls = message.tool_calls
        ids = {c.id for c in calls}
        if None not in ids and "" not in ids and len(ids) == len(calls):
            return message
        taken = {i for i in ids if i}
        seen: dict[str, ToolCall] = {}
        parts: list[Part] = []
        tag = "".join(ch for ch in self.run_id if ch.isalnum())[-8:]
        for index, part in enumerate(message.parts):
            if type(part) is not ToolCall:
                parts.append(part)
                continue
            cid = part.id
            if cid and cid in seen:
                first = seen[cid]
                if first.name == part.name and first.arguments == part.arguments:
                    continue
                cid = None
            if not cid:
                base = f"call_{tag}_{self.requests}_{index}"
                cid, n = base, 1
                while cid in taken:
                    n += 1
                    cid = f"{base}_{n}"
                taken.add(cid)
                part = replace(part, id=cid)
            seen[cid] = part
            parts.append(part)
        return replace(message, parts=tuple(parts))

    # -- tools ------------------------------------------------------------------------------------
    def _count_failure(self, name: str, why: str, *, output: bool = False) -> bool:
        """Count an invalid call/output; True when the retries are exhausted."""
        count = self._failures.get(name, 0) + 1
        self._failures[name] = count
        if count <= self.cfg.retries:
            return False
        if output:
            raise OutputValidationError(
                f"the output failed validation {count} times (retries={self.cfg.retries}): {why}",
                stage="output",
                partial=self.partial(),
            )
        return True

    def _step_limit(self, message: Message) -> None:
        closing = close_calls(
            message,
            text=STEP_LIMIT_TEXT,
            failed=True,
            run_id=self.run_id,
            conversation_id=self.conversation_id,
        )
        closed = 0
        if closing is not None:
            closed = len(closing.tool_results)
            self._add_tool_message(message, closing)
        raise MaxStepsError(
            f"the step limit ({self.cfg.max_steps} model requests) was reached; the last turn's "
            f"{closed} tool call(s) were not run",
            stage="tools",
            partial=self.partial(),
        )

    def _add_results(self, message: Message, results: Sequence[ToolResult]) -> None:
        if results:
            tools = Message("tool", tuple(results), run_id=self.run_id, conversation_id=self.conversation_id)
            self._add_tool_message(message, tools)

    def _add_tool_message(self, message: Message, results: Message) -> None:
        """Add the tool message ``results`` answering calls of ``message``, emitting one
        ``ToolCallFinished`` per result first when streaming."""
        if self.emit is not None:
            calls = {c.id: c for c in message.tool_calls}
            for r in results.tool_results:
                self.emit(ToolCallFinished(self.run_id, self.conversation_id, calls[r.call_id], r))
        self.add(results)

    def _deferral(self, calls: Sequence[ToolCall]) -> Deferred | None:
        tools = self.cfg.tools
        pending: list[PendingCall] = []
        secret = self.cfg.secret
        for call in calls:
            tool = tools.get(call.name)
            if tool is None or not (tool.requires_approval or tool.external) or not call.id:
                continue
            token = approval_token(secret, self.conversation_id, call) if secret is not None else None
            pending.append(PendingCall(call, "external" if tool.external else "approval", token))
        return Deferred(tuple(pending)) if pending else None

    async def _resume_deferred(self, turn: Message) -> Any:
        self.stage = "approval"
        return await self._batch(turn, self._decided)

    async def _batch(self, message: Message, decided: Mapping[str, ToolResult | None]) -> Any:
        """Execute the calls of ``message``; ``decided`` holds results fixed in advance (denied or
        external) and ``None`` for approved calls. Returns the output when one was accepted."""
        self.stage = "tools"
        cfg = self.cfg
        calls = [c for c in message.tool_calls if c.id]
        results: list[ToolResult | None] = [None] * len(calls)
        jobs: list[Job] = []
        output: Any = MISSING
        exhausted: list[str] = []
        for i, call in enumerate(calls):
            cid = cast(str, call.id)
            fixed = decided.get(cid)
            if fixed is not None:
                results[i] = fixed
                continue
            if call.name == OUTPUT_TOOL and not cfg.output.is_text:
                try:
                    value = cfg.output.parse(call)
                except ArgumentsInvalid as exc:
                    results[i] = ToolResult(cid, call.name, (Text(str(exc)),), failed=True)
                    self._count_failure(OUTPUT_TOOL, str(exc), output=True)
                    continue
                self._failures.pop(OUTPUT_TOOL, None)
                results[i] = ToolResult(cid, call.name, (Text("final result accepted"),))
                if output is MISSING:
                    output = value
                continue
            tool = cfg.tools.get(call.name)
            if tool is None:
                known = ", ".join(sorted(cfg.tools)) or "none"
                why = f"unknown tool {call.name!r}; the available tools are: {known}"
                results[i] = ToolResult(cid, call.name, (Text(why),), failed=True)
                if self._count_failure(call.name, why):
                    exhausted.append(why)
                continue
            try:
                kwargs = tool.validate(call)
            except ArgumentsInvalid as exc:
                results[i] = ToolResult(cid, call.name, (Text(str(exc)),), failed=True)
                if self._count_failure(call.name, str(exc)):
                    exhausted.append(str(exc))
                continue
            self._failures.pop(call.name, None)
            jobs.append(Job(i, call, tool, kwargs, self.context(call)))
        side_effects = await self._run(jobs, calls, message, results)
        self._add_results(message, [r for r in results if r is not None])
        if side_effects and self.hooks is not None:
            # a finished side effect's real result is durable before the next model call
            try:
                await self.hooks.checkpoint(self)
            except StoreError as exc:
                raise RunError(f"the store failed: {exc}", stage="store", partial=self.partial()) from exc
        if exhausted:
            raise ToolError(
                f"a tool call failed validation more than {cfg.retries} times in a row: {exhausted[0]}",
                stage="tools",
                partial=self.partial(),
            )
        return output

    async def _run(
        self, jobs: list[Job], calls: list[ToolCall], message: Message, results: list[ToolResult | None]
    ) -> bool:
        """Run the jobs; True when the batch held a side-effecting tool under a store."""
        if not jobs:
            return False
        hooks = self.hooks
        finished: Callable[[Job, bool], Awaitable[None]] | None = None
        side_effects = hooks is not None and any(not j.tool.idempotent for j in jobs)
        try:
            if hooks is not None and side_effects:
                await hooks.checkpoint(self)
                runnable: list[Job] = []
                for job in jobs:
                    if job.tool.idempotent or await hooks.tool_started(self, job.call):
                        runnable.append(job)
                    else:
                        results[job.index] = ToolResult(
                            job.call.id or "", job.call.name, (Text(UNKNOWN_OUTCOME_TEXT),), synthesized=True
                        )
                jobs = runnable

                async def finished_hook(job: Job, failed: bool) -> None:
                    if not job.tool.idempotent:
                        await hooks.tool_finished(self, job.call, failed)

                finished = finished_hook
        except StoreError as exc:
            raise RunError(f"the store failed: {exc}", stage="store", partial=self.partial()) from exc
        started = self._started_event if self.emit is not None else None
        try:
            await run_jobs(jobs, started, finished)
        except BatchCanceled as stop:
            self._count_done(jobs, results)
            by_index = {job.index: job for job in jobs}
            for i, r in enumerate(results):
                if r is None:
                    results[i] = canceled_result(calls[i], by_index.get(i), stop)
            self._add_results(message, [r for r in results if r is not None])
            raise RunCanceled(
                f"tool {stop.call.name!r} canceled the run: {stop.cause.reason}",
                stage="tools",
                partial=self.partial(),
            ) from stop.cause
        except ToolRaised as raised:
            self._count_done(jobs, results)
            self._close_side_effects(jobs, calls, message, results)
            raise ToolError(
                f"tool {raised.call.name!r} raised {type(raised.error).__name__}: {raised.error}",
                stage="tools",
                partial=self.partial(),
            ) from raised.error
        except StoreError as exc:
            self._count_done(jobs, results)
            raise RunError(f"the store failed: {exc}", stage="store", partial=self.partial()) from exc
        except asyncio.CancelledError:
            self._count_done(jobs, results)
            self._close_side_effects(jobs, calls, message, results)
            raise
        self._count_done(jobs, results)
        return side_effects

    def _close_side_effects(
        self, jobs: list[Job], calls: list[ToolCall], message: Message, results: list[ToolResult | None]
    ) -> None:
        """After a failure or cancellation inside a batch: when a side-effecting tool
        (``idempotent=False``) was invoked and has no result, close the whole batch now, so that
        resuming cannot call it "interrupted before execution". Otherwise the evidence ends at
        the requesting turn and repair closes the calls when it is resumed."""
        if not any(j.started and j.result is None and not j.tool.idempotent for j in jobs):
            return
        by_index = {job.index: job for job in jobs}
        for i, r in enumerate(results):
            if r is None:
                results[i] = canceled_result(calls[i], by_index.get(i), None)
        self._add_results(message, [r for r in results if r is not None])

    def _count_done(self, jobs: list[Job], results: list[ToolResult | None]) -> None:
        for job in jobs:
            if job.result is not None:
                self.tool_executions += 1
                results[job.index] = job.result

    async def _started_event(self, job: Job) -> None:
        assert self.emit is not None
        self.emit(ToolCallStarted(self.run_id, self.conversation_id, job.call))
