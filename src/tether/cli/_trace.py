"""``tether chat --trace FILE``: the session's spans as OTLP JSON lines, without a collector.

Every finished span is appended to FILE at once (one ``ExportTraceServiceRequest`` per line, the
OpenTelemetry Collector file exporter's format), so the file can be read while the session runs.
Needs the OpenTelemetry SDK (``pip install opentelemetry-sdk``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from pathlib import Path

import tether.telemetry as telemetry
from tether.cli._common import fail

__all__ = ["chat_trace"]


@contextlib.contextmanager
def chat_trace(path: Path | None) -> Generator[None]:
    """Trace the runs inside to ``path`` (nothing when ``None``); the spans are flushed and the
    file closed on the way out."""
    if path is None:
        yield
        return
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        exporter_type = telemetry.JsonLinesSpanExporter  # loads the SDK-based exporter
    except ImportError as exc:
        fail("--trace needs the OpenTelemetry SDK: pip install opentelemetry-sdk", cause=exc)
    try:
        exporter = exporter_type(path)
    except OSError as exc:
        fail(f"cannot write the trace file {path}: {exc.strerror or exc}", cause=exc)
    provider = TracerProvider(resource=Resource.create({"service.name": "tether chat"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = telemetry.configure(telemetry.Telemetry(tracer_provider=provider))
    try:
        yield
    finally:
        telemetry.configure(previous)
        provider.shutdown()
