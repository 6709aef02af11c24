"""Telemetry fixtures: an SDK tracer provider with the in-memory exporter and a meter provider
with the in-memory reader, passed to tether explicitly (the process-global providers are never
set, so no test leaks into another)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether.telemetry import Telemetry


@dataclass
class Otel:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def telemetry(self, **kwargs: Any) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kwargs)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """metric name -> [(attributes, value: sum, or (count, sum) for a histogram)]."""
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points = out.setdefault(metric.name, [])
                    for p in metric.data.data_points:
                        value = (p.count, p.sum) if hasattr(p, "count") else p.value  # type: ignore[union-attr]
                        points.append((dict(p.attributes or {}), value))
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    yield Otel(tp, mp, exporter, reader)
    tp.shutdown()
    mp.shutdown()


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    ctx = parent.get_span_context()
    return sorted(
        (s for s in spans if s.parent is not None and s.parent.span_id == ctx.span_id),
        key=lambda s: s.start_time or 0,
    )
