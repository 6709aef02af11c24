"""The OpenAI Responses driver through the real ``openai`` SDK over an httpx mock transport that
answers with recorded provider responses."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import yaml

from tether import (
    Image,
    Message,
    MissingExtra,
    ModelError,
    ModelHTTPError,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    UnsupportedContent,
    UserError,
)
from tether.models import Model, ModelResponse, ModelSettings, Profile, TextDelta, ToolDefinition, infer_model
from tether.models.openai_responses import OpenAIResponsesModel
from tether.models.wire import openai_responses as wire


def _interactions(samples: Path, name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((samples / "openai-responses" / name).read_text())["interactions"]


def _raw(part: dict[str, Any]) -> str | None:
    raw = part.get("body")
    return raw.get("string") if isinstance(raw, dict) else raw


class Recorded:
    """Answers each POST with the next recorded response and keeps the bodies sent."""

    def __init__(self, interactions: list[dict[str, Any]]) -> None:
        self.responses = [i["response"] for i in interactions]
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/responses"
        self.sent.append(json.loads(request.content))
        recorded = self.responses[len(self.sent) - 1]
        status = recorded["status"]["code"]
        raw = _raw(recorded)
        if raw is not None and "event:" in raw:
            return httpx2.Response(
                status, content=raw.encode(), headers={"content-type": "text/event-stream"}
            )
        return httpx2.Response(status, json=recorded["parsed_body"])


def _model(name: str, handler: Any, **kwargs: Any) -> OpenAIResponsesModel:
    client = openai.AsyncOpenAI(
        api_key="test-key",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    return OpenAIResponsesModel(name, client=client, **kwargs)


def _tools(body: dict[str, Any]) -> list[ToolDefinition]:
    return [
        ToolDefinition(t["name"], t.get("description") or "", t["parameters"], strict=t.get("strict"))
        for t in body.get("tools", [])
    ]


def _content(item: dict[str, Any]) -> Any:
    content = item["content"]
    if isinstance(content, str):
        return [content]
    return [c.get("text") for c in content]


def _same_input(sent: list[dict[str, Any]], recorded: list[dict[str, Any]]) -> None:
    assert len(sent) == len(recorded)
    for ours, theirs in zip(sent, recorded, strict=True):
        kind = theirs.get("type", "message")
        assert ours.get("type", "message") == kind
        if kind == "message":
            assert ours["role"] == theirs["role"]
            assert _content(ours) == _content(theirs)
        elif kind == "reasoning":
            assert ours["id"] == theirs["id"]
            assert ours["encrypted_content"] == theirs["encrypted_content"]  # byte for byte
            assert [s["text"] for s in ours["summary"]] == [s["text"] for s in theirs["summary"]]
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments", "id"):
                assert ours.get(key) == theirs.get(key), key
        else:
            assert ours == theirs


async def test_reasoning_tool_round_trip_matches_recording(provider_samples: Path) -> None:
    interactions = _interactions(provider_samples, "test_openai_responses_thinking_with_tool_calls.yaml")
    first, second = (i["request"]["parsed_body"] for i in interactions)
    recorded = Recorded(interactions)
    model = _model("gpt-5", recorded)
    assert isinstance(model, Model)
    history = [Message("user", (Text(first["input"][0]["content"]),))]
    settings = ModelSettings(extra={"reasoning": first["reasoning"]})
    response = await model.generate(
        history, instructions=first["instructions"], tools=_tools(first), settings=settings
    )
    sent = recorded.sent[0]
    assert sent["store"] is False
    assert sent["include"] == ["reasoning.encrypted_content"]
    assert sent["instructions"] == first["instructions"]
    assert sent["tools"] == [{k: v for k, v in t.items() if v is not None} for t in first["tools"]]
    assert sent["reasoning"] == first["reasoning"]
    _same_input(sent["input"], first["input"])
    assert response.stop_reason == "tool_calls"
    call = response.message.tool_calls[0]
    output = second["input"][-1]
    assert output["call_id"] == call.id
    history += [response.message, Message("tool", (ToolResult(call.id or "", call.name, output["output"]),))]
    final = await model.generate(
        history, instructions=first["instructions"], tools=_tools(first), settings=settings
    )
    _same_input(recorded.sent[1]["input"], second["input"])
    assert final.stop_reason == "stop"
    assert final.message.text == interactions[1]["response"]["parsed_body"]["output"][0]["content"][0]["text"]


async def test_phase_items_replay_with_their_ids(provider_samples: Path) -> None:
    interactions = _interactions(provider_samples, "test_openai_responses_phase_live.yaml")
    first, second = (i["request"]["parsed_body"] for i in interactions)
    recorded = Recorded(interactions)
    model = _model("gpt-5.5", recorded)
    history = [Message("user", (Text(first["input"][0]["content"]),))]
    response = await model.generate(history, instructions=first["instructions"], tools=_tools(first))
    call = response.message.tool_calls[0]
    history += [response.message, Message("tool", (ToolResult(call.id or "", call.name, "Potato City"),))]
    await model.generate(history, instructions=first["instructions"], tools=_tools(first))
    sent = recorded.sent[1]["input"]
    _same_input(sent, second["input"])
    assert [i.get("id") for i in sent] == [i.get("id") for i in second["input"]]


async def test_stream_yields_deltas_then_the_assembled_message(provider_samples: Path) -> None:
    interactions = _interactions(provider_samples, "test_openai_responses_stream.yaml")
    first = interactions[0]["request"]["parsed_body"]
    history = [Message("user", (Text(first["input"][0]["content"]),))]
    tools = _tools(first)
    recorded = Recorded(interactions)
    model = _model("gpt-4o", recorded)
    events = [e async for e in model.stream(history, tools=tools)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert recorded.sent[0]["stream"] is True
    assert "include" not in recorded.sent[0]  # not a reasoning model
    call = final.message.tool_calls[0]
    assert call.arguments == '{"country":"France"}'
    history += [final.message, Message("tool", (ToolResult(call.id or "", call.name, "Paris"),))]
    events = [e async for e in model.stream(history, tools=tools)]
    texts = "".join(e.text for e in events if isinstance(e, TextDelta))
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert texts == final.message.text == "The capital of France is Paris."
    completed = next(
        json.loads(line[5:])
        for line in (_raw(interactions[1]["response"]) or "").splitlines()
        if line.startswith("data:") and '"response.completed"' in line
    )
    assert final == wire.decode_response(completed["response"])


async def test_http_error_becomes_model_http_error(provider_samples: Path) -> None:
    interactions = _interactions(provider_samples, "test_openai_responses_model_http_error.yaml")
    recorded = Recorded(interactions)
    model = _model("gpt-4o", recorded)
    with pytest.raises(ModelHTTPError) as info:
        await model.generate([Message("user", (Text("hello"),))])
    error = interactions[0]["response"]["parsed_body"]["error"]["message"]
    assert info.value.status == 400
    assert info.value.provider == "openai"
    assert error in info.value.body
    assert info.value.stage == "model"


async def test_http_error_while_streaming() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(429, json={"error": {"message": "slow down", "type": "rate_limit"}})

    model = _model("gpt-5", handler)
    with pytest.raises(ModelHTTPError) as info:
        await anext(aiter(model.stream([Message("user", (Text("hi"),))])))
    assert info.value.status == 429
    assert "slow down" in info.value.body


async def test_stream_cut_before_completion_is_a_model_error() -> None:
    sse = (
        'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1","model":"gpt-5",'
        '"status":"in_progress","output":[]}}\n\n'
        'event: response.output_item.added\ndata: {"type":"response.output_item.added","output_index":0,'
        '"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}\n\n'
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","output_index":0,'
        '"content_index":0,"delta":"Hel"}\n\n'
    )

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"})

    seen: list[Any] = []

    async def consume() -> None:
        async for event in _model("gpt-5", handler).stream([Message("user", (Text("hi"),))]):
            seen.append(event)

    with pytest.raises(ModelError, match="ended before"):
        await consume()
    assert seen == [TextDelta(0, "Hel")]


async def test_unsupported_content_is_refused_before_any_request() -> None:
    calls: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(500)

    model = _model("gpt-4o", handler, profile=Profile(provider="openai", images=False))
    message = Message("user", (Text("look"), Image(data=b"\x89PNG", media_type="image/png")))
    with pytest.raises(UnsupportedContent) as info:
        await model.generate([message])
    assert (info.value.message_index, info.value.part_index) == (0, 1)
    with pytest.raises(UserError, match="stop"):
        await model.generate([Message("user", (Text("hi"),))], settings=ModelSettings(stop=("x",)))
    assert calls == []


async def test_foreign_reasoning_is_not_sent() -> None:
    recorded: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        recorded.append(json.loads(request.content))
        return httpx2.Response(
            200, json={"id": "resp_1", "model": "gpt-5", "status": "completed", "output": []}
        )

    history = [
        Message("user", (Text("q"),)),
        Message(
            "assistant",
            (Reasoning("t", signature="sig", provider="anthropic"), ToolCall("toolu_1", "f", "{}")),
            provider="anthropic",
        ),
        Message("tool", (ToolResult("toolu_1", "f", "ok"),)),
    ]
    response = await _model("gpt-5", handler).generate(history)
    assert [i.get("type", "message") for i in recorded[0]["input"]] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert response.stop_reason == "stop"
    assert response.message.parts == ()


@pytest.mark.parametrize("key", ["store", "include", "input", "stream", "previous_response_id"])
async def test_extra_settings_cannot_override_what_the_driver_owns(key: str) -> None:
    calls: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(500)

    model = _model("gpt-5", handler)
    settings = ModelSettings(extra={key: True, "reasoning": {"effort": "low"}})
    with pytest.raises(UserError, match=key):
        await model.generate([Message("user", (Text("hi"),))], settings=settings)
    assert calls == []
    body = model.request_body(
        [Message("user", (Text("hi"),))], settings=ModelSettings(extra={"reasoning": {"effort": "low"}})
    )
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert body["reasoning"] == {"effort": "low"}


def test_registry_builds_the_driver() -> None:
    client = openai.AsyncOpenAI(api_key="test-key")
    model = infer_model("openai-responses:gpt-5", client=client)
    assert isinstance(model, OpenAIResponsesModel)
    assert model.name == "openai-responses:gpt-5"
    assert model.profile.reasoning_replay == "same-family"
    assert infer_model("openai-responses:gpt-4o", client=client).profile.reasoning_replay == "never"


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    monkeypatch.delitem(sys.modules, "tether.models.openai_responses")
    with pytest.raises(MissingExtra, match=r"pip install 'tether\[openai\]'"):
        importlib.import_module("tether.models.openai_responses")


class _Body(httpx2.AsyncByteStream):
    """A streamed body that never ends on its own and records whether it was closed."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.closed = False

    async def __aiter__(self) -> Any:
        yield self.first
        while True:  # the server keeps the stream open
            await asyncio.sleep(3600)
            yield b""

    async def aclose(self) -> None:
        self.closed = True


async def test_cancelling_mid_stream_closes_the_response() -> None:
    body = _Body(
        b'event: response.output_item.added\ndata: {"type":"response.output_item.added","output_index":0,'
        b'"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}\n\n'
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","output_index":0,'
        b'"content_index":0,"delta":"Hel"}\n\n'
    )

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=body, headers={"content-type": "text/event-stream"})

    received: list[Any] = []

    async def consume() -> None:
        async for event in _model("gpt-5", handler).stream([Message("user", (Text("hi"),))]):
            received.append(event)

    task = asyncio.create_task(consume())
    while not received and not task.done():
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert received == [TextDelta(0, "Hel")]
    assert body.closed


async def test_store_false_conversation_on_gpt_4o_sends_no_item_ids(provider_samples: Path) -> None:
    """A tool round trip on ``gpt-4o`` through the SDK: the second request carries the
    ``function_call`` without its ``fc_…`` id, as the recorded client sent it (with ``store=false``
    the API cannot resolve that id), and a third request carries the ``message`` without its
    ``msg_…`` id. Nothing about it is reported: the ids were never needed."""
    interactions = _interactions(
        provider_samples, "test_openai_responses_model_simple_response_with_tool_call.yaml"
    )
    first, second = (i["request"]["parsed_body"] for i in interactions)
    answer = interactions[1]["response"]["parsed_body"]
    recorded = Recorded([*interactions, interactions[1]])  # the third request is answered again
    model = _model("gpt-4o", recorded)
    history = [Message("user", (Text(first["input"][0]["content"]),))]
    response = await model.generate(history, tools=_tools(first))
    call = response.message.tool_calls[0]
    assert call.provider_id is not None
    assert call.provider_id.startswith("fc_")  # kept in the history...
    history += [response.message, Message("tool", (ToolResult(call.id or "", call.name, "Potato City"),))]
    final = await model.generate(history, tools=_tools(first))
    sent = recorded.sent[1]
    assert sent["store"] is False
    assert "include" not in sent
    _same_input(sent["input"], second["input"])
    assert "id" not in sent["input"][1]  # ...but not sent
    assert model.last_request_report is not None
    assert model.last_request_report.lossless
    assert final.message.parts[0] == Text(
        answer["output"][0]["content"][0]["text"], provider_id=answer["output"][0]["id"]
    )
    history += [final.message, Message("user", (Text("And its population?"),))]
    await model.generate(history, tools=_tools(first))
    assert all("id" not in item for item in recorded.sent[2]["input"])
    assert recorded.sent[2]["input"][3] == {"role": "assistant", "content": final.message.text}
