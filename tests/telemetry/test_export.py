"""The wire path: spans and metrics over real OTLP/HTTP (the OTLP exporter package, protobuf) to
a receiver on loopback; spans as OTLP JSON lines (``JsonLinesSpanExporter``, ``tether chat
--trace``) that decode as OTLP ``ExportTraceServiceRequest``s."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from tether import ToolCall, assistant
from tether.agent import Agent
from tether.models.testing import FunctionModel
from tether.stores import SQLiteStore
from tether.telemetry import JsonLinesSpanExporter, Telemetry


class Receiver:
    """A minimal OTLP/HTTP receiver: keeps every decoded export request."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.content_types: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.content_types.add(self.headers["Content-Type"])
                if self.path == "/v1/traces":
                    receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/metrics":
                    receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [s for r in self.traces for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    thread = threading.Thread(target=r.server.serve_forever, daemon=True)
    thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


def tool_agent(telemetry: Telemetry) -> Agent[Any, str]:
    def reply(messages: Any, info: Any) -> Any:
        return "done" if messages[-1].role == "tool" else assistant(ToolCall("x1", "double", '{"n": 21}'))

    async def double(n: int) -> int:
        return 2 * n

    return Agent(FunctionModel(reply, name="scripted"), tools=[double], name="doubler", telemetry=telemetry)


def _attr(span: Any, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            return json_format.MessageToDict(kv.value)
    raise KeyError(key)


async def test_spans_and_metrics_reach_an_otlp_http_receiver(receiver: Receiver, tmp_path: Path) -> None:
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces")))
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{receiver.url}/v1/metrics"), export_interval_millis=3_600_000
    )
    mp = MeterProvider(metric_readers=[reader])
    agent = tool_agent(Telemetry(tracer_provider=tp, meter_provider=mp))
    async with SQLiteStore(tmp_path / "c.db") as store:
        result = await agent.run("double 21", store=store, owner="me")
    assert tp.force_flush(10_000)
    assert mp.force_flush(10_000)
    tp.shutdown()
    mp.shutdown()
    assert receiver.content_types == {"application/x-protobuf"}
    spans = {s.name: s for s in receiver.spans()}
    assert {"invoke_agent doubler", "chat scripted", "execute_tool double", "append tether_messages"} <= set(
        spans
    )
    run = spans["invoke_agent doubler"]
    assert _attr(run, "gen_ai.conversation.id") == {"stringValue": result.conversation_id}
    assert _attr(run, "tether.run.id") == {"stringValue": result.run_id}
    assert _attr(spans["execute_tool double"], "gen_ai.tool.call.id") == {"stringValue": "x1"}
    assert spans["execute_tool double"].parent_span_id == run.span_id
    assert _attr(spans["append tether_messages"], "db.system.name") == {"stringValue": "sqlite"}
    names = {
        m.name
        for r in receiver.metrics
        for rm in r.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "tether.runs",
        "tether.tool.calls",
    } <= names


def _as_protobuf_json(line: str) -> ExportTraceServiceRequest:
    """Decode an OTLP/JSON line strictly (unknown fields fail): ids are hex in OTLP/JSON, base64
    in the generic protobuf JSON mapping."""
    data = json.loads(line)
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.ParseDict(data, ExportTraceServiceRequest())


async def test_json_lines_decode_as_otlp_requests(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
    result = await tool_agent(Telemetry(tracer_provider=tp)).run("double 21")
    tp.shutdown()
    lines = path.read_text().splitlines()
    requests = [_as_protobuf_json(line) for line in lines]
    spans = [s for r in requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
    by_name = {s.name: s for s in spans}
    run = by_name["invoke_agent doubler"]
    assert _attr(run, "tether.run.id") == {"stringValue": result.run_id}
    assert _attr(run, "tether.run.requests") == {"intValue": "2"}
    assert by_name["execute_tool double"].parent_span_id == run.span_id
    assert by_name["chat scripted"].kind == 3  # SPAN_KIND_CLIENT
    assert run.kind == 1  # SPAN_KIND_INTERNAL
    reasons = [_attr(s, "gen_ai.response.finish_reasons") for s in spans if s.name == "chat scripted"]
    assert reasons == [
        {"arrayValue": {"values": [{"stringValue": "tool_calls"}]}},
        {"arrayValue": {"values": [{"stringValue": "stop"}]}},
    ]
