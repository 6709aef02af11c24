"""The trace of one run: the ``invoke_agent`` span, a ``chat`` span per model request, history
boundary passes as events, store calls as client spans (``TracedStore``), and the metrics.

A run holds a ``RunTrace`` only while telemetry is on (otherwise a stand-in whose hooks do
nothing, so the agent layer calls its hooks unconditionally). The run span is made current for
the run's duration, so the spans of a driver's HTTP client, a tool's own calls or a store's
driver nest under tether's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from tether.errors import Partial, RunCanceled, RunError
from tether.history import HistoryRepair
from tether.messages import Usage
from tether.models import Model, ModelResponse

from . import _content
from . import _names as n
from ._active import Attributes, active_link, active_run
from ._otel import AttributeValue, Instruments, describe, mark_error, record_error
from ._store import TracedStore
from ._tools_trace import ToolTrace
from ._views import ResultView, RunView

if TYPE_CHECKING:
    from tether.stores import Store

__all__ = ["RunTrace", "provider_name"]

R = TypeVar("R")

_PROVIDERS = {"google": "gcp.gen_ai", "gemini": "gcp.gen_ai"}
"""tether provider names that differ from the conventions' ``gen_ai.provider.name`` values."""


def provider_name(provider: str) -> str:
    return _PROVIDERS.get(provider, provider)


def _usage(attributes: dict[str, AttributeValue], usage: Usage) -> None:
    attributes[n.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
    attributes[n.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.output_tokens
    if usage.cache_read_tokens:
        attributes[n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes[n.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes[n.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens


def _model_names(model: Model) -> tuple[str, str]:
    provider = model.profile.provider
    return provider_name(provider), model.name.removeprefix(provider + ":")


class RunTrace:
    """Telemetry of one run (see the module docstring)."""

    __slots__ = ("_stores", "agent_name", "inst", "span", "tools")

    def __init__(self, inst: Instruments, agent_name: str) -> None:
        self.inst = inst
        self.agent_name = agent_name
        self.span: Span | None = None
        self.tools = ToolTrace(inst)
        self._stores: dict[int, TracedStore] = {}

    # -- the run ----------------------------------------------------------------------------------
    async def around(self, run: RunView, body: Callable[[], Awaitable[R]]) -> R:
        """Run ``body`` (the whole run) inside the ``invoke_agent`` span."""
        provider, model = _model_names(run.cfg.model)
        state = run.state
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OP_INVOKE_AGENT,
            n.GEN_AI_AGENT_NAME: self.agent_name,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.GEN_AI_REQUEST_MODEL: model,
            n.TETHER_RUN_ID: state.run_id,
            n.TETHER_RUN_RESUMED: run.deferred_in is not None,
        }
        if state.conversation_id:
            attributes[n.GEN_AI_CONVERSATION_ID] = state.conversation_id
        span = self.span = self.inst.start(
            f"{n.OP_INVOKE_AGENT} {self.agent_name}", SpanKind.INTERNAL, attributes
        )
        link = active_link().get()
        if link is not None:
            sc = span.get_span_context()
            link.run_started(trace.format_trace_id(sc.trace_id), trace.format_span_id(sc.span_id))
            for name, event_attributes, at in link.take_events():
                span.add_event(name, event_attributes, timestamp=at)
        token = otel_context.attach(trace.set_span_in_context(span))
        mine = active_run().set(self)
        try:
            result = await body()
        except BaseException as exc:
            self._failed(run, exc)
            raise
        else:
            self._completed(run, result)
            return result
        finally:
            active_run().reset(mine)
            otel_context.detach(token)
            span.end()

    def _count_run(self, outcome: str, extra: Mapping[str, AttributeValue] = {}) -> None:
        metrics = self.inst.metrics
        if metrics is not None:
            metrics.runs.add(
                1, {n.TETHER_RUN_OUTCOME: outcome, n.GEN_AI_AGENT_NAME: self.agent_name, **extra}
            )

    def _completed(self, run: RunView, result: Any) -> None:
        span = self.span
        assert span is not None
        done: ResultView = result
        outcome = "deferred" if done.deferred is not None else "completed"
        attributes: dict[str, AttributeValue] = {
            n.TETHER_RUN_OUTCOME: outcome,
            n.GEN_AI_CONVERSATION_ID: done.conversation_id,
            n.TETHER_RUN_REQUESTS: done.requests,
            n.TETHER_RUN_TOOL_EXECUTIONS: done.tool_executions,
        }
        if done.deferred is not None:
            attributes[n.TETHER_RUN_PENDING_CALLS] = len(done.deferred.calls)
        _usage(attributes, done.usage)
        span.set_attributes(attributes)
        self._count_run(outcome)

    def _failed(self, run: RunView, exc: BaseException) -> None:
        """A failed or cancelled run: the exception with its stage and the partial's counts."""
        span = self.span
        assert span is not None
        canceled = isinstance(exc, RunCanceled | asyncio.CancelledError)
        outcome = "canceled" if canceled else "failed"
        stage = exc.stage if isinstance(exc, RunError) else run.stage
        partial = getattr(exc, "partial", None)
        state = run.state
        attributes: dict[str, AttributeValue] = {
            n.TETHER_RUN_OUTCOME: outcome,
            n.TETHER_RUN_STAGE: stage,
            n.TETHER_RUN_REQUESTS: state.requests,
            n.TETHER_RUN_TOOL_EXECUTIONS: state.tool_executions,
        }
        event: dict[str, AttributeValue] = {n.TETHER_RUN_STAGE: stage}
        if isinstance(partial, Partial):
            attributes[n.GEN_AI_CONVERSATION_ID] = partial.conversation_id
            event[n.TETHER_PARTIAL_REQUESTS] = partial.requests
            event[n.TETHER_PARTIAL_TOOL_EXECUTIONS] = partial.tool_executions
            event[n.TETHER_PARTIAL_INPUT_TOKENS] = partial.usage.input_tokens
            event[n.TETHER_PARTIAL_OUTPUT_TOKENS] = partial.usage.output_tokens
            event[n.TETHER_PARTIAL_MESSAGES] = len(partial.new_messages)
            attributes.update({k: v for k, v in event.items() if k != n.TETHER_RUN_STAGE})
            _usage(attributes, partial.usage)
        elif state.conversation_id:
            attributes[n.GEN_AI_CONVERSATION_ID] = state.conversation_id
        span.set_attributes(attributes)
        error_type = type(exc).__qualname__
        span.set_attribute(n.ERROR_TYPE, error_type)
        span.set_status(trace.Status(trace.StatusCode.ERROR, describe(exc, self.inst.capture)))
        record_error(span, exc, self.inst.capture, event)
        self._count_run(outcome, {n.TETHER_RUN_STAGE: stage, n.ERROR_TYPE: error_type})

    # -- history boundary passes ------------------------------------------------------------------
    def history_event(self, name: str, attributes: Attributes) -> None:
        if self.span is not None:
            self.span.add_event(name, attributes)

    def history_processed(self, processor: object, given: int, kept: int) -> None:
        label = getattr(processor, "__name__", None) or type(processor).__name__
        label = {"TrimHistory": "trim_history", "BudgetHistory": "budget_history"}.get(label, label)
        self.history_event(
            n.TETHER_HISTORY_PROCESS,
            {
                n.TETHER_HISTORY_PROCESSOR: label,
                n.TETHER_HISTORY_MESSAGES_IN: given,
                n.TETHER_HISTORY_MESSAGES_OUT: kept,
                n.TETHER_HISTORY_DROPPED: max(given - kept, 0),
            },
        )

    def history_normalized(self, repair: HistoryRepair, messages: int) -> None:
        counts = {
            "synthesized": len(repair.synthesized),
            "dropped": len(repair.dropped),
            "removed": len(repair.removed),
        }
        self.history_event(
            n.TETHER_HISTORY_NORMALIZE,
            {
                n.TETHER_HISTORY_MESSAGES_OUT: messages,
                n.TETHER_HISTORY_SYNTHESIZED: counts["synthesized"],
                n.TETHER_HISTORY_DROPPED: counts["dropped"],
                n.TETHER_HISTORY_REMOVED: counts["removed"],
                n.TETHER_HISTORY_TRUNCATED: len(repair.truncated),
                n.TETHER_HISTORY_UNPAIRED: len(repair.unpaired),
            },
        )
        metrics = self.inst.metrics
        if metrics is not None:
            for kind, count in counts.items():
                if count:
                    metrics.repairs.add(count, {n.TETHER_REPAIR_KIND: kind})

    # -- stores -----------------------------------------------------------------------------------
    def store(self, store: Store) -> Store:
        if isinstance(store, TracedStore):
            return store
        traced = self._stores.get(id(store))
        if traced is None or traced.inner is not store:
            traced = self._stores[id(store)] = TracedStore.bound(store, self.inst)
        return traced

    # -- model requests ---------------------------------------------------------------------------
    async def chat(self, run: RunView, request: Callable[[], Awaitable[ModelResponse]]) -> ModelResponse:
        """Run ``request`` (one model request of the run) inside a ``chat {model}`` span."""
        inst, cfg, state = self.inst, run.cfg, run.state
        model = cfg.model
        provider, model_name = _model_names(model)
        attributes: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.GEN_AI_REQUEST_MODEL: model_name,
            n.GEN_AI_CONVERSATION_ID: state.conversation_id,
            n.GEN_AI_OUTPUT_TYPE: "text" if cfg.output.is_text else "json",
            n.GEN_AI_REQUEST_STREAM: run.streaming,
            n.TETHER_RUN_ID: state.run_id,
            n.TETHER_STEP: state.requests + 1,
        }
        settings = cfg.settings
        if settings is not None:
            _settings(attributes, settings)
        if inst.capture:
            messages, omitted = _content.input_messages(state.sent, inst.max_chars)
            attributes[n.GEN_AI_INPUT_MESSAGES] = messages
            if omitted:
                attributes[n.TETHER_CONTENT_OMITTED] = omitted
            if run.instructions:
                attributes[n.GEN_AI_SYSTEM_INSTRUCTIONS] = _content.instructions(
                    run.instructions, inst.max_chars
                )
        before = (getattr(model, "last_request_report", None), getattr(model, "last_response_report", None))
        span = inst.start(f"{n.OP_CHAT} {model_name}", SpanKind.CLIENT, attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
        started = time.perf_counter()
        metric: dict[str, AttributeValue] = {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.GEN_AI_REQUEST_MODEL: model_name,
        }
        try:
            response = await request()
        except BaseException as exc:
            otel_context.detach(token)
            _losses(span, model, before)
            mark_error(span, exc, inst.capture)
            metric[n.ERROR_TYPE] = type(exc).__qualname__
            self._record_duration(started, metric)
            span.end()
            raise
        otel_context.detach(token)
        try:
            self._response(span, response, metric)
            _losses(span, model, before)
            self._record_duration(started, metric)
        finally:
            span.end()
        return response

    def _response(self, span: Span, response: ModelResponse, metric: dict[str, AttributeValue]) -> None:
        message = response.message
        attributes: dict[str, AttributeValue] = {n.GEN_AI_RESPONSE_FINISH_REASONS: (response.stop_reason,)}
        if message.model:
            attributes[n.GEN_AI_RESPONSE_MODEL] = message.model
            metric[n.GEN_AI_RESPONSE_MODEL] = message.model
        if message.response_id:
            attributes[n.GEN_AI_RESPONSE_ID] = message.response_id
        _usage(attributes, response.usage)
        if self.inst.capture:
            attributes[n.GEN_AI_OUTPUT_MESSAGES] = _content.output_messages(
                message, response.stop_reason, self.inst.max_chars
            )
        span.set_attributes(attributes)
        metrics = self.inst.metrics
        if metrics is not None:
            usage = response.usage
            metrics.token_usage.record(usage.input_tokens, {**metric, n.GEN_AI_TOKEN_TYPE: "input"})
            metrics.token_usage.record(usage.output_tokens, {**metric, n.GEN_AI_TOKEN_TYPE: "output"})

    def _record_duration(self, started: float, metric: Mapping[str, AttributeValue]) -> None:
        metrics = self.inst.metrics
        if metrics is not None:
            metrics.duration.record(time.perf_counter() - started, metric)


def _settings(attributes: dict[str, AttributeValue], settings: Any) -> None:
    if settings.max_tokens is not None:
        attributes[n.GEN_AI_REQUEST_MAX_TOKENS] = settings.max_tokens
    if settings.temperature is not None:
        attributes[n.GEN_AI_REQUEST_TEMPERATURE] = settings.temperature
    if settings.top_p is not None:
        attributes[n.GEN_AI_REQUEST_TOP_P] = settings.top_p
    if settings.seed is not None:
        attributes[n.GEN_AI_REQUEST_SEED] = settings.seed
    if settings.stop:
        attributes[n.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(settings.stop)


def _losses(span: Span, model: Model, before: tuple[object, object]) -> None:
    """The request's conversion report (``last_request_report`` of a driver) and the response's
    (``last_response_report``), each as an event: how many parts were dropped or approximated,
    and what."""
    _loss_event(span, getattr(model, "last_request_report", None), before[0], n.TETHER_LOSSES_EVENT)
    _loss_event(span, getattr(model, "last_response_report", None), before[1], n.TETHER_RESPONSE_LOSSES_EVENT)


def _loss_event(span: Span, report: object, before: object, event: str) -> None:
    if report is None or report is before:
        return
    losses = list(getattr(report, "losses", ()))
    kinds = [str(getattr(loss, "kind", "")) for loss in losses]
    span.add_event(
        event,
        {
            n.TETHER_LOSSES_COUNT: len(losses),
            n.TETHER_LOSSES_DROPPED: kinds.count("dropped"),
            n.TETHER_LOSSES_APPROXIMATED: kinds.count("approximated"),
            n.TETHER_LOSSES_KINDS: tuple(sorted(set(kinds))),
            n.TETHER_LOSSES_WHAT: tuple(sorted({str(getattr(loss, "what", "")) for loss in losses})),
        },
    )
