"""The Gemini driver through the real ``google-genai`` SDK (an httpx client with a mock transport
in its ``HttpOptions``), answered by recorded traffic: whole conversations rebuilt from tether
history with thought signatures byte for byte, media parts, streaming, errors, content checks
before any I/O, the missing-extra message."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google import genai

from tether import (
    Document,
    Image,
    Message,
    ModelError,
    ModelHTTPError,
    RunError,
    Text,
    ToolCall,
    ToolResult,
    UnsupportedContent,
    assistant,
    tool,
    user,
)
from tether.models import Model, ModelResponse, ModelSettings, ToolDefinition, infer_model
from tether.models.gemini import GeminiModel, profile_for
from tether.models.wire.gemini import decode_messages, decode_response

from .test_gemini_wire import b64bytes, canonical, load_cassette, next_history, response_of


class Recorded:
    """Answers each request with the next recorded response; keeps every (url, JSON body) sent."""

    def __init__(self, interactions: list[dict[str, Any]]) -> None:
        self.responses = [it["response"] for it in interactions]
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((str(request.url), json.loads(request.content)))
        recorded = self.responses[len(self.sent) - 1]
        status = recorded["status"]["code"]
        if recorded.get("parsed_body") is not None:
            return httpx.Response(status, json=recorded["parsed_body"])
        body = recorded["body"]
        text = body["string"] if isinstance(body, dict) else body
        return httpx.Response(status, content=text.encode(), headers={"content-type": "text/event-stream"})


def model_for(handler: Any, name: str = "gemini-2.5-flash") -> GeminiModel:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = genai.Client(api_key="test-key", http_options={"httpx_async_client": http})
    return GeminiModel(name, client=client)


def model_name(interaction: dict[str, Any]) -> str:
    return interaction["request"]["uri"].rsplit("/", 1)[1].split(":", 1)[0]


def tools_of(body: dict[str, Any]) -> list[ToolDefinition]:
    out: list[ToolDefinition] = []
    for entry in body.get("tools", []):
        for f in entry.get("functionDeclarations", []):
            schema = f.get("parameters_json_schema") or f.get("parametersJsonSchema") or {"type": "object"}
            out.append(ToolDefinition(f["name"], f.get("description", ""), schema))
    return out


def instructions_of(body: dict[str, Any]) -> str | None:
    system = body.get("systemInstruction")
    return "".join(p["text"] for p in system["parts"]) if system else None


CONVERSATIONS = [
    "test_google_instructions_only_with_tool_calls.yaml",
    "test_google_text_output_function.yaml",
    "test_google_prompted_output_with_tools.yaml",
    "test_google_tool_config_any_with_tool_without_args.yaml",
    "test_google_streaming_tool_call_thought_signature.yaml",
    "test_google_model_iter_stream.yaml",
]


@pytest.mark.parametrize("name", CONVERSATIONS)
async def test_a_recorded_conversation_replays_through_the_sdk(provider_samples: Path, name: str) -> None:
    """Run each recorded conversation as an agent would, non-streamed or streamed as recorded:
    every request the SDK sends equals the recorded one (contents, signatures byte for byte,
    call/response pairing under tether's ids, system instruction, function declarations)."""
    interactions = load_cassette(provider_samples, name)
    recorder = Recorded(interactions)
    model = model_for(recorder, model_name(interactions[0]))
    history, _ = decode_messages(interactions[0]["request"]["parsed_body"]["contents"])
    ids: dict[str, str] = {}
    for step, interaction in enumerate(interactions):
        body = interaction["request"]["parsed_body"]
        kwargs: dict[str, Any] = {"instructions": instructions_of(body), "tools": tools_of(body)}
        if "streamGenerateContent" in interaction["request"]["uri"]:
            events = [e async for e in model.stream(history, **kwargs)]
            response = events[-1]
            assert all(not isinstance(e, ModelResponse) for e in events[:-1])
        else:
            response = await model.generate(history, **kwargs)
        assert isinstance(response, ModelResponse)
        url, sent = recorder.sent[step]
        method = interaction["request"]["uri"].split(":")[-1].split("?")[0]
        assert url.split("?")[0].endswith(f"{model_name(interaction)}:{method}")
        assert sent["contents"] == [dict(c) for c in canonical_sdk(body["contents"], ids)], f"step {step}"
        assert sent.get("systemInstruction") == body.get("systemInstruction")
        sent_names = [f["name"] for t in sent.get("tools", []) for f in t["functionDeclarations"]]
        assert sent_names == [t.name for t in kwargs["tools"]]
        expected = response_of(interaction)
        assert response.message.parts == expected.message.parts
        assert response.stop_reason == expected.stop_reason
        assert response.usage == expected.usage
        if step + 1 < len(interactions):
            following, _ = decode_messages(interactions[step + 1]["request"]["parsed_body"]["contents"])
            history, new_ids = next_history(history, response, following)
            ids.update(new_ids)
    assert len(recorder.sent) == len(interactions)


def canonical_sdk(contents: list[dict[str, Any]], ids: dict[str, str]) -> list[dict[str, Any]]:
    """The recorded contents as the SDK sends them for tether's history: same JSON, call ids
    renamed to tether's (Gemini gave none; pydantic-ai made its own when it recorded)."""
    out: list[dict[str, Any]] = []
    for content in contents:
        parts: list[dict[str, Any]] = []
        for part in content["parts"]:
            part = dict(part)
            for key in ("functionCall", "functionResponse"):
                if key in part and "id" in part[key]:
                    part[key] = {**part[key], "id": ids.get(part[key]["id"], part[key]["id"])}
            parts.append(part)
        out.append({**content, "parts": parts})
    return out


def test_signatures_reach_the_wire_as_the_same_bytes(provider_samples: Path) -> None:
    """Decoded from a raw body (standard base64) or from the SDK (URL-safe), a signature is the
    same bytes; the recorded next request carries exactly those bytes."""
    interactions = load_cassette(provider_samples, "test_google_instructions_only_with_tool_calls.yaml")
    raw = interactions[0]["response"]["parsed_body"]["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"
    ]
    sent = interactions[1]["request"]["parsed_body"]["contents"][1]["parts"][0]["thoughtSignature"]
    assert raw != sent  # two alphabets on the recorded wire
    assert b64bytes(raw) == b64bytes(sent)
    assert base64.urlsafe_b64encode(b64bytes(raw)).decode() == sent


MEDIA = [
    "test_google_model_image_url_input.yaml",
    "test_google_model_document_url_input.yaml",
    "test_google_url_input[ImageUrl].yaml",
    "test_google_model_youtube_video_url_input.yaml",
]


def part_for(raw: dict[str, Any]) -> Text | Image | Document:
    """The tether part a user would write for a recorded part (not via the decoder)."""
    if "text" in raw:
        return Text(raw["text"])
    if "inlineData" in raw:
        inline = raw["inlineData"]
        data = b64bytes(inline["data"])
        kind = Image if inline["mimeType"].startswith("image/") else Document
        return kind(data=data, media_type=inline["mimeType"])
    file = raw["fileData"]
    uri, mime = file.get("fileUri") or file["file_uri"], file.get("mimeType") or file.get("mime_type")
    return (
        Image(url=uri, media_type=mime) if mime.startswith("image/") else Document(url=uri, media_type=mime)
    )


@pytest.mark.parametrize("name", MEDIA)
async def test_media_parts_match_the_recorded_request(provider_samples: Path, name: str) -> None:
    (interaction,) = load_cassette(provider_samples, name)
    recorder = Recorded([interaction])
    body = interaction["request"]["parsed_body"]
    parts = tuple(part_for(p) for p in body["contents"][0]["parts"])
    response = await model_for(recorder, model_name(interaction)).generate([Message("user", parts)])
    assert canonical(recorder.sent[0][1]["contents"]) == canonical(body["contents"])
    recorded_text = interaction["response"]["parsed_body"]["candidates"][0]["content"]["parts"][0]["text"]
    assert response.message.text == recorded_text


@pytest.mark.parametrize(("status", "reason"), [(400, "INVALID_ARGUMENT"), (429, "RESOURCE_EXHAUSTED")])
async def test_http_errors_become_model_http_error(status: int, reason: str) -> None:
    payload = {"error": {"code": status, "message": "Quota or shape problem", "status": reason}}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=payload)

    with pytest.raises(ModelHTTPError) as caught:
        await model_for(handler).generate([user("hi")])
    error = caught.value
    assert isinstance(error, RunError)
    assert (error.status, error.provider, error.stage) == (status, "google", "model")
    assert "Quota or shape problem" in str(error)
    assert reason in error.body or "Quota" in error.body


async def test_unsupported_content_fails_before_any_request() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(500)

    call = ToolCall("c1", "snap", "{}")
    shot = ToolResult("c1", "snap", (Image(data=b"\x89PNG", media_type="image/png"),))
    with pytest.raises(UnsupportedContent) as caught:
        await model_for(handler).generate([user("go"), assistant(call), tool(shot)])
    assert (caught.value.message_index, caught.value.part_index) == (2, 0)
    assert calls == []


async def test_a_stream_cut_before_the_finish_reason_raises_model_error(provider_samples: Path) -> None:
    interaction = load_cassette(provider_samples, "test_google_model_thinking_part_iter.yaml")[0]
    body = interaction["response"]["body"]
    text = body["string"] if isinstance(body, dict) else body
    lines = [line for line in text.splitlines() if line.startswith("data:")]
    assert len(lines) > 3
    cut = "".join(f"{line}\r\n\r\n" for line in lines[:3])  # three chunks, no finish reason

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=cut.encode(), headers={"content-type": "text/event-stream"})

    seen: list[object] = []

    async def consume() -> None:
        async for event in model_for(handler, "gemini-2.5-pro").stream([user("hi")]):
            seen.append(event)

    with pytest.raises(ModelError, match="before a finish reason"):
        await consume()
    assert seen
    assert not any(isinstance(e, ModelResponse) for e in seen)


async def test_settings_become_generation_config() -> None:
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]}}
        ],
        "responseId": "r1",
    }
    recorder = Recorded([{"response": {"status": {"code": 200}, "parsed_body": body}}])
    settings = ModelSettings(max_tokens=50, temperature=0.2, top_p=0.9, seed=7, stop=("END",))
    tools = [ToolDefinition("f", "A tool", {"type": "object", "properties": {"a": {"type": "integer"}}})]
    response = await model_for(recorder).generate(
        [user("hi")], instructions="Be brief.", tools=tools, settings=settings
    )
    sent = recorder.sent[0][1]
    assert sent["generationConfig"] == {
        "maxOutputTokens": 50,
        "temperature": 0.2,
        "topP": 0.9,
        "seed": 7,
        "stopSequences": ["END"],
    }
    assert sent["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    declaration = sent["tools"][0]["functionDeclarations"][0]
    assert declaration["name"] == "f"
    assert declaration["description"] == "A tool"
    assert response.message.tool_calls == (ToolCall("gemini-r1-0", "f", '{"a":1}'),)
    assert response.stop_reason == "tool_calls"


async def test_cancelling_a_stream_closes_it() -> None:
    closed = asyncio.Event()

    class Endless(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            while True:
                chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "index": 0}]}
                yield f"data: {json.dumps(chunk)}\r\n\r\n".encode()
                await asyncio.sleep(0)

        async def aclose(self) -> None:
            closed.set()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=Endless(), headers={"content-type": "text/event-stream"})

    received: list[object] = []

    async def consume() -> None:
        async for event in model_for(handler).stream([user("hi")]):
            received.append(event)

    task = asyncio.create_task(consume())
    for _ in range(200):
        await asyncio.sleep(0)
        if received:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert received
    assert closed.is_set()


def test_registry_and_protocol() -> None:
    model = infer_model("google:gemini-2.5-flash", api_key="test-key")
    assert isinstance(model, GeminiModel)
    assert isinstance(model, Model)
    assert model.name == "google:gemini-2.5-flash"
    assert model.profile == profile_for("gemini-2.5-flash")
    assert model.profile.reasoning_replay == "same-family"
    assert not model.profile.tool_result_media
    assert profile_for("gemini-2.0-flash").reasoning_replay == "never"


def test_missing_sdk_names_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['google.genai'] = None\n"
        "try:\n    import tether.models.gemini\n"
        "except ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("MissingExtra")
    assert "pip install 'tether[google]'" in out


def test_sdk_parts_are_converted_once_per_message() -> None:
    """Each step converts only the new messages into SDK objects; the rest come from the cache."""
    model = GeminiModel("gemini-2.5-pro", api_key="test-key")
    history = [
        user("q"),
        assistant(ToolCall("c1", "f", "{}", signature="c2ln")),
        tool(ToolResult("c1", "f", "r")),
    ]
    first = model.request(history)["contents"]
    second = model.request([*history, assistant("done"), user("more")])["contents"]
    assert second[1].parts[0] is first[1].parts[0]
    assert second[1].parts[0].thought_signature == b"sig"
    assert len(second) == 5


async def test_an_empty_answer_keeps_the_next_request_alternating(provider_samples: Path) -> None:
    """Gemini answers HTTP 200 with a model turn that is only ``{"text": ""}``; the next request
    the driver builds has no two user turns in a row, and its report says what happened."""
    first = load_cassette(provider_samples, "test_google_model_top_p.yaml")[0]
    empty = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]}
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=empty if len(sent) == 1 else first["response"]["parsed_body"])

    model = model_for(answer, "gemini-1.5-flash")
    history = [user(first["request"]["parsed_body"]["contents"][0]["parts"][0]["text"])]
    response = await model.generate(history)
    assert response.message.parts == ()
    history += [response.message, user("Please answer.")]
    final = await model.generate(history)
    assert final.message.text == "The capital of France is Paris.\n"
    assert [c["role"] for c in sent[1]["contents"]] == ["user"]
    assert [p["text"] for p in sent[1]["contents"][0]["parts"]] == [history[0].text, "Please answer."]
    report = model.last_request_report
    assert report is not None
    assert [(loss.message, loss.what) for loss in report.losses] == [
        (1, "assistant message"),
        (2, "user message"),
    ]


async def test_call_ids_without_a_response_id_depend_on_the_body_only(provider_samples: Path) -> None:
    """A response without ``responseId`` gets call ids from a hash of its body. The same body
    answered twice, a second apart (different ``date`` headers), gives the same ids: the SDK's
    record of the HTTP exchange is not part of the body."""
    recorded = load_cassette(provider_samples, "test_google_tool_config_any_with_tool_without_args.yaml")[0]
    body = {k: v for k, v in recorded["response"]["parsed_body"].items() if k != "responseId"}
    dates = iter(["Tue, 01 Jul 2025 10:00:00 GMT", "Tue, 01 Jul 2025 10:00:01 GMT"])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body, headers={"date": next(dates), "x-request-id": str(id(request))})

    model = model_for(answer, "gemini-2.0-flash")
    prompt = [user("run bar for me please")]
    first = await model.generate(prompt, tools=[ToolDefinition("bar")])
    second = await model.generate(prompt, tools=[ToolDefinition("bar")])
    assert first.message.tool_calls[0].id == second.message.tool_calls[0].id
    assert first.message.tool_calls[0].id is not None
    assert first.message.tool_calls[0].id.startswith("gemini-")
    # and it is the id the wire mapping gives the body itself
    assert first.message.tool_calls == decode_response(body).message.tool_calls
