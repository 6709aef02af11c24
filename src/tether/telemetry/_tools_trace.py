"""``execute_tool {name}`` spans: one per tool call of a run, whatever answered it.

A call whose tool runs gets its span when the tool starts (made current in the tool's task, so
the tool's own spans nest under it) and ends when its batch does. Every other call (denied,
answered by an external result, invalid, closed without running, left pending by a pause) gets
a span when its answer is added, starting when its batch started. ``tether.tool.status`` says
which; ``tether.tool.approval`` and ``tether.tool.ledger`` carry the approval and ledger
outcomes.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from contextvars import Token

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tether.errors import ToolCanceled
from tether.messages import Message, ToolCall, ToolResult

from . import _content
from . import _names as n
from ._otel import AttributeValue, Instruments, record_error
from ._views import DeferredView, JobView, ToolRunView, ToolView

__all__ = ["OUTPUT_TOOL", "ToolTrace"]

OUTPUT_TOOL = "final_result"
"""The structured-output tool's name (a known, low-cardinality tool name for the metrics)."""


class ToolTrace:
    """The tool spans of one run."""

    __slots__ = (
        "_approval",
        "_batch_start",
        "_batch_task",
        "_done",
        "_external",
        "_inline",
        "_ledger",
        "_spans",
        "inst",
    )

    def __init__(self, inst: Instruments) -> None:
        self.inst = inst
        self._spans: dict[str, Span] = {}
        self._done: set[str] = set()
        self._approval: dict[str, str] = {}
        self._external: set[str] = set()
        self._ledger: dict[str, str] = {}
        self._inline: list[Token[Context]] = []
        self._batch_start = 0
        self._batch_task: asyncio.Task[object] | None = None

    def _attributes(
        self, run: ToolRunView, call: ToolCall, tool: ToolView | None
    ) -> dict[str, AttributeValue]:
        cid = call.id or ""
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OP_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: call.name,
            n.GEN_AI_TOOL_CALL_ID: cid,
            n.GEN_AI_TOOL_TYPE: "function",
            n.GEN_AI_CONVERSATION_ID: run.state.conversation_id,
            n.TETHER_RUN_ID: run.state.run_id,
        }
        if tool is not None:
            if tool.description:
                attributes[n.GEN_AI_TOOL_DESCRIPTION] = _content.cut(tool.description, 512)
            attributes[n.TETHER_TOOL_IDEMPOTENT] = tool.idempotent
        approval = self._approval.get(cid)
        if approval is not None:
            attributes[n.TETHER_TOOL_APPROVAL] = approval
        if self.inst.capture:
            attributes[n.GEN_AI_TOOL_CALL_ARGUMENTS] = _content.tool_arguments(call, self.inst.max_chars)
        return attributes

    def _finish(
        self,
        run: ToolRunView,
        span: Span,
        call: ToolCall,
        status: str,
        result: ToolResult | None,
        error: BaseException | None = None,
    ) -> None:
        attributes: dict[str, AttributeValue] = {n.TETHER_TOOL_STATUS: status}
        ledger = self._ledger.get(call.id or "")
        if ledger is not None:
            attributes[n.TETHER_TOOL_LEDGER] = ledger
        failed = status in ("failed", "invalid") or (result is not None and result.failed)
        attributes[n.TETHER_TOOL_FAILED] = failed
        if result is not None:
            attributes[n.TETHER_TOOL_SYNTHESIZED] = result.synthesized
            if self.inst.capture:
                attributes[n.GEN_AI_TOOL_CALL_RESULT] = _content.tool_result(result, self.inst.max_chars)
        if failed:
            error_type = type(error).__qualname__ if error is not None else status
            attributes[n.ERROR_TYPE] = error_type
            span.set_status(Status(StatusCode.ERROR, status))
        span.set_attributes(attributes)
        if error is not None:
            record_error(span, error, self.inst.capture)
        span.end()
        metrics = self.inst.metrics
        if metrics is not None:
            known = call.name in run.cfg.tools or call.name == OUTPUT_TOOL
            metrics.tool_calls.add(
                1, {n.GEN_AI_TOOL_NAME: call.name if known else n.OTHER, n.TETHER_TOOL_STATUS: status}
            )

    # -- hooks ------------------------------------------------------------------------------------
    def batch(self, run: ToolRunView, decided: Mapping[str, ToolResult | None]) -> None:
        """A tool step begins; ``decided`` holds the approval decisions of a resumed pause."""
        self._batch_start = time.time_ns()
        self._batch_task = asyncio.current_task()
        tools = run.cfg.tools
        for cid, fixed in decided.items():
            result = fixed
            tool = tools.get(result.name) if result is not None else None
            if tool is not None and tool.external:
                self._external.add(cid)
            else:
                self._approval[cid] = "approved" if fixed is None else "denied"

    def started(self, run: ToolRunView, call: ToolCall, tool: ToolView) -> None:
        """The tool of ``call`` is about to run (in the task that runs it)."""
        cid = call.id or ""
        if not tool.idempotent and run.stored:
            self._ledger[cid] = "started"
        span = self.inst.start(
            f"{n.OP_EXECUTE_TOOL} {call.name}", SpanKind.INTERNAL, self._attributes(run, call, tool)
        )
        self._spans[cid] = span
        token = otel_context.attach(trace.set_span_in_context(span))
        if asyncio.current_task() is self._batch_task:
            self._inline.append(token)  # runs in the run's own task: detached when the batch ends
        # in a task of its own, the context (and the attachment) ends with the task

    def ledger_unknown(self, call: ToolCall) -> None:
        """The ledger says this run started the call before and its result was never stored."""
        self._ledger[call.id or ""] = "outcome_unknown"

    def ran(self, run: ToolRunView, jobs: Sequence[JobView]) -> None:
        """The batch's tools are done (or the batch ended early): end their spans."""
        while self._inline:
            otel_context.detach(self._inline.pop())
        error = sys.exc_info()[1]  # the batch is ending with this (a propagating tool, a stop)
        for job in jobs:
            cid = job.call.id or ""
            span = self._spans.pop(cid, None)
            if span is None:
                continue
            self._done.add(cid)
            result = job.result
            if result is not None:
                self._finish(run, span, job.call, "failed" if result.failed else "ok", result)
                continue
            if error is not None and getattr(error, "call", None) is job.call:
                cause = getattr(error, "cause", None)
                if isinstance(cause, ToolCanceled):  # this call stopped the run on purpose
                    self._finish(run, span, job.call, "stopped_run", None, cause)
                else:  # a tool declared to propagate raised
                    raised = getattr(error, "error", None)
                    self._finish(
                        run,
                        span,
                        job.call,
                        "failed",
                        None,
                        raised if isinstance(raised, BaseException) else error,
                    )
            else:  # cancelled while running: it may have had effects
                self._finish(run, span, job.call, "outcome_unknown", None)

    def answered(self, run: ToolRunView, turn: Message, results: Message) -> None:
        """A tool message answering ``turn`` was added: a span for every call answered without
        running its tool."""
        tools = run.cfg.tools
        calls = {c.id: c for c in turn.tool_calls}
        start = self._batch_start or time.time_ns()
        for result in results.tool_results:
            cid = result.call_id
            if cid in self._done:
                self._done.discard(cid)
                continue
            call = calls.get(cid) or ToolCall(cid, result.name)
            tool = tools.get(result.name)
            span = self.inst.start(
                f"{n.OP_EXECUTE_TOOL} {result.name}",
                SpanKind.INTERNAL,
                self._attributes(run, call, tool),
                start_time=start,
            )
            self._finish(run, span, call, self._status(cid, result), result)

    def _status(self, cid: str, result: ToolResult) -> str:
        if cid in self._external:
            return "external"
        if self._approval.get(cid) == "denied":
            return "denied"
        if self._ledger.get(cid) == "outcome_unknown":
            return "outcome_unknown"
        if result.synthesized:
            return "not_run" if result.failed else "interrupted"
        return "invalid" if result.failed else "ok"

    def pending(self, run: ToolRunView, turn: Message, deferred: DeferredView) -> None:
        """The run paused at ``turn``: none of its calls ran; those waiting for an approval or an
        external result say so."""
        waiting = {p.call.id: p.kind for p in deferred.calls}
        tools = run.cfg.tools
        for call in turn.tool_calls:
            kind = waiting.get(call.id)
            if kind == "approval":
                self._approval[call.id or ""] = "pending"
            span = self.inst.start(
                f"{n.OP_EXECUTE_TOOL} {call.name}",
                SpanKind.INTERNAL,
                self._attributes(run, call, tools.get(call.name)),
            )
            self._finish(run, span, call, "pending", None)
