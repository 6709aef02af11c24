"""The OpenTelemetry side: a tracer and the metric instruments, resolved from providers.

Imported only once telemetry can be on (the application loaded the API or passed providers).
The API's no-op and proxy providers (nothing configured) resolve to ``None``: telemetry off.
"""

from __future__ import annotations

import traceback
from collections.abc import Generator, Mapping
from contextlib import contextmanager
from importlib import metadata
from typing import Any, cast

from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider, NoOpMeterProvider
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from tether.errors import MaxStepsError, ModelHTTPError, RunError, StoreError

from . import _names as n

__all__ = ["AttributeValue", "Instruments", "Metrics", "describe", "mark_error", "record_error", "resolve"]

AttributeValue = str | int | float | bool | tuple[str, ...]
_SCOPE = "tether"


def _version() -> str:
    try:
        return metadata.version("tether")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def _is_noop_tracer(tp: TracerProvider) -> bool:
    return isinstance(tp, NoOpTracerProvider | ProxyTracerProvider)


def _is_noop_meter(mp: MeterProvider) -> bool:
    # the global default before set_meter_provider is the API's private proxy class
    return isinstance(mp, NoOpMeterProvider) or type(mp).__name__ == "_ProxyMeterProvider"


class Metrics:
    """tether's metric instruments on one meter."""

    __slots__ = ("duration", "repairs", "runs", "sanitized", "token_usage", "tool_calls")

    def __init__(self, meter: Meter) -> None:
        self.token_usage: Histogram = meter.create_histogram(
            n.GEN_AI_CLIENT_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(map(float, n.TOKEN_BUCKETS)),
        )
        self.duration: Histogram = meter.create_histogram(
            n.GEN_AI_CLIENT_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(n.DURATION_BUCKETS),
        )
        self.runs: Counter = meter.create_counter(
            n.TETHER_RUNS, unit="{run}", description="Agent runs, by outcome."
        )
        self.tool_calls: Counter = meter.create_counter(
            n.TETHER_TOOL_CALLS, unit="{call}", description="Tool calls answered, by tool and status."
        )
        self.repairs: Counter = meter.create_counter(
            n.TETHER_HISTORY_REPAIRS,
            unit="{repair}",
            description="Changes history repair made before a run (synthesized results, dropped results, "
            "removed messages).",
        )
        self.sanitized: Counter = meter.create_counter(
            n.TETHER_HISTORY_SANITIZED,
            unit="{drop}",
            description="What sanitize_history dropped from untrusted history, by kind.",
        )


class Instruments:
    """What a traced run uses: the tracer (a no-op one when only metrics are configured), the
    metric instruments (``None`` when only tracing is configured) and the content policy."""

    __slots__ = ("capture", "max_chars", "metrics", "tracer", "tracing")

    def __init__(self, tracer: Tracer, tracing: bool, metrics: Metrics | None, capture: bool, max_chars: int):
        self.tracer = tracer
        self.tracing = tracing
        self.metrics = metrics
        self.capture = capture and tracing
        self.max_chars = max_chars

    def start(
        self,
        name: str,
        kind: SpanKind,
        attributes: Mapping[str, AttributeValue],
        *,
        start_time: int | None = None,
    ) -> Span:
        """A span, child of the current context."""
        return self.tracer.start_span(name, kind=kind, attributes=attributes, start_time=start_time)

    @contextmanager
    def client_span(self, name: str, attributes: Mapping[str, AttributeValue]) -> Generator[Span]:
        """A client span made current for the call inside (a store call); records an error."""
        with self.tracer.start_as_current_span(
            name,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                mark_error(span, exc, self.capture)
                raise


def describe(exc: BaseException, capture: bool) -> str:
    """What a span says about a failure. With content capture, the exception's message. Without
    it, only what cannot quote content: an exception's message may carry the conversation (a
    validation error quotes the model's output, a propagating tool's error is what its result
    would have said, a provider may echo the request), so it is the class, a run error's stage,
    an HTTP error's provider and status; the messages tether writes from ids and counts alone
    (the step limit, store failures) are kept."""
    name = type(exc).__qualname__
    if capture or isinstance(exc, MaxStepsError | StoreError):
        return str(exc)[:500] or name
    if isinstance(exc, ModelHTTPError):
        return f"{name}: {exc.provider} HTTP {exc.status} (stage {exc.stage})"
    if isinstance(exc, RunError):
        return f"{name} (stage {exc.stage})"
    return name


def _stack(exc: BaseException) -> str:
    """The traceback of ``exc`` and the exceptions it chains, frames and class names only (no
    messages, no locals)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain) and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    lines: list[str] = []
    for link in reversed(chain):
        if lines:
            lines.append("\nThe above exception led to the following one:\n\n")
        lines.append("Traceback (most recent call last):\n")
        lines.extend(traceback.format_tb(link.__traceback__))
        lines.append(f"{type(link).__module__}.{type(link).__qualname__}\n")
    return "".join(lines)


def record_error(
    span: Span,
    exc: BaseException,
    capture: bool,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> None:
    """The exception event of ``exc`` (with ``attributes``); without content capture its message
    and traceback say no more than ``describe`` (frames and class names only)."""
    extra: dict[str, AttributeValue] = dict(attributes or {})
    if not capture:
        extra["exception.message"] = describe(exc, False)
        extra["exception.stacktrace"] = _stack(exc)
    span.record_exception(exc, attributes=extra)


def mark_error(span: Span, exc: BaseException, capture: bool) -> None:
    """``error.type``, the status and the exception event (without the traceback's locals;
    without content capture, without the exception's message: ``describe``)."""
    span.set_attribute(n.ERROR_TYPE, type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, describe(exc, capture)))
    record_error(span, exc, capture)


def resolve(tp: Any, mp: Any, capture: bool, max_chars: int) -> Instruments | None:
    """Instruments for these providers (either may be ``None``: not configured), or ``None`` when
    neither records anything."""
    tracing = tp is not None and not _is_noop_tracer(tp)
    metering = mp is not None and not _is_noop_meter(mp)
    if not tracing and not metering:
        return None
    version = _version()
    tracer_provider: TracerProvider = cast(TracerProvider, tp) if tracing else NoOpTracerProvider()
    tracer = tracer_provider.get_tracer(_SCOPE, version)
    meter_metrics = Metrics(cast(MeterProvider, mp).get_meter(_SCOPE, version)) if metering else None
    return Instruments(tracer, tracing, meter_metrics, capture, max_chars)
