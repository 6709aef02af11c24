"""The OpenAI Chat wire mapping against real recorded traffic (OpenAI, Groq, Ollama, Gemini's and
Cerebras' OpenAI-compatible endpoints), plus its own contracts.

Each cassette is replayed as a conversation: the first request is imported, every recorded response
is decoded into a tether message, the next request is rebuilt from the tether history and compared
with what was really sent on the fields the provider validates. Helpers here are reused by the
driver tests.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from tether import Document, Image, Message, Reasoning, Text, ToolCall, Usage
from tether import assistant as assistant_msg
from tether import tool as tool_msg
from tether.models import Profile
from tether.models.wire.openai_chat import (
    StreamAccumulator,
    decode_messages,
    decode_response,
    encode_messages,
    iter_events,
)

PROVIDER_DIRS = ("openai-chat", "groq", "ollama")
_THINK = re.compile(r"^<think>(.*?)</think>\s*", re.S)


# -- cassette helpers (shared with the driver tests) ---------------------------------------------
def load_cassette(path: Path) -> list[dict[str, Any]]:
    """The Chat Completions interactions of one recorded file, in order."""
    data = yaml.safe_load(path.read_text())
    return [it for it in data["interactions"] if it["request"]["uri"].endswith("/chat/completions")]


def chat_cassettes(samples: Path) -> list[Path]:
    return sorted(p for d in PROVIDER_DIRS for p in (samples / d).glob("*.yaml") if load_cassette(p))


def response_text(interaction: dict[str, Any]) -> str:
    body = interaction["response"].get("body")
    if isinstance(body, dict):
        return str(body.get("string", ""))
    if body is None:
        return json.dumps(interaction["response"]["parsed_body"])
    return str(body)


def sse_chunks(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of a recorded server-sent-events body (without ``[DONE]``)."""
    chunks: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunks.append(json.loads(line[len("data: ") :]))
    return chunks


def recorded_body(interaction: dict[str, Any]) -> dict[str, Any]:
    """The ``chat.completion`` body of a recorded response (a stream is assembled first)."""
    if interaction["request"]["parsed_body"].get("stream"):
        accumulator = StreamAccumulator()
        for chunk in sse_chunks(response_text(interaction)):
            accumulator.feed(chunk)
        return accumulator.body()
    return interaction["response"]["parsed_body"]


def recorded_response(interaction: dict[str, Any]) -> Message:
    """Decode a recorded (streamed or not) successful response into a tether message."""
    return decode_response(recorded_body(interaction)).message


def canonical(entry: dict[str, Any]) -> dict[str, Any]:
    """Provider-equivalent shapes made equal: absent == null, a lone text part == a string."""
    out = {k: v for k, v in copy.deepcopy(entry).items() if v is not None}
    content = out.get("content")
    if isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
        out["content"] = content[0]["text"]
    if out.get("role") == "assistant" and out.get("tool_calls") and out.get("content") == "":
        del out["content"]
    for call in out.get("tool_calls", []):
        call.pop("index", None)
    return out


def assert_paired(entries: list[dict[str, Any]]) -> None:
    """What the API validates: every tool message answers a call of the assistant entry before it."""
    open_ids: set[str] = set()
    for i, entry in enumerate(entries):
        if entry["role"] == "assistant":
            assert not open_ids, f"calls {open_ids} unanswered before entry {i}"
            open_ids = {c["id"] for c in entry.get("tool_calls") or []}
            assert all(open_ids), f"entry {i} has a call without id"
        elif entry["role"] == "tool":
            assert entry["tool_call_id"] in open_ids, f"entry {i} answers an unknown call"
            open_ids.discard(entry["tool_call_id"])
        else:
            assert not open_ids, f"calls {open_ids} unanswered before entry {i}"


class Replay:
    """Rebuild each recorded request from a tether history; collect what was compared."""

    def __init__(self) -> None:
        self.history: list[Message] | None = None
        self.id_map: dict[str, str] = {}  # recorded call id -> ours (when the provider gave none)
        self.compared = 0
        self.dropped_reasoning = 0

    def expect(self, recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Compare our encoding of the history with the head of ``recorded``; import the tail."""
        if self.history is None:
            self.history, _ = decode_messages(recorded)
            return recorded
        ours, report = encode_messages(self.history, profile=Profile("openai"))
        dropped = {loss.message for loss in report.losses if loss.what == "reasoning"}
        message_of_entry = [
            mi
            for mi, m in enumerate(self.history)
            for _ in range(len(m.tool_results) if m.role == "tool" else 1)
        ]
        assert len(recorded) > len(ours)
        for index, (mine, theirs) in enumerate(zip(ours, recorded, strict=False)):
            theirs = canonical(dict(theirs))
            content = theirs.get("content")
            if theirs["role"] == "assistant" and isinstance(content, str) and (m := _THINK.match(content)):
                # pydantic-ai resends reasoning as <think> text; tether drops it and reports it
                assert message_of_entry[index] in dropped
                self.dropped_reasoning += 1
                rest = content[m.end() :]
                theirs = {k: v for k, v in theirs.items() if k != "content"} | (
                    {"content": rest} if rest else {}
                )
            for call in theirs.get("tool_calls", []):
                call["id"] = self.id_map.get(call["id"], call["id"])
            assert canonical(dict(mine)) == theirs, f"entry {index}"
            self.compared += 1
        tail = [dict(e) for e in recorded[len(ours) :]]
        for entry in tail:
            if entry.get("tool_call_id") in self.id_map:
                entry["tool_call_id"] = self.id_map[entry["tool_call_id"]]
        imported, _ = decode_messages(tail)
        names = {c.id: c.name for m in self.history for c in m.tool_calls}
        for message in imported:
            if message.role == "tool":
                message = tool_msg(
                    *(msgspec.structs.replace(r, name=names[r.call_id]) for r in message.tool_results)
                )
            self.history.append(message)
        full, _ = encode_messages(self.history)
        assert_paired(full)
        return recorded

    def answer(self, interaction: dict[str, Any], next_request: list[dict[str, Any]] | None) -> None:
        assert self.history is not None
        message = recorded_response(interaction)
        self.history.append(message)
        raw_calls = recorded_body(interaction)["choices"][0]["message"].get("tool_calls") or []
        for raw, call in zip(raw_calls, message.tool_calls, strict=True):
            if raw["id"]:
                assert call.id == raw["id"]  # provider ids survive byte for byte
            elif next_request is not None:
                # the recorder invented its own id for an id-less call; map it onto ours
                sent = [e for e in next_request if e["role"] == "assistant" and e.get("tool_calls")][-1]
                self.id_map[sent["tool_calls"][raw_calls.index(raw)]["id"]] = call.id or ""


def replay(path: Path) -> Replay:
    interactions = load_cassette(path)
    state = Replay()
    for k, interaction in enumerate(interactions):
        state.expect(interaction["request"]["parsed_body"]["messages"])
        if interaction["response"]["status"]["code"] != 200:
            state.history = None  # the client rebuilt its own history after an error
            continue
        following = (
            interactions[k + 1]["request"]["parsed_body"]["messages"] if k + 1 < len(interactions) else None
        )
        state.answer(interaction, following)
    return state


# -- real traffic ----------------------------------------------------------------------------------
def test_every_recorded_conversation_rebuilds_its_requests(provider_samples: Path) -> None:
    files = chat_cassettes(provider_samples)
    assert len(files) >= 30
    compared = dropped = 0
    multi_turn = 0
    for path in files:
        state = replay(path)
        compared += state.compared
        dropped += state.dropped_reasoning
        multi_turn += state.compared > 0
    # tool rounds, documents, images, id-less calls, reasoning (Groq, Cerebras, Ollama) all covered
    assert multi_turn >= 12  # the 12 recorded multi-request conversations
    assert compared >= 34
    assert dropped >= 1  # Groq reasoning followed by a call: dropped and reported, not resent


@pytest.mark.parametrize(
    "name",
    [
        "openai-chat/test_multiple_agent_tool_calls.yaml",
        "openai-chat/test_document_as_binary_content_input_with_tool.yaml",
        "openai-chat/test_compatible_api_with_tool_calls_without_id.yaml",
        "openai-chat/test_run_stream_sync_streams_real_model.yaml",
        "groq/test_image_as_binary_content_tool_response.yaml",
        "groq/test_tool_use_failed_error.yaml",
        "groq/test_groq_model_thinking_part.yaml",
    ],
)
def test_named_conversations_compare_every_earlier_entry(provider_samples: Path, name: str) -> None:
    state = replay(provider_samples / name)
    assert state.compared >= 1


def test_document_and_image_parts_round_trip_byte_for_byte(provider_samples: Path) -> None:
    pdf_request = load_cassette(
        provider_samples / "openai-chat/test_document_as_binary_content_input_with_tool.yaml"
    )
    messages, report = decode_messages(pdf_request[0]["request"]["parsed_body"]["messages"])
    document = messages[0].parts[1]
    assert isinstance(document, Document)
    assert document.media_type == "application/pdf"
    assert document.data is not None
    assert document.data.startswith(b"%PDF-")
    assert document.title == "filename.pdf"
    assert report.lossless
    image_request = load_cassette(provider_samples / "groq/test_image_as_binary_content_tool_response.yaml")[
        1
    ]
    recorded = image_request["request"]["parsed_body"]["messages"]
    messages, report = decode_messages(recorded)
    image = messages[-1].parts[1]
    assert isinstance(image, Image)
    assert image.media_type == "image/jpeg"
    assert image.data is not None
    assert image.data[:3] == b"\xff\xd8\xff"
    encoded, _ = encode_messages(messages)
    assert encoded[-1]["content"][1] == recorded[-1]["content"][1]


def test_recorded_reasoning_and_usage_are_decoded(provider_samples: Path) -> None:
    groq = load_cassette(provider_samples / "groq/test_tool_use_failed_error.yaml")[2]
    response = decode_response(groq["response"]["parsed_body"], provider="groq")
    reasoning = response.message.parts[0]
    assert isinstance(reasoning, Reasoning)
    assert reasoning.provider == "groq"
    assert reasoning.text.startswith("We need to respond")
    assert response.usage == Usage(
        input_tokens=336, output_tokens=96, cache_read_tokens=256, reasoning_tokens=59
    )
    assert response.message.usage == response.usage
    assert response.message.provider == "groq"
    think = load_cassette(provider_samples / "groq/test_groq_model_thinking_part.yaml")[0]
    parts = decode_response(think["response"]["parsed_body"]).message.parts
    assert [type(p) for p in parts] == [Reasoning, Text]
    raw = think["response"]["parsed_body"]["choices"][0]["message"]["content"]
    assert raw == f"<think>{parts[0].text}</think>{parts[1].text}"  # type: ignore[union-attr]


def test_gemini_compat_id_less_call_gets_a_stable_id_and_keeps_its_signature(provider_samples: Path) -> None:
    it = load_cassette(provider_samples / "openai-chat/test_compatible_api_with_tool_calls_without_id.yaml")[
        0
    ]
    body = it["response"]["parsed_body"]
    first = decode_response(body, provider="google-openai").message.tool_calls[0]
    again = decode_response(body, provider="google-openai").message.tool_calls[0]
    assert first.id == again.id
    assert first.id
    assert first.id.startswith("call_")
    assert first.signature == body["choices"][0]["message"]["extra_content"]["google"]["thought_signature"]
    _, report = encode_messages([assistant_msg(first)])
    assert [loss.what for loss in report.losses] == ["tool call signature"]


def test_recorded_streams_assemble_into_the_message_the_next_request_replays(provider_samples: Path) -> None:
    interactions = load_cassette(
        provider_samples / "openai-chat/test_run_stream_sync_streams_real_model.yaml"
    )
    events = iter_events(sse_chunks(response_text(interactions[0])))
    final = events[-1]
    assert not isinstance(final, (Text, ToolCall))
    message = recorded_response(interactions[0])
    assert message.tool_calls == (
        ToolCall("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", '{"country":"UK"}'),
    )
    assert message.usage == Usage(input_tokens=53, output_tokens=15)
    assert message.stop_reason == "tool_calls"
    assert message.response_id == "chatcmpl-Dx0XpqH8w09uBXwq1zFGYdETjtnEl"
    encoded, _ = encode_messages([message])
    assert canonical(encoded[0]) == canonical(interactions[1]["request"]["parsed_body"]["messages"][1])
    moderation = load_cassette(provider_samples / "openai-chat/test_openai_moderation_stream.yaml")[0]
    message = recorded_response(moderation)  # usage arrives before a trailing usage-less chunk
    assert message.text == "Paris."
    assert message.usage == Usage(input_tokens=13, output_tokens=11)


def test_tether_json_given_as_openai_chat_is_not_silently_emptied() -> None:
    import tether
    from tether.models.wire.openai_chat import decode_messages

    with pytest.raises(tether.DecodeError) as caught:
        decode_messages([{"role": "user", "parts": [{"type": "text", "text": "hi"}]}])
    assert caught.value.path == "$[0].content"
    messages, report = decode_messages(
        [{"role": "assistant", "parts": [{"type": "text", "text": "x"}], "content": "ok"}]
    )
    assert messages[0].text == "ok"
    assert [(loss.message, loss.kind, loss.what) for loss in report.losses] == [
        (0, "dropped", "field 'parts'")
    ]
