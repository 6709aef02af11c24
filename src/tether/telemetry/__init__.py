"""OpenTelemetry traces and metrics of tether runs (``pip install 'tether[otel]'``).

Nothing here imports OpenTelemetry until an application has: while no tracer or meter provider
is configured, a run does no telemetry work. Spans follow the GenAI semantic conventions:
``invoke_agent {agent}`` per run, ``chat {model}`` per model request, ``execute_tool {tool}``
per tool call, store calls as client spans; history boundary passes are span events. Every
name is listed in docs/telemetry.md.

- ``Telemetry``: providers and the content opt-in; ``Agent(telemetry=...)`` or ``configure()``.
- ``continue_trace(headers)``: runs inside continue a request's W3C ``traceparent``; its
  ``TraceLink.trace_id`` goes on the request's run events.
- ``TracedStore(store)``: a store whose calls are client spans (for calls outside runs).
- ``record_sanitize(report)`` / ``record_history_pass(name, counts)``: boundary passes done
  before a run (``sanitize_history`` on a request's history).
- ``JsonLinesSpanExporter(path)``: spans as OTLP JSON lines (needs ``opentelemetry-sdk``).

``run_trace`` and ``traced_store`` are the agent layer's hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.telemetry._active import traced_store
from tether.telemetry._hooks import run_trace
from tether.telemetry._propagation import (
    TraceLink,
    continue_trace,
    parse_traceparent,
    record_history_pass,
    record_sanitize,
)
from tether.telemetry._settings import CAPTURE_ENV, Telemetry, configure, default_telemetry
from tether.telemetry._store import TracedStore, db_system

if TYPE_CHECKING:
    from tether.telemetry._jsonl import JsonLinesSpanExporter
    from tether.telemetry._run_trace import RunTrace

__all__ = [
    "CAPTURE_ENV",
    "JsonLinesSpanExporter",
    "RunTrace",
    "Telemetry",
    "TraceLink",
    "TracedStore",
    "configure",
    "continue_trace",
    "db_system",
    "default_telemetry",
    "parse_traceparent",
    "record_history_pass",
    "record_sanitize",
    "run_trace",
    "traced_store",
]


def __getattr__(name: str) -> Any:
    # These need OpenTelemetry (the exporter: its SDK); load them on first use only.
    if name == "JsonLinesSpanExporter":
        from tether.telemetry._jsonl import JsonLinesSpanExporter

        return JsonLinesSpanExporter
    if name == "RunTrace":
        from tether.telemetry._run_trace import RunTrace

        return RunTrace
    raise AttributeError(f"module 'tether.telemetry' has no attribute {name!r}")
