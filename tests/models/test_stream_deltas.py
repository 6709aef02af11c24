"""The deltas of every streaming driver add up to the final message's parts at their indexes
(``tests/models/_deltas.py`` says exactly what is checked), for the chunk orders each API allows.
The OpenAI Responses stream has its own file (test_openai_responses_stream.py); here: OpenAI
Chat Completions (also what the local model's llama.cpp chunks go through), Anthropic Messages
and Gemini ``streamGenerateContent``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tether.messages import Reasoning
from tether.models.wire import anthropic, gemini, openai_chat

from ._deltas import check_deltas, pieces

JSON = dict[str, Any]
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
arguments = st.sampled_from(["", "{}", '{"city": "Paris"}', '{"a": [1, 2, {"b": "é"}]}', '{"n":1.50}'])


# -- OpenAI Chat Completions ---------------------------------------------------------------------
def _chunk(delta: JSON, finish: str | None = None) -> JSON:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "model": "m", "choices": [choice]}


@st.composite
def chat_streams(draw: st.DrawFn) -> list[JSON]:
    """Reasoning (a field, or a ``<think>`` block that may never close when the reply is cut),
    then text, then a refusal, then tool calls; any of them absent; pieces cut anywhere (inside
    the tags too); neighbouring pieces of different fields sometimes in one chunk."""
    fields: list[tuple[str, str]] = []  # (field, piece) in stream order
    style = draw(st.sampled_from(["plain", "field", "think", "open-think"]))
    answer = draw(text)
    if style == "field":
        fields += [("reasoning_content", p) for p in pieces(draw, draw(text))]
    content = answer
    if style == "think":
        content = f"<think>{draw(text.filter(lambda t: '</think>' not in t))}</think>{answer}"
    if style == "open-think":  # cut at its length limit while thinking
        content = f"<think>{draw(text.filter(lambda t: '<' not in t))}"
    fields += [("content", p) for p in pieces(draw, content)]
    if style != "open-think" and draw(st.booleans()):
        fields += [("refusal", p) for p in pieces(draw, draw(text))]
    calls = draw(st.integers(0, 2)) if style != "open-think" else 0
    chunks = [_chunk({"role": "assistant", "content": ""})]
    merged = draw(st.booleans())
    for field, piece in fields:
        last = chunks[-1]["choices"][0]["delta"]
        if merged and len(chunks) > 1 and field not in last:
            last[field] = piece  # one chunk carrying the end of one field and the start of the next
        else:
            chunks.append(_chunk({field: piece}))
    for i in range(calls):
        name = draw(st.sampled_from(["weather", "add"]))
        args = draw(arguments)
        function = {"name": name, "arguments": ""}
        start = {"index": i, "id": f"call_{i}", "type": "function", "function": function}
        chunks.append(_chunk({"tool_calls": [start]}))
        for piece in pieces(draw, args):
            chunks.append(_chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    finish = "length" if style == "open-think" else "tool_calls" if calls else "stop"
    chunks.append(_chunk({}, finish))
    return chunks


@given(chat_streams())
def test_openai_chat_deltas_add_up(chunks: list[JSON]) -> None:
    accumulator = openai_chat.StreamAccumulator()
    deltas = [delta for chunk in chunks for delta in accumulator.feed(chunk)]
    assert accumulator.finished
    response = accumulator.result()
    assert response == openai_chat.decode_response(accumulator.body())
    check_deltas(deltas, response.message)


def test_openai_chat_reply_cut_while_thinking_is_reasoning_streamed_and_final() -> None:
    """A local reasoning model cut at its token limit inside ``<think>``: the stream showed
    reasoning, and the final message (streamed or not) holds reasoning, not "<think>…" as the
    answer's text."""
    chunks = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "<thi"}),
        _chunk({"content": "nk>Let me add 2 and"}),
        _chunk({"content": " 2</th"}),
        _chunk({}, "length"),
    ]
    accumulator = openai_chat.StreamAccumulator(provider="local")
    deltas = [delta for chunk in chunks for delta in accumulator.feed(chunk)]
    response = accumulator.result()
    assert response.message.parts == (Reasoning("Let me add 2 and 2</th", provider="local"),)
    assert response.stop_reason == "length"
    check_deltas(deltas, response.message)


# -- Anthropic Messages ----------------------------------------------------------------------------
@st.composite
def anthropic_streams(draw: st.DrawFn) -> list[JSON]:
    """Content blocks one after another (the API streams them in index order): thinking with its
    signature, redacted thinking, text, tool use whose input JSON arrives in pieces (possibly
    none: a tool without parameters), a server tool block with no tether part."""
    events: list[JSON] = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []},
        }
    ]
    kinds = draw(st.lists(st.sampled_from(["thinking", "redacted", "text", "tool", "server"]), max_size=5))
    for index, kind in enumerate(kinds):
        if kind == "thinking":
            block: JSON = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(draw, draw(text))]
            deltas.append({"type": "signature_delta", "signature": "EqQBCkYIBxgC"})
        elif kind == "redacted":
            block, deltas = {"type": "redacted_thinking", "data": "EmwKAhgB"}, []
        elif kind == "text":
            block = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(draw, draw(text))]
        elif kind == "tool":
            block = {"type": "tool_use", "id": f"toolu_{index}", "name": "weather", "input": {}}
            source = draw(arguments)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(draw, source)]
        else:
            block = {"type": "server_tool_use", "id": f"srvtoolu_{index}", "name": "web_search", "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": '{"query": "q"}'}]
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if "tool" in kinds else "end_turn"
    events.append({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}})
    events.append({"type": "message_stop"})
    return events


@given(anthropic_streams())
def test_anthropic_deltas_add_up(events: list[JSON]) -> None:
    accumulator = anthropic.StreamAccumulator()
    deltas = [delta for event in events for delta in accumulator.feed(event)]
    assert accumulator.finished
    response = accumulator.result()
    assert response == anthropic.decode_response(accumulator.body())
    check_deltas(deltas, response.message)


# -- Gemini ----------------------------------------------------------------------------------------
@st.composite
def gemini_streams(draw: st.DrawFn) -> list[JSON]:
    """Chunks of parts: thought text, answer text (split across chunks, joined into one part
    per run of the same kind), a thought signature on a later piece, function calls (whole, as
    Gemini sends them), empty texts, a server-side code part with no tether part."""
    chunks: list[JSON] = []
    for _ in range(draw(st.integers(1, 6))):
        parts: list[JSON] = []
        for _ in range(draw(st.integers(0, 2))):
            kind = draw(st.sampled_from(["thought", "text", "signed", "call", "empty", "code"]))
            if kind == "thought":
                parts.append({"text": draw(text), "thought": True})
            elif kind == "text":
                parts.append({"text": draw(text)})
            elif kind == "signed":
                parts.append({"text": draw(text), "thoughtSignature": "CpcBAdHtim"})
            elif kind == "call":
                args = draw(st.sampled_from([{}, {"city": "Paris"}, {"n": 1.5, "l": [1, "é"]}]))
                parts.append({"functionCall": {"name": "weather", "args": args}})
            elif kind == "empty":
                parts.append({"text": ""})
            else:
                parts.append({"executableCode": {"language": "PYTHON", "code": "print(1)"}})
        chunks.append({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]})
    chunks[-1]["candidates"][0]["finishReason"] = "STOP"
    chunks[-1]["usageMetadata"] = {"promptTokenCount": 3, "candidatesTokenCount": 5}
    return chunks


@given(gemini_streams())
def test_gemini_deltas_add_up(chunks: list[JSON]) -> None:
    accumulator = gemini.StreamAccumulator()
    deltas = [delta for chunk in chunks for delta in accumulator.feed(chunk)]
    assert accumulator.finished
    response = accumulator.result()
    assert response == gemini.decode_response(accumulator.body())
    check_deltas(deltas, response.message)


# -- recorded traffic ------------------------------------------------------------------------------
ACCUMULATORS: dict[str, Any] = {
    "anthropic": anthropic.StreamAccumulator,
    "openai-chat": openai_chat.StreamAccumulator,
    "gemini": gemini.StreamAccumulator,
}


def _recorded(folder: Path) -> list[tuple[str, list[JSON]]]:
    out: list[tuple[str, list[JSON]]] = []
    for path in sorted(folder.glob("*.yaml")):
        for n, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            raw = interaction["response"].get("body")
            raw = raw.get("string") if isinstance(raw, dict) else raw
            if isinstance(raw, str) and "\ndata:" in "\n" + raw:
                events = [
                    json.loads(line[5:])
                    for line in raw.splitlines()
                    if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")
                ]
                out.append((f"{path.name}#{n}", events))
    return out


@pytest.mark.parametrize("provider", sorted(ACCUMULATORS))
def test_recorded_streams_deltas_add_up(provider: str, provider_samples: Path) -> None:
    recorded = _recorded(provider_samples / provider)
    assert recorded, f"no recorded {provider} stream"
    for name, events in recorded:
        accumulator = ACCUMULATORS[provider]()
        deltas = [delta for event in events for delta in accumulator.feed(event)]
        assert accumulator.finished, name
        check_deltas(deltas, accumulator.result().message)
