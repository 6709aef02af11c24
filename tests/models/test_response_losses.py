"""What a decoded response held that tether messages cannot keep is reported, never dropped
silently: server-side tool blocks and items, citations and annotations, audio, code execution
parts, grounding metadata. Each provider is checked non-streamed and streamed, on recorded traffic
from ../shared/provider-samples (the expected losses are read off the recording, not off the
decoder) and on hand-written payloads that follow the shapes the provider documents, where no
recording holds such an item. An ordinary response reports nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
import yaml

from tether import user
from tether.models import ModelResponse
from tether.models.anthropic import AnthropicModel
from tether.models.wire import ConversionReport
from tether.models.wire import anthropic as anthropic_wire
from tether.models.wire import gemini as gemini_wire
from tether.models.wire import openai_chat as chat_wire
from tether.models.wire import openai_responses as responses_wire
from tether.models.wire._documented import documented_loss

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")


def interactions(samples: Path, folder: str, name: str) -> list[dict[str, Any]]:
    return yaml.safe_load((samples / folder / name).read_text())["interactions"]


def body_of(interaction: dict[str, Any]) -> Any:
    return interaction["response"].get("parsed_body")


def sse_of(interaction: dict[str, Any]) -> list[dict[str, Any]]:
    body = interaction["response"]["body"]
    text = body["string"] if isinstance(body, dict) else body
    return [
        json.loads(line[5:])
        for line in text.splitlines()
        if line.startswith("data:") and line[5:].strip() != "[DONE]"
    ]


def listed(report: ConversionReport | None) -> list[tuple[int, int | None, str, str]]:
    assert report is not None
    return [(loss.message, loss.part, loss.kind, loss.what) for loss in report.losses]


def decoded(decode: Any, body: Any, **kwargs: Any) -> list[tuple[int, int | None, str, str]]:
    report = ConversionReport()
    decode(body, report=report, **kwargs)
    return listed(report)


def streamed(accumulator: Any, events: list[dict[str, Any]]) -> list[tuple[int, int | None, str, str]]:
    for event in events:
        accumulator.feed(event)
    report = ConversionReport()
    accumulator.result(report=report)
    return listed(report)


# -- Anthropic ------------------------------------------------------------------------------------
_ANTHROPIC_KEPT = {"text", "thinking", "redacted_thinking", "tool_use"}


def anthropic_expected(blocks: list[dict[str, Any]]) -> list[tuple[int, int | None, str, str]]:
    out: list[tuple[int, int | None, str, str]] = []
    for index, block in enumerate(blocks):
        if block["type"] not in _ANTHROPIC_KEPT:
            out.append((0, index, "dropped", f"{block['type']} block"))
        elif block.get("citations"):
            out.append((0, index, "dropped", "text citations"))
    return out


def anthropic_model(interaction: dict[str, Any]) -> AnthropicModel:
    response = interaction["response"]

    def handler(request: httpx2.Request) -> httpx2.Response:
        if response.get("parsed_body") is not None:
            return httpx2.Response(200, json=response["parsed_body"])
        body = response["body"]
        text = body["string"] if isinstance(body, dict) else body
        return httpx2.Response(200, content=text.encode(), headers={"content-type": "text/event-stream"})

    client = anthropic.AsyncAnthropic(
        api_key="test-key",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )
    return AnthropicModel("claude-sonnet-4-5", client=client)


async def test_anthropic_web_search_blocks_and_citations_are_reported(
    provider_samples: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (first, _) = interactions(provider_samples, "anthropic", "test_anthropic_web_search_tool.yaml")
    blocks = body_of(first)["content"]
    expected = anthropic_expected(blocks)
    kinds = {what for _, _, _, what in expected}
    assert kinds == {"server_tool_use block", "web_search_tool_result block", "text citations"}
    model = anthropic_model(first)
    assert model.last_response_report is None
    caplog.set_level(logging.WARNING, logger="tether.models")
    await model.generate([user("weather?")])
    assert listed(model.last_response_report) == expected
    await model.generate([user("weather again?")])
    assert listed(model.last_response_report) == expected
    told = [
        r.getMessage() for r in caplog.records if r.name == "tether.models" and " response " in r.getMessage()
    ]
    assert len(told) == len(kinds)  # once per kind, though both responses held each several times
    assert all(sum(f" {kind}: " in m for m in told) == 1 for kind in kinds)


async def test_anthropic_streamed_server_tool_blocks_are_reported_as_non_streamed(
    provider_samples: Path,
) -> None:
    (interaction,) = interactions(
        provider_samples, "anthropic", "test_anthropic_text_editor_code_execution_tool_stream.yaml"
    )
    events = sse_of(interaction)
    starts = [e["content_block"] for e in events if e.get("type") == "content_block_start"]
    expected = anthropic_expected(starts)
    assert any(what == "server_tool_use block" for _, _, _, what in expected)
    model = anthropic_model(interaction)
    final = [e async for e in model.stream([user("edit")])][-1]
    assert isinstance(final, ModelResponse)
    assert listed(model.last_response_report) == expected
    accumulator = anthropic_wire.StreamAccumulator()
    assert streamed(accumulator, events) == expected
    assert decoded(anthropic_wire.decode_response, accumulator.body()) == expected


def test_anthropic_streamed_citations_are_kept_for_the_report() -> None:
    """Hand-written stream following Anthropic's documented ``citations_delta`` event."""
    citation = {"type": "web_search_result_location", "url": "https://example.com", "cited_text": "x"}
    events = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude-sonnet-4-5", "content": []}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "It is sunny."}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "citations_delta", "citation": citation},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    assert streamed(anthropic_wire.StreamAccumulator(), events) == [(0, 0, "dropped", "text citations")]


async def test_an_ordinary_anthropic_response_reports_nothing(provider_samples: Path) -> None:
    for interaction in interactions(provider_samples, "anthropic", "test_anthropic_tool_with_thinking.yaml"):
        model = anthropic_model(interaction)
        await model.generate([user("hi")])
        assert listed(model.last_response_report) == []
    # tool_use blocks carrying caller {"type": "direct"}: the default, it carries nothing
    name = "test_anthropic_deferred_capability_tool_callable_without_tool_search.yaml"
    bodies = [body_of(i) for i in interactions(provider_samples, "anthropic", name) if body_of(i)]
    callers = [b.get("caller") for body in bodies for b in body.get("content", []) if b["type"] == "tool_use"]
    assert callers
    assert all(c == {"type": "direct"} for c in callers)
    for body in bodies:
        assert decoded(anthropic_wire.decode_response, body) == []
    # a call made from code execution (programmatic tool calling) is not the default: reported
    call = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "f",
        "input": {},
        "caller": {"type": "code_execution"},
    }
    body = {"content": [call], "stop_reason": "tool_use"}
    assert decoded(anthropic_wire.decode_response, body) == [(0, 0, "dropped", "tool_use caller")]


# -- OpenAI Responses -------------------------------------------------------------------------------
def responses_expected(output: list[dict[str, Any]]) -> list[tuple[int, int | None, str, str]]:
    out: list[tuple[int, int | None, str, str]] = []
    for index, item in enumerate(output):
        if item["type"] not in ("message", "reasoning", "function_call"):
            out.append((0, index, "dropped", f"{item['type']} item"))
        for entry in item.get("content") or [] if item["type"] == "message" else []:
            if entry.get("annotations"):
                out.append((0, index, "dropped", "text annotations"))
    return out


def test_responses_web_search_call_and_annotations_are_reported(provider_samples: Path) -> None:
    name = "test_openai_include_raw_annotations_non_streaming.yaml"
    for interaction in interactions(provider_samples, "openai-responses", name):
        body = body_of(interaction)
        expected = responses_expected(body["output"])
        assert {what for _, _, _, what in expected} == {"web_search_call item", "text annotations"}
        assert decoded(responses_wire.decode_response, body) == expected


@pytest.mark.parametrize(
    "name",
    [
        "test_openai_responses_model_mcp_server_tool_stream.yaml",
        "test_openai_responses_model_file_search_tool_stream.yaml",
    ],
)
def test_responses_streamed_provider_items_are_reported_as_non_streamed(
    provider_samples: Path, name: str
) -> None:
    for interaction in interactions(provider_samples, "openai-responses", name):
        if body_of(interaction) is not None:
            continue
        events = sse_of(interaction)
        done = [e for e in events if e.get("type") == "response.output_item.done"]
        output = [e["item"] for e in sorted(done, key=lambda e: e["output_index"])]
        expected = responses_expected(output)
        assert any(what.endswith("_call item") for _, _, _, what in expected)
        assert streamed(responses_wire.StreamAccumulator(), events) == expected
        assert decoded(responses_wire.decode_response, {"output": output}) == expected


def test_an_ordinary_responses_response_reports_nothing(provider_samples: Path) -> None:
    name = "test_openai_responses_model_simple_response_with_tool_call.yaml"
    bodies = [body_of(i) for i in interactions(provider_samples, "openai-responses", name) if body_of(i)]
    assert bodies
    for body in bodies:
        assert decoded(responses_wire.decode_response, body) == []


# -- OpenAI Chat ----------------------------------------------------------------------------------
# Hand-written: the ``audio`` and ``annotations`` fields of a chat.completion message as OpenAI's
# API reference documents them (no recording holds a non-empty one).
_AUDIO = {"id": "audio_1", "data": "UklGRg==", "expires_at": 1729018505, "transcript": "Hello"}
_ANNOTATION = {
    "type": "url_citation",
    "url_citation": {"start_index": 0, "end_index": 5, "title": "Example", "url": "https://example.com"},
}


def test_chat_audio_and_annotations_are_reported() -> None:
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-4o-audio-preview",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "Hello",
                    "audio": _AUDIO,
                    "annotations": [_ANNOTATION],
                },
            }
        ],
    }
    expected = [(0, None, "dropped", "audio"), (0, None, "dropped", "annotations")]
    assert decoded(chat_wire.decode_response, body) == expected
    chunks = [
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]},
        {
            "id": "chatcmpl-1",
            "choices": [{"index": 0, "delta": {"audio": {"id": "audio_1", "transcript": "He"}}}],
        },
        {
            "id": "chatcmpl-1",
            "choices": [{"index": 0, "delta": {"content": "lo", "audio": {"transcript": "llo"}}}],
        },
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"annotations": [_ANNOTATION]}}]},
        {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    accumulator = chat_wire.StreamAccumulator()
    assert streamed(accumulator, chunks) == expected
    assert accumulator.body()["choices"][0]["message"]["audio"]["transcript"] == "Hello"


def test_an_ordinary_chat_response_reports_nothing(provider_samples: Path) -> None:
    # annotations: [] and refusal: null, as the API sends them for a plain answer
    for name in ("test_openai_web_search_tool.yaml", "test_valid_response.yaml"):
        for interaction in interactions(provider_samples, "openai-chat", name):
            if body_of(interaction) is not None:
                assert decoded(chat_wire.decode_response, body_of(interaction)) == []


# -- Gemini ---------------------------------------------------------------------------------------
def test_gemini_grounding_metadata_is_reported_streamed_and_not(provider_samples: Path) -> None:
    stream, whole = interactions(provider_samples, "gemini", "test_google_model_web_search_tool_stream.yaml")
    expected = [(0, None, "dropped", "groundingMetadata")]
    assert body_of(whole)["candidates"][0]["groundingMetadata"]
    assert decoded(gemini_wire.decode_response, body_of(whole)) == expected
    chunks = sse_of(stream)
    assert any(c["candidates"][0].get("groundingMetadata") for c in chunks)
    assert streamed(gemini_wire.StreamAccumulator(), chunks) == expected


def test_gemini_code_execution_parts_and_finish_message_are_reported() -> None:
    """Hand-written: ``executableCode`` / ``codeExecutionResult`` parts and ``finishMessage`` (explaining
    a stop other than ``STOP``) as the Gemini API reference documents them."""
    parts = [
        {"text": "Let me compute."},
        {"executableCode": {"language": "PYTHON", "code": "print(2 + 2)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}},
        {"text": "It is 4."},
    ]
    candidate = {
        "content": {"role": "model", "parts": parts},
        "finishReason": "MALFORMED_FUNCTION_CALL",
        "finishMessage": "Malformed function call: print(",
    }
    expected = [
        (0, None, "dropped", "finishMessage"),
        (0, 1, "dropped", "executableCode part"),
        (0, 2, "dropped", "codeExecutionResult part"),
    ]
    assert decoded(gemini_wire.decode_response, {"candidates": [candidate], "responseId": "r1"}) == expected
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": parts[:2]}}], "responseId": "r1"},
        {"candidates": [{**candidate, "content": {"role": "model", "parts": parts[2:]}}], "responseId": "r1"},
    ]
    assert streamed(gemini_wire.StreamAccumulator(), chunks) == expected


def test_an_ordinary_gemini_response_reports_nothing(provider_samples: Path) -> None:
    # the second file's answers carry finishMessage "Model generated function call(s)." on STOP
    for name in ("test_google_model_max_tokens.yaml", "test_google_instructions_only_with_tool_calls.yaml"):
        bodies = [body_of(i) for i in interactions(provider_samples, "gemini", name) if body_of(i)]
        assert bodies
        for body in bodies:
            assert decoded(gemini_wire.decode_response, body) == []


# -- every recorded response ----------------------------------------------------------------------
_DECODERS: dict[str, tuple[str, Any, str]] = {
    "anthropic": ("anthropic", anthropic_wire.decode_response, "/messages"),
    "openai_responses": ("openai-responses", responses_wire.decode_response, "/responses"),
    "openai_chat": ("openai-chat", chat_wire.decode_response, "/chat/completions"),
    "gemini": ("gemini", gemini_wire.decode_response, "enerateContent"),
}


@pytest.mark.parametrize("fmt", list(_DECODERS))
def test_every_recorded_response_reports_only_documented_losses(provider_samples: Path, fmt: str) -> None:
    """docs/compatibility.md lists what a response can report; nothing else may appear."""
    folder, decode, uri = _DECODERS[fmt]
    seen = 0
    for path in sorted((provider_samples / folder).glob("*.yaml")):
        for interaction in yaml.safe_load(path.read_text())["interactions"]:
            body = body_of(interaction)
            if uri not in interaction["request"]["uri"] or interaction["response"]["status"]["code"] != 200:
                continue
            if not isinstance(body, dict) or body.get("object") == "response.compaction":
                continue
            report = ConversionReport()
            decode(body, report=report)
            seen += 1
            for loss in report.losses:
                assert documented_loss(fmt, loss.what, loss.kind, response=True), (path.name, loss)
    assert seen
