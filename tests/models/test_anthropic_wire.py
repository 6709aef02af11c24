"""The Anthropic Messages wire mapping against recorded traffic: transcripts import and export
back equal, decoded responses replay into exactly the next recorded request (thinking signatures
byte for byte, tool ids and pairing), streamed events assemble into the non-streamed message."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import DecodeError, Message, Reasoning, Text, ToolCall, ToolResult
from tether.models import ModelResponse, ReasoningDelta, TextDelta, ToolCallDelta
from tether.models.wire.anthropic import (
    StreamAccumulator,
    decode_messages,
    decode_response,
    encode_messages,
)

NATIVE_BLOCKS = {
    "server_tool_use",
    "web_search_tool_result",
    "bash_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "compaction",
    "tool_addition",
    "tool_reference",
}
"""Provider-native blocks with no tether equivalent: the only things an import may drop."""


def load_cassette(samples: Path, name: str) -> list[dict[str, Any]]:
    """The interactions of one recorded Anthropic cassette."""
    data = yaml.safe_load((samples / "anthropic" / name).read_text())
    return data["interactions"]


def message_requests(samples: Path) -> list[tuple[str, int, dict[str, Any]]]:
    """Every recorded Messages request body: (file, interaction index, body)."""
    out: list[tuple[str, int, dict[str, Any]]] = []
    for path in sorted((samples / "anthropic").glob("*.yaml")):
        for index, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            body = interaction["request"].get("parsed_body")
            if isinstance(body, dict) and "messages" in body and "/messages" in interaction["request"]["uri"]:
                out.append((path.name, index, body))
    return out


def sse_body(interaction: dict[str, Any]) -> str:
    body = interaction["response"]["body"]
    return body["string"] if isinstance(body, dict) else body


def sse_events(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of a recorded server-sent event stream."""
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def canonical(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request ``messages`` list with the equivalent spellings the API accepts made one:
    string content → one text block, prompt-cache markers removed (tether sets none)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks: list[dict[str, Any]] = []
        for block in content:
            block = {k: v for k, v in block.items() if k != "cache_control"}
            if block["type"] == "tool_result" and isinstance(block.get("content"), str):
                block["content"] = [{"type": "text", "text": block["content"]}]
            blocks.append(block)
        out.append({"role": message["role"], "content": blocks})
    return out


def without_native(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``canonical`` minus provider-native blocks (and turns left empty by their removal)."""
    out: list[dict[str, Any]] = []
    for message in canonical(messages):
        blocks: list[dict[str, Any]] = []
        for block in message["content"]:
            if block["type"] in NATIVE_BLOCKS:
                continue
            if block["type"] == "tool_result" and isinstance(block.get("content"), list):
                kept = [b for b in block["content"] if b["type"] not in NATIVE_BLOCKS]
                block = {k: v for k, v in block.items() if k != "content"}
                if kept:
                    block["content"] = kept
            blocks.append(block)
        if blocks:
            out.append({"role": message["role"], "content": blocks})
    return out


# -- transcripts: import, export back -----------------------------------------------------------
def test_every_recorded_request_imports_and_exports_back(provider_samples: Path) -> None:
    requests = message_requests(provider_samples)
    assert len(requests) >= 60
    lossless = 0
    for name, index, body in requests:
        messages, report = decode_messages(body["messages"])
        encoded, out_report = encode_messages(messages)
        where = f"{name}[{index}]"
        assert out_report.lossless, (where, out_report.losses)
        for loss in report.losses:  # only provider-native blocks may be lost, and they are named
            assert loss.kind == "dropped", where
            assert any(kind in loss.what for kind in NATIVE_BLOCKS) or loss.what == "system message", where
        if report.lossless:
            lossless += 1
            assert canonical(encoded) == canonical(body["messages"]), where
        else:
            assert canonical(encoded) == without_native(body["messages"]), where
    assert lossless >= 45


def test_tool_result_without_text_keeps_its_error_flag_and_name() -> None:
    transcript = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": True},
                {"type": "text", "text": "try again"},
            ],
        },
    ]
    messages, report = decode_messages(transcript)
    assert report.lossless
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    result = messages[2].parts[0]
    assert result == ToolResult("toolu_1", "f", (Text("boom"),), failed=True)
    encoded, _ = encode_messages(messages)
    assert encoded[2]["content"][0]["is_error"] is True
    assert [b["type"] for b in encoded[2]["content"]] == ["tool_result", "text"]


# -- responses replayed into the next request --------------------------------------------------
REPLAYS = [
    "test_anthropic_tool_with_thinking.yaml",
    "test_anthropic_model_thinking_part_redacted.yaml",
    "test_multiple_parallel_tool_calls.yaml",
    "test_anthropic_mixed_strict_tool_run.yaml",
    "test_anthropic_tool_output.yaml",
    "test_anthropic_memory_tool.yaml",
]


def replay_conversation(interactions: list[dict[str, Any]]) -> int:
    """Decode each recorded response, put it in the conversation in place of the recorded
    assistant turn, encode, and compare with the next recorded request. Returns comparisons."""
    compared = 0
    for step in range(len(interactions) - 1):
        this = interactions[step]["request"]["parsed_body"]["messages"]
        following = interactions[step + 1]["request"]["parsed_body"]["messages"]
        response = decode_response(interactions[step]["response"]["parsed_body"])
        before, _ = decode_messages(this)
        after, _ = decode_messages(following)
        slot = len(before)
        assert after[slot].role == "assistant"
        rebuilt = [*after[:slot], response.message, *after[slot + 1 :]]
        encoded, report = encode_messages(rebuilt)
        assert report.lossless, report.losses
        assert canonical(encoded) == canonical(following)
        compared += 1
    return compared


@pytest.mark.parametrize("name", REPLAYS)
def test_decoded_response_replays_into_the_next_recorded_request(provider_samples: Path, name: str) -> None:
    assert replay_conversation(load_cassette(provider_samples, name)) >= 1


def test_thinking_signature_survives_byte_for_byte(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_anthropic_tool_with_thinking.yaml")
    recorded = interactions[0]["response"]["parsed_body"]["content"][0]
    response = decode_response(interactions[0]["response"]["parsed_body"])
    reasoning = response.message.parts[0]
    assert reasoning == Reasoning(recorded["thinking"], signature=recorded["signature"], provider="anthropic")
    call = response.message.parts[2]
    assert call == ToolCall("toolu_01YGzqpRE16Vricda3Aqcejo", "get_user_country", "{}")
    assert response.stop_reason == "tool_calls"
    assert response.usage.input_tokens == 398
    assert response.usage.output_tokens == 155
    assert response.message.response_id == "msg_01WvueFjZVbHcj4H4zUzeGv2"
    sent = interactions[1]["request"]["parsed_body"]["messages"][1]["content"][0]
    encoded, _ = encode_messages([response.message])
    assert encoded[0]["content"][0]["signature"] == sent["signature"]


def test_redacted_thinking_is_replayed_as_recorded(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_anthropic_model_thinking_part_redacted.yaml")
    response = decode_response(interactions[0]["response"]["parsed_body"])
    redacted = response.message.parts[0]
    assert isinstance(redacted, Reasoning)
    assert redacted.redacted
    assert redacted.text == ""
    sent = interactions[1]["request"]["parsed_body"]["messages"][1]["content"][0]
    assert sent["type"] == "redacted_thinking"
    assert redacted.signature == sent["data"]


def test_usage_counts_cache_reads_and_writes() -> None:
    body = {
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "max_tokens",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
    }
    response = decode_response(body)
    assert response.stop_reason == "length"
    assert response.usage.input_tokens == 130
    assert (response.usage.cache_read_tokens, response.usage.cache_write_tokens) == (100, 20)


STOP_REASONS = [
    ("end_turn", "stop"),
    ("stop_sequence", "stop"),
    ("tool_use", "tool_calls"),
    ("refusal", "content_filter"),
    ("pause_turn", "pause_turn"),
]


@pytest.mark.parametrize(("raw", "normalized"), STOP_REASONS)
def test_stop_reasons_are_normalized(raw: str, normalized: str) -> None:
    assert decode_response({"content": [], "stop_reason": raw}).stop_reason == normalized


# -- streaming -----------------------------------------------------------------------------------
def stream_result(events: list[dict[str, Any]]) -> tuple[list[Any], ModelResponse]:
    accumulator = StreamAccumulator()
    deltas: list[Any] = []
    for event in events:
        deltas.extend(accumulator.feed(event))
    assert accumulator.finished
    return deltas, accumulator.result()


def test_recorded_redacted_thinking_stream_assembles(provider_samples: Path) -> None:
    interactions = load_cassette(provider_samples, "test_anthropic_model_thinking_part_redacted_stream.yaml")
    events = sse_events(sse_body(interactions[0]))
    deltas, response = stream_result(events)
    parts = response.message.parts
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [type(p) for p in parts] == [Reasoning, Reasoning, Text]
    assert [p.signature for p in parts[:2]] == [b["data"] for b in starts[:2]]
    assert all(isinstance(p, Reasoning) and p.redacted for p in parts[:2])
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert text == response.message.text
    assert text
    assert {d.index for d in deltas if isinstance(d, TextDelta)} == {2}
    final_usage = next(e for e in events if e["type"] == "message_delta")["usage"]
    assert response.usage.output_tokens == final_usage["output_tokens"]
    assert response.message.response_id == events[0]["message"]["id"]


def test_every_recorded_stream_assembles_like_its_body(provider_samples: Path) -> None:
    """For every recorded stream: the accumulator's body decodes to the streamed message and the
    text deltas add up to the final text of each part."""
    count = 0
    for path in sorted((provider_samples / "anthropic").glob("*.yaml")):
        for interaction in yaml.safe_load(path.read_text())["interactions"]:
            body = interaction["response"].get("body")
            if not body or "/messages" not in interaction["request"]["uri"]:
                continue
            deltas, response = stream_result(sse_events(sse_body(interaction)))
            count += 1
            for index, part in enumerate(response.message.parts):
                if isinstance(part, Text):
                    pieces = [d.text for d in deltas if isinstance(d, TextDelta) and d.index == index]
                    assert "".join(pieces) == part.text, path.name
                if isinstance(part, ToolCall):
                    pieces = [
                        d.arguments for d in deltas if isinstance(d, ToolCallDelta) and d.index == index
                    ]
                    assert json.loads("".join(pieces) or "{}") == json.loads(part.arguments), path.name
    assert count >= 5


def events_for(body: dict[str, Any], cuts: list[int]) -> list[dict[str, Any]]:
    """The stream events Anthropic sends for ``body``, each text cut into pieces at ``cuts``."""

    def split(text: str) -> list[str]:
        points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
        return [text[a:b] for a, b in itertools.pairwise(points) if b > a]

    message = {k: v for k, v in body.items() if k != "content"}
    message.update(content=[], stop_reason=None, usage={"input_tokens": body["usage"]["input_tokens"]})
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}]
    for index, block in enumerate(body["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            for piece in split(block["text"]):
                delta = {"type": "text_delta", "text": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            for piece in split(block["thinking"]):
                delta = {"type": "thinking_delta", "thinking": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
            delta = {"type": "signature_delta", "signature": block["signature"]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind == "tool_use":
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            for piece in split(json.dumps(block["input"], separators=(",", ":"))):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    usage = {"output_tokens": body["usage"]["output_tokens"]}
    events.append({"type": "message_delta", "delta": {"stop_reason": body["stop_reason"]}, "usage": usage})
    events.append({"type": "message_stop"})
    return events


STREAM_EQUIVALENCE = [
    ("test_anthropic_tool_with_thinking.yaml", 0),
    ("test_multiple_parallel_tool_calls.yaml", 0),
    ("test_anthropic_model_thinking_part_redacted.yaml", 0),
    ("test_anthropic_mixed_strict_tool_run.yaml", 1),
]


@pytest.mark.parametrize(("name", "index"), STREAM_EQUIVALENCE)
@given(cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
@settings(max_examples=50)  # four recorded bodies; the cut points are all that varies
def test_streamed_assembly_equals_the_non_streamed_decode(
    provider_samples: Path, name: str, index: int, cuts: list[int]
) -> None:
    body = load_cassette(provider_samples, name)[index]["response"]["parsed_body"]
    _, streamed = stream_result(events_for(body, cuts))
    expected = decode_response(body)
    assert streamed.message.parts == expected.message.parts
    assert streamed.stop_reason == expected.stop_reason
    assert streamed.message.response_id == expected.message.response_id


def test_a_stream_cut_mid_arguments_keeps_them_verbatim() -> None:
    accumulator = StreamAccumulator()
    start = {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}
    accumulator.feed({"type": "message_start", "message": {"id": "m", "content": [], "usage": {}}})
    accumulator.feed({"type": "content_block_start", "index": 0, "content_block": start})
    delta = {"type": "input_json_delta", "partial_json": '{"city": "Par'}
    # the arguments go out when the block stops, as the final call holds them (ADR 0022)
    assert accumulator.feed({"type": "content_block_delta", "index": 0, "delta": delta}) == []
    assert not accumulator.finished
    call = accumulator.result().message.parts[0]
    assert isinstance(call, ToolCall)
    assert call.arguments == '{"city": "Par'
    assert call.truncated
    encoded, report = encode_messages([Message("assistant", (call,))])
    assert encoded[0]["content"][0]["input"] == {"truncated_args": '{"city": "Par'}
    assert [loss.what for loss in report.losses] == ["tool call arguments"]


def test_reasoning_deltas_point_at_their_part() -> None:
    accumulator = StreamAccumulator()
    accumulator.feed({"type": "message_start", "message": {"id": "m", "content": [], "usage": {}}})
    block = {"type": "thinking", "thinking": "", "signature": ""}
    accumulator.feed({"type": "content_block_start", "index": 0, "content_block": block})
    out = accumulator.feed(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}
    )
    assert out == [ReasoningDelta(0, "hm")]


# -- malformed transcripts -----------------------------------------------------------------------
def image(source: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "image", "source": source}]}]


MALFORMED = [
    ({"role": "user"}, "$"),
    ([{"role": "robot", "content": "x"}], "$[0].role"),
    ([{"role": "user", "content": 3}], "$[0].content"),
    ([{"role": "user", "content": [{"text": "x"}]}], "$[0].content[0].type"),
    (
        [{"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}],
        "$[0].content[0].id",
    ),
    (image({"type": "base64", "media_type": "image/png", "data": "%%%"}), "$[0].content[0].source.data"),
    (image({"type": "file"}), "$[0].content[0].source.type"),
    (
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": [1]}]}],
        "$[0].content[0].input",
    ),
]


@pytest.mark.parametrize(("transcript", "path"), MALFORMED)
def test_malformed_transcripts_name_the_path(transcript: object, path: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode_messages(transcript)
    assert caught.value.path == path


def test_streamed_arguments_are_the_final_calls_arguments() -> None:
    """Anthropic streams ``{"city": "Paris"}`` (with spaces); the call holds the object encoded
    as the non-streamed response gives it. The one arguments delta is that text."""
    accumulator = StreamAccumulator()
    start = {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}
    accumulator.feed({"type": "message_start", "message": {"id": "m", "content": [], "usage": {}}})
    assert accumulator.feed({"type": "content_block_start", "index": 0, "content_block": start}) == [
        ToolCallDelta(0, id="toolu_9", name="f")
    ]
    for piece in ('{"city"', ': "Par', 'is"}'):
        delta = {"type": "input_json_delta", "partial_json": piece}
        assert accumulator.feed({"type": "content_block_delta", "index": 0, "delta": delta}) == []
    stopped = accumulator.feed({"type": "content_block_stop", "index": 0})
    call = accumulator.result().message.parts[0]
    assert isinstance(call, ToolCall)
    assert stopped == [ToolCallDelta(0, arguments=call.arguments)]
    assert call.arguments == '{"city":"Paris"}'
