"""Continuing an incoming W3C ``traceparent`` into the runs of a request, and boundary passes
recorded before a run begins (``sanitize_history`` on a request's history).

    with continue_trace(request.headers) as link:
        async with agent.run_stream(prompt, ...) as stream:   # the run span continues the trace
            async for event in stream:
                send({**encode(event), "trace_id": link.trace_id})

Nothing else is needed: OpenTelemetry's current context carries the parent into the run (a
``run_stream`` task copies the context it was started in).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from tether.errors import UserError
from tether.history import SanitizeReport

from . import _names as n
from ._active import Attributes, active_link, active_run
from ._settings import Telemetry, default_telemetry

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = ["TraceLink", "continue_trace", "parse_traceparent", "record_history_pass", "record_sanitize"]

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_MAX_PENDING_EVENTS = 64


def parse_traceparent(value: str | None) -> tuple[str, str, int] | None:
    """``(trace id, parent span id, flags)`` of a W3C ``traceparent`` header, or ``None`` when it is
    absent or invalid (the W3C rule: an invalid header is ignored and a new trace starts)."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value.strip())
    if match is None:
        return None
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return None
    return trace_id, span_id, int(flags, 16)


class TraceLink:
    """The trace the runs of one request belong to.

    ``trace_id`` (32 hex digits) is the incoming ``traceparent``'s trace when there was a valid
    one, else the trace of the first run span started inside ``continue_trace`` (set before the
    run's first event), else ``None`` (no incoming trace and telemetry off). ``remote`` says the
    incoming trace was continued; ``parent_span_id`` is the caller's span, ``run_span_id`` the
    latest run span started inside."""

    __slots__ = ("_events", "parent_span_id", "remote", "run_span_id", "trace_id")

    def __init__(self, trace_id: str | None = None, parent_span_id: str | None = None) -> None:
        self.trace_id = trace_id
        self.parent_span_id = parent_span_id
        self.remote = trace_id is not None
        self.run_span_id: str | None = None
        self._events: list[tuple[str, Attributes, int]] = []

    def __repr__(self) -> str:
        return (
            f"TraceLink(trace_id={self.trace_id!r}, remote={self.remote!r}, run_span_id={self.run_span_id!r})"
        )

    @property
    def traceparent(self) -> str | None:
        """A ``traceparent`` naming the latest run span (or the incoming parent), to send on."""
        span = self.run_span_id or self.parent_span_id
        if self.trace_id is None or span is None:
            return None
        return f"00-{self.trace_id}-{span}-01"

    def run_started(self, trace_id: str, span_id: str) -> None:
        if self.trace_id is None:
            self.trace_id = trace_id
        self.run_span_id = span_id

    def take_events(self) -> list[tuple[str, Attributes, int]]:
        events, self._events = self._events, []
        return events

    def add_event(self, name: str, attributes: Attributes) -> None:
        if len(self._events) < _MAX_PENDING_EVENTS:
            self._events.append((name, attributes, time.time_ns()))


def _headers(headers: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> dict[str, str]:
    """The headers as a lowercase-keyed dict of strings; entries that are not a (name, value) pair
    of str or bytes are skipped (a malformed header is ignored, never an error)."""
    given = cast(object, headers)
    if given is None:
        return {}
    if isinstance(given, Mapping):
        items = cast(Iterable[Any], cast(Mapping[Any, Any], given).items())
    elif isinstance(given, Iterable) and not isinstance(given, str | bytes):
        items = cast(Iterable[Any], given)
    else:
        raise UserError(
            f"continue_trace needs the request's headers: a mapping or (name, value) pairs, "
            f"not {type(given).__name__}"
        )
    carrier: dict[str, str] = {}
    for item in items:
        if not isinstance(item, tuple | list) or len(cast(Sequence[Any], item)) != 2:
            continue
        key, value = cast(Sequence[Any], item)
        if isinstance(key, bytes):  # ASGI scopes carry raw byte pairs
            key = key.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        if isinstance(key, str) and isinstance(value, str):
            carrier[key.lower()] = value
    return carrier


@contextmanager
def continue_trace(
    headers: Mapping[str, str] | Iterable[tuple[str, str]] | None,
    *,
    telemetry: Telemetry | None = None,
) -> Generator[TraceLink]:
    """Runs started inside continue the W3C trace of ``headers`` (a mapping, any key case, or
    ``(name, value)`` pairs, bytes or str); yields the ``TraceLink`` whose ``trace_id`` goes on
    the request's run events.

    When a span is already current (the web framework's own OpenTelemetry instrumentation
    continued the request's trace), it stays the parent. An absent or invalid ``traceparent``
    starts a new trace, as the W3C rule says."""
    carrier = _headers(headers)
    parsed = parse_traceparent(carrier.get("traceparent"))
    link = TraceLink(*parsed[:2]) if parsed is not None else TraceLink()
    context = _extract(carrier, link, telemetry) if parsed is not None else None
    token = None
    if context is not None:
        from opentelemetry import context as otel_context  # loaded: telemetry is on

        token = otel_context.attach(context)
    mine = active_link().set(link)
    try:
        yield link
    finally:
        active_link().reset(mine)
        if token is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(token)


def _extract(carrier: dict[str, str], link: TraceLink, telemetry: Telemetry | None) -> Context | None:
    """The OpenTelemetry context to start runs in (``None``: keep the current one)."""
    if (telemetry or default_telemetry()).instruments() is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        link.trace_id = trace.format_trace_id(current.trace_id)
        link.parent_span_id = trace.format_span_id(current.span_id)
        link.remote = False
        return None
    return TraceContextTextMapPropagator().extract(carrier)


def record_history_pass(
    name: str, counts: Mapping[str, int | str], *, telemetry: Telemetry | None = None
) -> None:
    """A boundary pass over a history (``tether.history.sanitize``, a compaction, ...) with its
    report counts: an event on the current run span, or, before a run inside ``continue_trace``,
    on the next run span started there, else on the current span."""
    attributes: Attributes = dict(counts)
    run = active_run().get()
    if run is not None:
        run.history_event(name, attributes)
        return
    link = active_link().get()
    if link is not None:
        link.add_event(name, attributes)
        return
    if "opentelemetry.trace" in sys.modules and (telemetry or default_telemetry()).instruments() is not None:
        from opentelemetry import trace

        trace.get_current_span().add_event(name, attributes)


def record_sanitize(report: SanitizeReport, *, telemetry: Telemetry | None = None) -> None:
    """Report what ``sanitize_history`` dropped from an untrusted history: the
    ``tether.history.sanitize`` event (see ``record_history_pass``) and the
    ``tether.history.sanitized`` counter, by kind."""
    drops = {
        "system_prompt": report.system_prompts,
        "unsafe_part": len(report.unsafe_parts),
        "removed_message": len(report.removed),
    }
    record_history_pass(
        n.TETHER_HISTORY_SANITIZE,
        {
            n.TETHER_HISTORY_SYSTEM_PROMPTS: drops["system_prompt"],
            n.TETHER_HISTORY_UNSAFE_PARTS: drops["unsafe_part"],
            n.TETHER_HISTORY_REMOVED: drops["removed_message"],
            n.TETHER_HISTORY_SYNTHESIZED: len(report.repair.synthesized),
            n.TETHER_HISTORY_DROPPED: len(report.repair.dropped),
        },
        telemetry=telemetry,
    )
    inst = (telemetry or default_telemetry()).instruments()
    if inst is not None and inst.metrics is not None:
        for kind, count in drops.items():
            if count:
                inst.metrics.sanitized.add(count, {n.TETHER_SANITIZE_KIND: kind})
