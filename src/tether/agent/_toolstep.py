"""One tool step of a run: validate the calls of a model turn, run them (with the ledger for
side-effecting tools), and add the one tool message answering them.

A batch that ends early is closed here, so the conversation stays valid: ``ToolCanceled`` and a
cancellation close every unanswered call (a call whose tool was invoked is "outcome unknown", one
that never started is "interrupted before execution"); a propagating tool's error closes the batch
only when a side-effecting tool was invoked (otherwise repair closes it on resume).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, cast

from tether.errors import OutputValidationError, RunCanceled, RunError, RunStage, StoreError, ToolError
from tether.messages import Message, Text, ToolCall, ToolResult

from ._accept import valid_result
from ._batch import UNKNOWN_OUTCOME_TEXT, BatchCanceled, Job, ToolRaised, canceled_result, run_jobs
from ._config import RunConfig
from ._context import RunContext
from ._output import OUTPUT_TOOL
from ._recorder import RunRecorder, settle
from ._result import MISSING, Event, ToolCallFinished, ToolCallStarted
from ._state import RunState
from ._tools import ArgumentsInvalid
from ._trace import Trace

__all__ = ["RunHost", "ToolStep"]


class RunHost(Protocol):
    """What a tool step uses of its run."""

    cfg: RunConfig
    state: RunState
    stage: RunStage
    recorder: RunRecorder
    emit: Callable[[Event], None]
    trace: Trace
    stored: bool
    """The run has a store (``recorder`` keeps its messages and its ledger)."""
    streaming: bool
    """Events are wanted (they are built only then)."""
    traced: bool
    """Telemetry is on (``trace`` is a ``RunTrace``)."""

    def add(self, message: Message) -> None: ...
    async def persist(self, *, final: bool = False) -> None: ...
    def context(self, call_id: str | None = None, tool_name: str | None = None) -> RunContext[Any]: ...


class ToolStep:
    """The tool steps of one run (its retries count across steps)."""

    def __init__(self, run: RunHost) -> None:
        self.run = run
        self._failures: dict[str, int] = {}

    def count_failure(self, name: str, why: str, *, output: bool = False) -> bool:
        """Count an invalid call/output; True when the retries are exhausted."""
        count = self._failures.get(name, 0) + 1
        self._failures[name] = count
        retries = self.run.cfg.retries
        if count <= retries:
            return False
        if output:
            raise OutputValidationError(
                f"the output failed validation {count} times (retries={retries}): {why}", stage="output"
            )
        return True

    def add_tool_message(self, message: Message, results: Message) -> None:
        """Add the tool message ``results`` answering calls of ``message``, emitting one
        ``ToolCallFinished`` per result first when streaming."""
        run = self.run
        if run.streaming:
            s = run.state
            calls = {c.id: c for c in message.tool_calls}
            for r in results.tool_results:
                run.emit(ToolCallFinished(s.run_id, s.conversation_id, calls[r.call_id], r))
        run.trace.tools.answered(run, message, results)
        run.add(results)

    def _add_results(self, message: Message, results: list[ToolResult | None]) -> None:
        done = tuple(valid_result(r) for r in results if r is not None)
        if done:
            s = self.run.state
            self.add_tool_message(
                message, Message("tool", done, run_id=s.run_id, conversation_id=s.conversation_id)
            )

    async def batch(self, message: Message, decided: Mapping[str, ToolResult | None]) -> Any:
        """Execute the calls of ``message``; ``decided`` holds results fixed in advance (denied or
        external) and ``None`` for approved calls. Returns the output when one was accepted."""
        run = self.run
        run.stage = "tools"
        run.trace.tools.batch(run, decided)
        calls = [c for c in message.tool_calls if c.id]
        results: list[ToolResult | None] = [None] * len(calls)
        jobs, output, exhausted = self._plan(calls, decided, results)
        try:
            side_effects = await self._execute(jobs, results)
        except asyncio.CancelledError:
            self._close(jobs, calls, message, results, None)
            raise
        except BatchCanceled as stop:
            self._close(jobs, calls, message, results, stop)
            raise RunCanceled(
                f"tool {stop.call.name!r} canceled the run: {stop.cause.reason}", stage="tools"
            ) from stop.cause
        except ToolRaised as raised:
            if any(j.started and j.result is None and not j.tool.idempotent for j in jobs):
                self._close(jobs, calls, message, results, None)
            raise ToolError(
                f"tool {raised.call.name!r} raised {type(raised.error).__name__}: {raised.error}",
                stage="tools",
            ) from raised.error
        self._add_results(message, results)
        if side_effects:
            await run.persist()  # a finished side effect's real result is durable before the next request
        if exhausted:
            raise ToolError(
                f"a tool call failed validation more than {run.cfg.retries} times in a row: {exhausted[0]}",
                stage="tools",
            )
        return output

    def _plan(
        self,
        calls: list[ToolCall],
        decided: Mapping[str, ToolResult | None],
        results: list[ToolResult | None],
    ) -> tuple[list[Job], Any, list[str]]:
        """Validate each call: fixed results, the structured output, unknown tools and invalid
        arguments are answered here; the rest become jobs."""
        run = self.run
        cfg = run.cfg
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
                    self.count_failure(OUTPUT_TOOL, str(exc), output=True)
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
                if self.count_failure(call.name, why):
                    exhausted.append(why)
                continue
            try:
                kwargs = tool.validate(call)
            except ArgumentsInvalid as exc:
                results[i] = ToolResult(cid, call.name, (Text(str(exc)),), failed=True)
                if self.count_failure(call.name, str(exc)):
                    exhausted.append(str(exc))
                continue
            self._failures.pop(call.name, None)
            jobs.append(Job(i, call, tool, kwargs, run.context(cid, call.name)))
        return jobs, output, exhausted

    async def _execute(self, jobs: list[Job], results: list[ToolResult | None]) -> bool:
        """Run the jobs; True when the batch held a side-effecting tool under a recorder. Every
        job that finished has its result in ``results``, whatever ends the batch."""
        if not jobs:
            return False
        run = self.run
        recorder = run.recorder
        side_effects = run.stored and any(not j.tool.idempotent for j in jobs)
        finished: Callable[[Job, bool], Awaitable[None]] | None = None
        try:
            if side_effects:
                await run.persist()  # the requesting turn is stored before any side effect
                timeout = recorder.write_timeout
                runnable: list[Job] = []
                for job in jobs:
                    if job.tool.idempotent or await settle(
                        recorder.tool_started(run.state.run_id, job.call), timeout
                    ):
                        runnable.append(job)
                    else:
                        run.trace.tools.ledger_unknown(job.call)
                        results[job.index] = ToolResult(
                            job.call.id or "", job.call.name, (Text(UNKNOWN_OUTCOME_TEXT),), synthesized=True
                        )

                async def finished_hook(job: Job, failed: bool) -> None:
                    if not job.tool.idempotent:
                        await settle(
                            recorder.tool_finished(run.state.run_id, job.call, failed=failed), timeout
                        )

                jobs, finished = runnable, finished_hook
            started = self._started_event if run.streaming or run.traced else None  # no await per job
            await run_jobs(jobs, started, finished)
        except StoreError as exc:
            raise RunError(f"the store failed: {exc}", stage="store") from exc
        finally:
            self._count_done(jobs, results)
            run.trace.tools.ran(run, jobs)
        return side_effects

    def close_unstarted(self, message: Message) -> None:
        """Answer every call of ``message``, a turn whose batch never started (the run stopped
        while the turn was being stored), with the neutral "interrupted before execution"."""
        calls = [c for c in message.tool_calls if c.id]
        self._close([], calls, message, [None] * len(calls), None)

    def _close(
        self,
        jobs: list[Job],
        calls: list[ToolCall],
        message: Message,
        results: list[ToolResult | None],
        stop: BatchCanceled | None,
    ) -> None:
        """Answer every call of the batch still without a result (see ``canceled_result``)."""
        by_index = {job.index: job for job in jobs}
        for i, r in enumerate(results):
            if r is None:
                results[i] = canceled_result(calls[i], by_index.get(i), stop)
        self._add_results(message, results)

    def _count_done(self, jobs: list[Job], results: list[ToolResult | None]) -> None:
        for job in jobs:
            if job.result is not None and results[job.index] is None:
                self.run.state.tool_executions += 1
                results[job.index] = job.result

    async def _started_event(self, job: Job) -> None:
        run = self.run
        run.trace.tools.started(run, job.call, job.tool)
        if run.streaming:
            run.emit(ToolCallStarted(run.state.run_id, run.state.conversation_id, job.call))
