"""The OpenAI Chat driver through the real ``openai`` SDK, answered by recorded provider traffic over
an httpx mock transport: requests rebuilt from tether history, errors, retries, cancellation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tether import (
    Document,
    Image,
    Message,
    ModelError,
    ModelHTTPError,
    Reasoning,
    RunError,
    ToolCall,
    ToolResult,
    UnsupportedContent,
    UserError,
    tool,
    user,
)
from tether.models import (
    Model,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    infer_model,
)
from tether.models.openai_chat import OpenAIChatModel, chat_profile
from tether.models.wire.openai_chat import decode_messages

from .test_openai_chat_wire import canonical, load_cassette, response_text


class Recorded:
    """Answers each POST with the next recorded response; keeps every JSON body sent."""

    def __init__(self, interactions: list[dict[str, Any]]) -> None:
        self.responses = [it["response"] for it in interactions]
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(json.loads(request.content))
        recorded = self.responses[len(self.sent) - 1]
        status = recorded["status"]["code"]
        if recorded.get("parsed_body") is not None:
            return httpx2.Response(status, json=recorded["parsed_body"])
        text = response_text({"response": recorded})
        return httpx2.Response(status, content=text.encode(), headers={"content-type": "text/event-stream"})


def model_for(handler: Any, name: str = "gpt-4o", **kwargs: Any) -> OpenAIChatModel:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIChatModel(name, api_key="sk-test", http_client=client, **kwargs)


def tools_of(body: dict[str, Any]) -> list[ToolDefinition]:
    return [
        ToolDefinition(
            t["function"]["name"],
            t["function"].get("description", ""),
            t["function"]["parameters"],
            t["function"].get("strict"),
        )
        for t in body.get("tools", [])
    ]


def tool_shapes(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Tool definitions with an empty description treated as absent (provider-equivalent)."""
    out = []
    for t in body.get("tools", []):
        function = {k: v for k, v in t["function"].items() if not (k == "description" and v == "")}
        out.append({"type": t["type"], "function": function})
    return out


async def run_conversation(path: Path, *, stream: bool) -> tuple[Recorded, list[Message]]:
    """Drive the recorded conversation through the driver: each model turn comes from the SDK,
    each tool result / user turn from the recorded next request (what the tools returned)."""
    interactions = load_cassette(path)
    recorded = Recorded(interactions)
    first = interactions[0]["request"]["parsed_body"]
    model = model_for(recorded, first["model"])
    leading = [e for e in first["messages"] if e["role"] == "system"]
    instructions = leading[0]["content"] if leading else None
    history, _ = decode_messages([e for e in first["messages"] if e["role"] != "system"])
    tools = tools_of(first)
    for k in range(len(interactions)):
        if k:
            sent = len(recorded.sent[-1]["messages"]) + 1  # what we sent plus the model's answer
            tail, _ = decode_messages(interactions[k]["request"]["parsed_body"]["messages"][sent:])
            names = {c.id: c.name for m in history for c in m.tool_calls}
            for message in tail:
                if message.role == "tool":
                    message = tool(
                        *(ToolResult(r.call_id, names[r.call_id], r.content) for r in message.tool_results)
                    )
                history.append(message)
        if stream:
            events = [e async for e in model.stream(history, instructions=instructions, tools=tools)]
            response = events[-1]
            assert isinstance(response, ModelResponse)
        else:
            response = await model.generate(history, instructions=instructions, tools=tools)
        history.append(response.message)
    return recorded, history


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("openai-chat/test_multiple_agent_tool_calls.yaml", False),
        ("openai-chat/test_openai_instructions_with_tool_calls_keep_instructions.yaml", False),
        ("openai-chat/test_document_as_binary_content_input_with_tool.yaml", False),
        ("openai-chat/test_openai_tool_output.yaml", False),
        ("openai-chat/test_run_stream_sync_streams_real_model.yaml", True),
        ("groq/test_image_as_binary_content_tool_response.yaml", False),
    ],
)
async def test_recorded_conversations_replay_through_the_sdk(
    provider_samples: Path, name: str, stream: bool
) -> None:
    interactions = load_cassette(provider_samples / name)
    recorded, history = await run_conversation(provider_samples / name, stream=stream)
    assert len(recorded.sent) == len(interactions)
    for sent, interaction in zip(recorded.sent, interactions, strict=True):
        expected = interaction["request"]["parsed_body"]
        assert [canonical(e) for e in sent["messages"]] == [canonical(e) for e in expected["messages"]]
        assert sent["model"] == expected["model"]
        assert tool_shapes(sent) == tool_shapes(expected)
        assert bool(sent.get("stream")) == bool(expected.get("stream"))
    last = history[-1]
    assert last.role == "assistant"
    assert last.stop_reason in ("stop", "tool_calls")
    assert last.usage is not None
    assert last.usage.input_tokens > 0


async def test_streamed_deltas_then_the_final_response(provider_samples: Path) -> None:
    path = provider_samples / "openai-chat/test_run_stream_sync_streams_real_model.yaml"
    interactions = load_cassette(path)
    model = model_for(Recorded(interactions[1:]), "gpt-4o-mini")
    history, _ = decode_messages(interactions[1]["request"]["parsed_body"]["messages"])
    events = [e async for e in model.stream(history)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The capital of the UK is London."
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.text == "The capital of the UK is London."
    assert final.usage.input_tokens == 78
    calls = await collect_calls(interactions[:1])
    assert calls == [ToolCallDelta(0, "call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", ""), '{"country":"UK"}']


async def collect_calls(interactions: list[dict[str, Any]]) -> list[Any]:
    model = model_for(Recorded(interactions), "gpt-4o-mini")
    events = [e async for e in model.stream([user("capital?")])]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    return [deltas[0], "".join(d.arguments for d in deltas)]


@pytest.mark.parametrize(
    ("name", "index", "status", "snippet", "provider"),
    [
        (
            "openai-chat/test_openai_o1_mini_system_role[developer].yaml",
            0,
            400,
            "unsupported_value",
            "openai",
        ),
        ("groq/test_tool_use_failed_error.yaml", 0, 400, "tool_use_failed", "groq"),
    ],
)
async def test_http_failures_become_model_http_errors(
    provider_samples: Path, name: str, index: int, status: int, snippet: str, provider: str
) -> None:
    interactions = load_cassette(provider_samples / name)[index : index + 1]
    model = model_for(Recorded(interactions), "m", provider=provider, base_url="https://example.invalid/v1")
    with pytest.raises(ModelHTTPError) as error:
        await model.generate([user("hello")])
    assert error.value.status == status
    assert error.value.provider == provider
    assert snippet in error.value.body
    assert isinstance(error.value, RunError)
    assert error.value.stage == "model"


async def test_default_headers_reach_the_server(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples / "groq/test_extra_headers.yaml")
    seen: list[str | None] = []
    recorded = Recorded(interactions)

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("x-tether-test"))
        return recorded(request)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = OpenAIChatModel(
        "llama-3.3-70b-versatile",
        provider="groq",
        base_url="https://api.groq.com/openai/v1",
        api_key="gsk-test",
        http_client=client,
        default_headers={"x-tether-test": "1"},
    )
    response = await model.generate([user("hello")])
    assert seen == ["1"]
    assert response.message.text == "Hello! How can I assist you today?"
    assert response.message.provider == "groq"


async def test_the_sdk_retry_policy_applies() -> None:
    attempts: list[int] = []

    def flaky(request: httpx2.Request) -> httpx2.Response:
        attempts.append(1)
        if len(attempts) < 3:
            return httpx2.Response(503, json={"error": {"message": "overloaded"}})
        return httpx2.Response(
            200,
            json={
                "id": "c",
                "model": "m",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
                ],
            },
        )

    model = model_for(flaky, max_retries=2)
    response = await model.generate([user("hi")])
    assert response.message.text == "ok"
    assert len(attempts) == 3
    attempts.clear()
    with pytest.raises(ModelHTTPError) as error:
        await model_for(flaky, max_retries=0).generate([user("hi")])
    assert error.value.status == 503


async def test_unsupported_content_is_refused_before_any_request() -> None:
    sent: list[httpx2.Request] = []

    def never(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    history = [user("read this"), user("and this", Document(url="https://example.com/a.pdf"))]
    with pytest.raises(UnsupportedContent) as error:
        await model_for(never).generate(history)
    assert (error.value.message_index, error.value.part_index) == (1, 1)
    local = model_for(never, "smollm2", provider="llama-cpp", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UnsupportedContent):
        await local.generate([user(Image(data=b"\x89PNG", media_type="image/png"))])
    with pytest.raises(UnsupportedContent):
        [e async for e in local.stream([user(Image(data=b"\x89PNG", media_type="image/png"))])]
    assert sent == []


def _sse(*payloads: dict[str, Any]) -> list[bytes]:
    return [f"data: {json.dumps(p)}\n\n".encode() for p in payloads]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def test_cancelling_mid_stream_closes_the_http_stream() -> None:
    closed = asyncio.Event()
    first_sent = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            for piece in _sse(_chunk({"role": "assistant", "content": "Hel"})):
                yield piece
            first_sent.set()
            await asyncio.sleep(3600)  # the model "thinks" forever
        finally:
            closed.set()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    model = model_for(handler)
    seen: list[Any] = []

    async def consume() -> None:
        async for event in model.stream([user("hi")]):
            seen.append(event)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_sent.wait(), 10)
    while not seen:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(closed.wait(), 10)
    assert seen == [TextDelta(0, "Hel")]


async def test_a_stream_cut_short_is_a_model_error() -> None:
    async def dropped() -> AsyncIterator[bytes]:
        for piece in _sse(_chunk({"role": "assistant", "content": "Hel"})):
            yield piece
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")

    async def truncated() -> AsyncIterator[bytes]:
        for piece in _sse(_chunk({"role": "assistant", "content": "Hel"})):
            yield piece

    for body in (dropped, truncated):

        def handler(request: httpx2.Request, body: Any = body) -> httpx2.Response:
            return httpx2.Response(200, content=body(), headers={"content-type": "text/event-stream"})

        events: list[Any] = []

        async def consume(handler: Any = handler, events: list[Any] = events) -> None:
            async for event in model_for(handler, max_retries=0).stream([user("hi")]):
                events.append(event)

        with pytest.raises(ModelError) as error:
            await consume()
        assert events == [TextDelta(0, "Hel")]
        assert not isinstance(error.value, ModelHTTPError)


async def test_connection_refused_is_a_model_error() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", provider="llama-cpp", max_retries=0)
    with pytest.raises(ModelError) as error:
        await model.generate([user("hi")])
    assert "llama-cpp" in str(error.value)


def test_settings_map_onto_the_request() -> None:
    model = OpenAIChatModel("gpt-4o", api_key="sk-test")
    settings = ModelSettings(
        max_tokens=5,
        temperature=0.0,
        seed=7,
        stop=("x",),
        parallel_tool_calls=False,
        extra={"tool_choice": "required"},
    )
    tools = [ToolDefinition("f", "does f", {"type": "object", "properties": {}}, strict=True)]
    kwargs = model.request([user("hi")], instructions="be brief", tools=tools, settings=settings)
    assert kwargs["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert kwargs["max_completion_tokens"] == 5
    assert (kwargs["temperature"], kwargs["seed"], kwargs["stop"]) == (0.0, 7, ["x"])
    assert kwargs["parallel_tool_calls"] is False
    assert kwargs["tool_choice"] == "required"
    assert "extra_body" not in kwargs
    assert model.request([user("hi")], tools=tools)["tool_choice"] == "auto"
    assert kwargs["tools"][0]["function"] == {
        "name": "f",
        "description": "does f",
        "parameters": {"type": "object", "properties": {}},
        "strict": True,
    }
    compatible = OpenAIChatModel("llama3", base_url="http://127.0.0.1:1/v1", provider="ollama")
    assert "max_tokens" in compatible.request([user("hi")], settings=ModelSettings(max_tokens=5))


async def test_registry_profiles_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    model = infer_model("openai:gpt-4o", api_key="sk-test")
    assert isinstance(model, OpenAIChatModel)
    assert isinstance(model, Model)
    assert model.name == "openai:gpt-4o"
    assert model.profile.documents
    assert not infer_model("openai:gpt-3.5-turbo", api_key="k").profile.images
    assert chat_profile("ollama", "llama3").image_urls is False
    assert chat_profile("somewhere", "x").provider == "somewhere"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = OpenAIChatModel("gpt-4o")  # constructing needs no key; the first request does
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        await keyless.generate([user("x")])
    with pytest.raises(UserError):
        OpenAIChatModel("")


async def test_streamed_provider_extensions_survive_the_sdk() -> None:
    """Fields the SDK does not model (``reasoning``, Gemini's ``extra_content``) reach the wire mapping."""
    signature = {"google": {"thought_signature": "c2ln"}}
    chunks = [
        _chunk({"role": "assistant", "reasoning": "think "}),
        _chunk({"reasoning": "more"}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "",
                        "type": "function",
                        "function": {"name": "now", "arguments": "{}"},
                        "extra_content": signature,
                    }
                ]
            }
        ),
        _chunk({}, "tool_calls"),
        {"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}},
    ]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200,
            content=b"".join(_sse(*chunks)) + b"data: [DONE]\n\n",
            headers={"content-type": "text/event-stream"},
        )

    events = [
        e
        async for e in model_for(handler, provider="groq", base_url="https://x.invalid/v1").stream(
            [user("t?")]
        )
    ]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    reasoning, call = final.message.parts
    assert isinstance(reasoning, Reasoning)
    assert reasoning.text == "think more"
    assert reasoning.provider == "groq"
    assert isinstance(call, ToolCall)
    assert call.signature == "c2ln"
    assert call.id
    assert call.id.startswith("call_")
    assert final.usage.input_tokens == 9
    assert final.stop_reason == "tool_calls"
