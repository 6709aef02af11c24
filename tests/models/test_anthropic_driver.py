"""The Anthropic driver through the real ``anthropic`` SDK, answered by recorded traffic over an
httpx mock transport: whole conversations rebuilt from tether history, media blocks, streaming,
errors, content checks before any I/O, the missing-extra message."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
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
    Text,
    UnsupportedContent,
    user,
)
from tether.models import (
    Model,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ToolDefinition,
    infer_model,
)
from tether.models.anthropic import AnthropicModel, profile_for
from tether.models.wire.anthropic import decode_messages, decode_response

from .test_anthropic_wire import canonical, load_cassette, sse_body

# The SDK warns about recorded model names past their deprecation date; the traffic is still real.
pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


class Recorded:
    """Answers each request with the next recorded response; keeps every JSON body sent."""

    def __init__(self, interactions: list[dict[str, Any]]) -> None:
        self.responses = [it["response"] for it in interactions]
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(json.loads(request.content))
        recorded = self.responses[len(self.sent) - 1]
        status = recorded["status"]["code"]
        if recorded.get("parsed_body") is not None:
            return httpx2.Response(status, json=recorded["parsed_body"])
        body = recorded["body"]
        text = body["string"] if isinstance(body, dict) else body
        return httpx2.Response(status, content=text.encode(), headers={"content-type": "text/event-stream"})


def model_for(handler: Any, name: str = "claude-sonnet-4-5", **kwargs: Any) -> AnthropicModel:
    client = anthropic.AsyncAnthropic(
        api_key="test-key",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )
    return AnthropicModel(name, client=client, **kwargs)


def tools_of(body: dict[str, Any]) -> list[ToolDefinition]:
    return [
        ToolDefinition(t["name"], t.get("description", ""), t["input_schema"]) for t in body.get("tools", [])
    ]


CONVERSATIONS = [
    "test_anthropic_tool_with_thinking.yaml",
    "test_anthropic_model_thinking_part_redacted.yaml",
    "test_multiple_parallel_tool_calls.yaml",
    "test_anthropic_mixed_strict_tool_run.yaml",
    "test_anthropic_tool_output.yaml",
]


@pytest.mark.parametrize("name", CONVERSATIONS)
async def test_a_recorded_conversation_replays_through_the_sdk(provider_samples: Path, name: str) -> None:
    """Run each recorded conversation as an agent would: the history grows with the driver's own
    decoded responses plus the recorded tool results / prompts; every request the SDK sends equals
    the recorded one on roles, order, ids, pairing, thinking signatures and tool definitions."""
    interactions = load_cassette(provider_samples, name)
    recorder = Recorded(interactions)
    first = interactions[0]["request"]["parsed_body"]
    model = model_for(recorder, first["model"], thinking=first.get("thinking"))
    history, _ = decode_messages(first["messages"])
    for step, interaction in enumerate(interactions):
        body = interaction["request"]["parsed_body"]
        system = body.get("system")
        response = await model.generate(
            history,
            instructions=system if isinstance(system, str) else None,
            tools=tools_of(body),
            settings=ModelSettings(max_tokens=body["max_tokens"]),
        )
        sent = recorder.sent[step]
        assert canonical(sent["messages"]) == canonical(body["messages"]), f"step {step}"
        assert sent.get("system") == (system if isinstance(system, str) else None)
        assert sent.get("thinking") == body.get("thinking")
        assert [t["name"] for t in sent.get("tools", [])] == [t["name"] for t in body.get("tools", [])]
        assert response == decode_response(interaction["response"]["parsed_body"])
        if step + 1 < len(interactions):  # the recorded tool results / prompt that followed
            following, _ = decode_messages(interactions[step + 1]["request"]["parsed_body"]["messages"])
            history = [*history, response.message, *following[len(history) + 1 :]]
    assert len(recorder.sent) == len(interactions)


MEDIA = [
    ("test_document_binary_content_input.yaml", "document"),
    ("test_document_url_input.yaml", "document"),
    ("test_text_document_as_binary_content_input.yaml", "document"),
    ("test_image_url_input_force_download.yaml", "image"),
]


def part_from_block(block: dict[str, Any]) -> Image | Document:
    """Build the tether part a user would write for a recorded media block (not via the decoder)."""
    source = block["source"]
    kind = Image if block["type"] == "image" else Document
    if source["type"] == "url":
        return kind(url=source["url"])
    data = source["data"].encode() if source["type"] == "text" else base64.b64decode(source["data"])
    return kind(data=data, media_type=source["media_type"])


@pytest.mark.parametrize(("name", "kind"), MEDIA)
async def test_media_blocks_match_the_recorded_request(provider_samples: Path, name: str, kind: str) -> None:
    interactions = [it for it in load_cassette(provider_samples, name) if it["request"]["method"] == "POST"]
    recorder = Recorded(interactions)
    body = interactions[0]["request"]["parsed_body"]
    blocks = body["messages"][0]["content"]
    parts = [Text(b["text"]) if b["type"] == "text" else part_from_block(b) for b in blocks]
    assert any(b["type"] == kind for b in blocks)
    response = await model_for(recorder, body["model"]).generate([Message("user", tuple(parts))])
    assert recorder.sent[0]["messages"] == body["messages"]
    assert response.message.text == interactions[0]["response"]["parsed_body"]["content"][0]["text"]


async def test_streaming_replays_the_recorded_events(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_anthropic_model_thinking_part_redacted_stream.yaml")
    recorder = Recorded(interactions)
    body = interactions[0]["request"]["parsed_body"]
    model = model_for(recorder, body["model"], thinking=body["thinking"])
    history, _ = decode_messages(body["messages"])
    events = [e async for e in model.stream(history)]
    assert recorder.sent[0]["stream"] is True
    assert canonical(recorder.sent[0]["messages"]) == canonical(body["messages"])
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert all(not isinstance(e, ModelResponse) for e in events[:-1])
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == final.message.text
    assert text.startswith("I notice")
    redacted = [p for p in final.message.parts if isinstance(p, Reasoning)]
    assert len(redacted) == 2
    assert all(p.redacted and p.signature for p in redacted)
    recorded = sse_body(interactions[0])
    assert all(p.signature is not None and p.signature in recorded for p in redacted)


async def test_a_stream_cut_before_message_stop_raises_model_error(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_anthropic_model_thinking_part_redacted_stream.yaml")
    full = sse_body(interactions[0])
    cut = full[: full.index("event: message_delta")]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=cut.encode(), headers={"content-type": "text/event-stream"})

    seen: list[object] = []

    async def consume() -> None:
        async for event in model_for(handler).stream([user("hi")]):
            seen.append(event)

    with pytest.raises(ModelError, match="before message_stop"):
        await consume()
    assert seen
    assert not any(isinstance(e, ModelResponse) for e in seen)


@pytest.mark.parametrize("status", [400, 429, 529])
async def test_http_errors_become_model_http_error(status: int) -> None:
    payload = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded right now"}}

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json=payload)

    with pytest.raises(ModelHTTPError) as caught:
        await model_for(handler).generate([user("hi")])
    error = caught.value
    assert isinstance(error, RunError)
    assert error.stage == "model"
    assert (error.status, error.provider) == (status, "anthropic")
    assert "Overloaded right now" in error.body


async def test_unsupported_content_fails_before_any_request() -> None:
    calls: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(request)
        return httpx2.Response(500)

    pdf = Document(data=b"%PDF-1.4", media_type="application/pdf")
    with pytest.raises(UnsupportedContent) as caught:
        await model_for(handler, "claude-3-haiku-20240307").generate([user("a"), user("read", pdf)])
    assert (caught.value.message_index, caught.value.part_index) == (1, 1)
    archive = Document(data=b"PK", media_type="application/zip")
    with pytest.raises(UnsupportedContent, match="not application/zip"):
        await model_for(handler).generate([user(archive)])
    assert calls == []


async def test_settings_become_request_options() -> None:
    recorder = Recorded([{"response": {"status": {"code": 200}, "parsed_body": {
        "id": "msg_1", "model": "claude-sonnet-4-5", "role": "assistant", "type": "message",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "stop_sequence",
        "usage": {"input_tokens": 3, "output_tokens": 1}}}}])  # fmt: skip
    settings = ModelSettings(max_tokens=99, temperature=0.5, stop=("END",), parallel_tool_calls=False)
    tool_def = ToolDefinition("lookup", "Look up a thing", {"type": "object", "properties": {}})
    response = await model_for(recorder).generate(
        [user("hi")], instructions="Be brief.", tools=[tool_def], settings=settings
    )
    sent = recorder.sent[0]
    assert sent["max_tokens"] == 99
    assert sent["temperature"] == 0.5
    assert sent["stop_sequences"] == ["END"]
    assert sent["system"] == "Be brief."
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert sent["tools"] == [
        {
            "name": "lookup",
            "input_schema": {"type": "object", "properties": {}},
            "description": "Look up a thing",
        }
    ]
    assert response.stop_reason == "stop"
    assert response.message.provider == "anthropic"


async def test_cancelling_a_stream_closes_it() -> None:
    closed = asyncio.Event()

    class Endless(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            usage = {"input_tokens": 1, "output_tokens": 0}
            message = {"id": "m", "type": "message", "role": "assistant", "model": "claude", "content": []}
            start = {"type": "message_start", "message": {**message, "usage": usage}}
            yield f"event: message_start\ndata: {json.dumps(start)}\n\n".encode()
            block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            yield f"event: content_block_start\ndata: {json.dumps(block)}\n\n".encode()
            while True:
                delta = {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "x"},
                }
                yield f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode()
                await asyncio.sleep(0)

        async def aclose(self) -> None:
            closed.set()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=Endless(), headers={"content-type": "text/event-stream"})

    async def consume() -> None:
        async for _ in model_for(handler).stream([user("hi")]):
            pass

    task = asyncio.create_task(consume())
    for _ in range(50):
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


def test_registry_and_protocol() -> None:
    model = infer_model("anthropic:claude-sonnet-4-5", api_key="test-key")
    assert isinstance(model, AnthropicModel)
    assert isinstance(model, Model)
    assert model.name == "anthropic:claude-sonnet-4-5"
    assert model.profile == profile_for("claude-sonnet-4-5")
    assert model.profile.reasoning_replay == "same-family"
    assert model.profile.documents
    assert not profile_for("claude-3-haiku-20240307").documents
    assert profile_for("claude-3-5-haiku-latest").documents


def test_missing_sdk_names_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['anthropic'] = None\n"
        "try:\n    import tether.models.anthropic\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingExtra")
    assert "pip install 'tether[anthropic]'" in out
