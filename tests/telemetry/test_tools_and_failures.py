"""Tool spans for every way a call is answered, cancellation, streaming with parallel tools
(the tool's own spans nest under its span), history passes and a real driver's loss report."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from tether import (
    MaxStepsError,
    Message,
    Reasoning,
    RunCanceled,
    Text,
    ToolCall,
    ToolCanceled,
    assistant,
    user,
)
from tether.agent import Agent, DeferredResults, Tool, cancelled_partial
from tether.history import trim_history
from tether.models import ModelSettings
from tether.models.openai_chat import OpenAIChatModel
from tether.models.testing import FunctionInfo, FunctionModel

from .conftest import Otel, children


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def tool_spans(otel: Otel) -> dict[str, ReadableSpan]:
    return {str(attrs(s)["gen_ai.tool.call.id"]): s for s in otel.named("execute_tool ")}


def turns(*replies: Message | str) -> FunctionModel:
    queue = list(replies)

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        return queue.pop(0)

    return FunctionModel(reply, name="scripted")


async def echo(text: str) -> str:
    return text


async def test_denied_invalid_and_unknown_calls_get_spans_with_their_status(otel: Otel) -> None:
    async def wire(amount: int) -> str:
        return "sent"

    agent = Agent(
        turns(
            assistant(
                ToolCall("a", "wire", '{"amount": 5}'),
                ToolCall("b", "echo", '{"wrong": 1}'),
                ToolCall("c", "nosuch", "{}"),
            ),
            "ok",
        ),
        tools=[Tool(wire, requires_approval=True), echo],
        telemetry=otel.telemetry(),
    )
    paused = await agent.run("pay")
    assert paused.deferred is not None
    pending = tool_spans(otel)
    assert {k: attrs(s)["tether.tool.status"] for k, s in pending.items()} == dict.fromkeys("abc", "pending")
    otel.exporter.clear()
    await agent.run(history=paused.messages, deferred=DeferredResults(approvals={"a": False}))
    spans = tool_spans(otel)
    assert attrs(spans["a"])["tether.tool.status"] == "denied"
    assert attrs(spans["a"])["tether.tool.approval"] == "denied"
    assert attrs(spans["b"])["tether.tool.status"] == "invalid"
    assert attrs(spans["b"])["tether.tool.failed"] is True
    assert attrs(spans["b"])["error.type"] == "invalid"
    assert spans["b"].status.status_code is StatusCode.ERROR
    assert attrs(spans["c"])["tether.tool.status"] == "invalid"
    calls = {
        (p[0]["gen_ai.tool.name"], p[0]["tether.tool.status"]) for p in otel.metrics()["tether.tool.calls"]
    }
    assert ("_OTHER", "invalid") in calls  # a name the model made up is not a metric attribute value
    assert ("nosuch", "invalid") not in calls


async def test_step_limit_and_a_tool_that_stops_the_run(otel: Otel) -> None:
    agent = Agent(
        turns(assistant(ToolCall("s1", "echo", '{"text": "x"}'))),
        tools=[echo],
        max_steps=1,
        telemetry=otel.telemetry(),
    )
    with pytest.raises(MaxStepsError):
        await agent.run("loop")
    assert attrs(tool_spans(otel)["s1"])["tether.tool.status"] == "not_run"
    (run,) = otel.named("invoke_agent")
    assert attrs(run)["tether.run.outcome"] == "failed"
    assert attrs(run)["tether.run.stage"] == "tools"
    assert attrs(run)["error.type"] == "MaxStepsError"

    otel.exporter.clear()

    async def stop() -> str:
        raise ToolCanceled("the user said stop")

    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    agent = Agent(
        turns(assistant(ToolCall("t1", "stop", "{}"), ToolCall("t2", "slow", "{}"))),
        tools=[stop, slow],
        telemetry=otel.telemetry(),
    )
    with pytest.raises(RunCanceled):
        await agent.run("go")
    spans = tool_spans(otel)
    assert attrs(spans["t1"])["tether.tool.status"] == "stopped_run"
    assert attrs(spans["t2"])["tether.tool.status"] == "outcome_unknown"
    (run,) = otel.named("invoke_agent")
    assert attrs(run)["tether.run.outcome"] == "canceled"
    assert attrs(run)["error.type"] == "RunCanceled"


async def test_an_outer_cancellation_records_the_partial_on_the_run_span(otel: Otel) -> None:
    started = asyncio.Event()

    async def wait() -> str:
        started.set()
        await asyncio.sleep(30)
        return "never"

    agent = Agent(turns(assistant(ToolCall("w", "wait", "{}"))), tools=[wait], telemetry=otel.telemetry())
    task = asyncio.ensure_future(agent.run("wait for it"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    partial = cancelled_partial(caught.value)
    assert partial is not None
    (run,) = otel.named("invoke_agent")
    a = attrs(run)
    assert a["tether.run.outcome"] == "canceled"
    assert a["error.type"] == "CancelledError"
    assert a["tether.run.stage"] == "tools"
    assert a["tether.partial.requests"] == partial.requests == 1
    assert attrs(tool_spans(otel)["w"])["tether.tool.status"] == "outcome_unknown"


async def test_streamed_parallel_tools_nest_their_own_spans_under_their_tool_span(otel: Otel) -> None:
    tracer = otel.tracer_provider.get_tracer("app")

    async def fetch(url: str) -> str:
        with tracer.start_as_current_span(f"GET {url}"):
            await asyncio.sleep(0.01)
        return url

    agent = Agent(
        turns(
            assistant(ToolCall("f1", "fetch", '{"url": "a"}'), ToolCall("f2", "fetch", '{"url": "b"}')),
            "done",
        ),
        tools=[fetch],
        telemetry=otel.telemetry(),
    )
    async with agent.run_stream("fetch both") as stream:
        async for _ in stream:
            pass
    spans = otel.spans()
    tools = tool_spans(otel)
    for call_id, url in (("f1", "a"), ("f2", "b")):
        assert [s.name for s in children(spans, tools[call_id])] == [f"GET {url}"]
    (run,) = otel.named("invoke_agent")
    assert {s.name for s in children(spans, run)} == {"chat scripted", "execute_tool fetch"}
    assert all(attrs(s)["gen_ai.request.stream"] is True for s in otel.named("chat "))
    # the inline context of a single-call batch is detached: later spans are not its children
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in otel.named("chat "))


async def test_history_passes_are_events_of_the_run_span(otel: Otel) -> None:
    history = [user("one"), assistant("two"), user("three"), assistant("four")]
    orphan = Message("tool", ())  # empty tool message: removed by repair
    agent = Agent(turns("five"), history_processor=trim_history(3), telemetry=otel.telemetry())
    await agent.run("six", history=[*history, orphan])
    (run,) = otel.named("invoke_agent")
    events = {e.name: dict(e.attributes or {}) for e in run.events}
    assert events["tether.history.process"] == {
        "tether.history.processor": "trim_history",
        "tether.history.messages_in": 5,
        "tether.history.messages_out": 3,
        "tether.history.dropped": 2,
    }
    normalize = events["tether.history.normalize"]
    assert normalize["tether.history.removed"] == 1
    assert normalize["tether.history.messages_out"] == 2  # "three", "four": the empty tool message went
    repairs = {p[0]["tether.repair.kind"]: p[1] for p in otel.metrics()["tether.history.repairs"]}
    assert repairs == {"removed": 1}


def _recorded(samples: Path) -> dict[str, Any]:
    path = samples / "openai-chat" / "test_max_completion_tokens[gpt-4.5-preview].yaml"
    (interaction,) = yaml.safe_load(path.read_text())["interactions"]
    return interaction["response"]["parsed_body"]


async def test_a_real_driver_request_reports_response_fields_usage_and_losses(
    otel: Otel, provider_samples: Path
) -> None:
    body = _recorded(provider_samples)

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=body)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = OpenAIChatModel("gpt-4.5-preview", api_key="sk-test", http_client=client)
    signed = Reasoning("thinking", signature="sig", provider="anthropic")
    history = [user("hi"), Message("assistant", (signed, Text("hello")), provider="anthropic"), user("again")]
    agent = Agent(
        model,
        settings=ModelSettings(max_tokens=100, temperature=0.5, stop=("END",)),
        telemetry=otel.telemetry(),
    )
    result = await agent.run(history=history)
    assert result.output == "Hello! How can I help you today?"
    (chat,) = otel.named("chat ")
    a = attrs(chat)
    assert chat.name == "chat gpt-4.5-preview"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-4.5-preview"
    assert a["gen_ai.response.model"] == "gpt-4.5-preview-2025-02-27"
    assert a["gen_ai.response.id"] == "chatcmpl-BDpZplWguNLn40wA5mIpCR3OIzvYP"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == 8
    assert a["gen_ai.usage.output_tokens"] == 10
    assert a["gen_ai.request.max_tokens"] == 100
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.request.stop_sequences"] == ("END",)
    report = model.last_request_report
    assert report is not None
    assert report.losses
    (event,) = [e for e in chat.events if e.name == "tether.request.losses"]
    ev = dict(event.attributes or {})
    assert ev["tether.losses.count"] == len(report.losses)
    assert ev["tether.losses.dropped"] == sum(1 for x in report.losses if x.kind == "dropped") >= 1
    assert set(ev["tether.losses.kinds"]) == {x.kind for x in report.losses}
    assert "reasoning" in " ".join(ev["tether.losses.what"])


async def test_what_a_real_driver_response_left_out_is_an_event(otel: Otel, provider_samples: Path) -> None:
    body = _recorded(provider_samples)
    plain = json.loads(json.dumps(body))
    # a url_citation annotation as OpenAI documents it, added to the recorded answer
    citation = {
        "type": "url_citation",
        "url_citation": {"start_index": 0, "end_index": 5, "url": "https://a.b"},
    }
    body["choices"][0]["message"]["annotations"] = [citation]
    bodies = [body, plain]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json=bodies.pop(0))

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = OpenAIChatModel("gpt-4.5-preview", api_key="sk-test", http_client=client)
    agent = Agent(model, telemetry=otel.telemetry())
    await agent.run("hi")
    await agent.run("hi")
    first, second = otel.named("chat ")
    (event,) = [e for e in first.events if e.name == "tether.response.losses"]
    ev = dict(event.attributes or {})
    assert ev["tether.losses.count"] == ev["tether.losses.dropped"] == 1
    assert ev["tether.losses.what"] == ("annotations",)
    (event,) = [e for e in second.events if e.name == "tether.response.losses"]
    assert dict(event.attributes or {})["tether.losses.count"] == 0


async def test_an_external_result_is_reported_as_external(otel: Otel) -> None:
    async def locate() -> str:
        return "never run here"

    agent = Agent(
        turns(assistant(ToolCall("e1", "locate", "{}")), "You are in Oslo."),
        tools=[Tool(locate, external=True)],
        telemetry=otel.telemetry(),
    )
    paused = await agent.run("where am I?")
    assert paused.deferred is not None
    assert attrs(tool_spans(otel)["e1"])["tether.tool.status"] == "pending"
    assert "tether.tool.approval" not in attrs(tool_spans(otel)["e1"])
    otel.exporter.clear()
    done = await agent.run(history=paused.messages, deferred=DeferredResults(results={"e1": "Oslo"}))
    assert done.output == "You are in Oslo."
    span = tool_spans(otel)["e1"]
    assert attrs(span)["tether.tool.status"] == "external"
    assert "tether.tool.approval" not in attrs(span)  # an external result is not an approval
