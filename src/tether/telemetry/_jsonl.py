"""``JsonLinesSpanExporter``: finished spans as OTLP JSON lines (one ``ExportTraceServiceRequest``
per line, the OpenTelemetry Collector file exporter's format), so a trace can be read without a
collector. Needs ``opentelemetry-sdk``."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

import msgspec
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import format_span_id, format_trace_id

__all__ = ["JsonLinesSpanExporter", "otlp_json"]

_encode = msgspec.json.Encoder().encode


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in the protobuf JSON mapping
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, Sequence):
        items = cast(Sequence[Any], value)
        return {"arrayValue": {"values": [_value(v) for v in items]}}
    return {"stringValue": str(value)}


def _attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()]


def _span(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.context
    assert ctx is not None
    out: dict[str, Any] = {
        "traceId": format_trace_id(ctx.trace_id),
        "spanId": format_span_id(ctx.span_id),
        "name": span.name,
        "kind": span.kind.value + 1,  # OTLP numbers kinds from UNSPECIFIED = 0
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or 0),
        "attributes": _attributes(span.attributes),
        "status": {"code": span.status.status_code.value},
    }
    if span.parent is not None:
        out["parentSpanId"] = format_span_id(span.parent.span_id)
    if span.status.description:
        out["status"]["message"] = span.status.description
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _attributes(e.attributes)}
            for e in span.events
        ]
    if span.links:
        out["links"] = [
            {
                "traceId": format_trace_id(link.context.trace_id),
                "spanId": format_span_id(link.context.span_id),
                "attributes": _attributes(link.attributes),
            }
            for link in span.links
        ]
    return out


def otlp_json(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """An OTLP/JSON ``ExportTraceServiceRequest`` of ``spans`` (grouped by resource and scope)."""
    resources: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        scope = span.instrumentation_scope
        key = (scope.name, scope.version or "") if scope is not None else ("", "")
        entry = resources.setdefault(id(span.resource), (span.resource, {}))
        entry[1].setdefault(key, []).append(_span(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [
                    {"scope": {"name": name, "version": version}, "spans": items}
                    for (name, version), items in scopes.items()
                ],
            }
            for resource, scopes in resources.values()
        ]
    }


class JsonLinesSpanExporter(SpanExporter):
    """Appends each exported batch of spans to ``target`` (a path, or an open text file that stays
    the caller's) as one OTLP JSON line."""

    def __init__(self, target: str | Path | IO[str]) -> None:
        if isinstance(target, str | Path):
            self._file: IO[str] = Path(target).open("a", encoding="utf-8")  # noqa: SIM115 - closed by shutdown
            self._owned = True
        else:
            self._file = target
            self._owned = False
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = _encode(otlp_json(spans)).decode()
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            self._file.write(line + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owned:
                self._file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            if not self._closed:
                self._file.flush()
        return True
