"""OpenAI Responses streams: the deltas add up to the final message's parts, at its part indexes,
for every event order the Responses API allows: output items one after another (``output_index``
ascending, each between its ``response.output_item.added`` and ``.done``; provider-native items
may stay open across later ones, or never finish), a reasoning item's
summary parts then its raw reasoning text (``response.reasoning_text.delta``, which
OpenAI-compatible servers stream for open-weight models), a message's output text and refusal
parts, function calls, provider-native items with no tether part; with or without the optional
``*.part.added`` events, with text that arrives only in a ``.done`` event, and through the real
``openai`` SDK."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tether.errors import DecodeError
from tether.messages import Message, Text
from tether.models import ModelResponse, TextDelta
from tether.models.openai_responses import OpenAIResponsesModel
from tether.models.wire import openai_responses as wire

from ._deltas import check_deltas, final, pieces

Event = dict[str, Any]

# -- one stream as an OpenAI-compatible server (vLLM serving gpt-oss) sends it --------------------
_RAW_REASONING = [
    {"type": "response.created", "response": {"id": "resp_1", "model": "openai/gpt-oss-20b", "output": []}},
    {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"id": "rs_1", "type": "reasoning", "summary": [], "content": []},
    },
    {
        "type": "response.content_part.added",
        "output_index": 0,
        "content_index": 0,
        "item_id": "rs_1",
        "part": {"type": "reasoning_text", "text": ""},
    },
    {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": 0, "delta": "2 plus 2"},
    {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": 0, "delta": " is 4."},
    {"type": "response.reasoning_text.done", "output_index": 0, "content_index": 0, "text": "2 plus 2 is 4."},
    {
        "type": "response.output_item.done",
        "output_index": 0,
        "item": {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": "2 plus 2 is 4."}],
        },
    },
    {
        "type": "response.output_item.added",
        "output_index": 1,
        "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []},
    },
    {
        "type": "response.content_part.added",
        "output_index": 1,
        "content_index": 0,
        "item_id": "msg_1",
        "part": {"type": "output_text", "text": "", "annotations": []},
    },
    {"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "4"},
    {
        "type": "response.output_item.done",
        "output_index": 1,
        "item": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "4", "annotations": []}],
        },
    },
]


def _completed(events: list[Event]) -> Event:
    output = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    body = {**events[0]["response"], "status": "completed", "output": output}
    return {"type": "response.completed", "response": body}


def _sse(events: list[Event]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


async def test_raw_reasoning_then_the_answer_streams_the_answer() -> None:
    """The reported case: the answer's deltas were sent under a part index the final message
    does not give the answer (a UI rendering deltas showed no answer)."""
    events = [*_RAW_REASONING, _completed(_RAW_REASONING)]

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=_sse(events), headers={"content-type": "text/event-stream"})

    client = openai.AsyncOpenAI(
        api_key="k", max_retries=0, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    )
    model = OpenAIResponsesModel("openai/gpt-oss-20b", client=client)
    streamed = [e async for e in model.stream([Message("user", (Text("2+2?"),))])]
    response = final(streamed)
    assert response.message.parts[1] == Text("4", provider_id="msg_1")
    assert "".join(e.text for e in streamed if isinstance(e, TextDelta) and e.index == 1) == "4"
    check_deltas(streamed, response.message)


# -- every order the API allows ------------------------------------------------------------------
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def _reasoning(draw: st.DrawFn, oi: int) -> tuple[Event, list[Event]]:
    item_id = f"rs_{oi}"
    summary = draw(st.lists(text, max_size=2))
    raw = draw(st.lists(text, max_size=2))
    done: Event = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": t} for t in summary],
    }
    if draw(st.booleans()):
        done["encrypted_content"] = "gAAAA" + draw(st.text("abc", max_size=4))
    if raw or draw(st.booleans()):
        done["content"] = [{"type": "reasoning_text", "text": t} for t in raw]
    events: list[Event] = []
    for si, entry in enumerate(summary):
        # optional for servers that stream no raw reasoning: before raw text, a summary part is
        # announced (the API does; without it no one can know where the raw text's part goes)
        if raw or draw(st.booleans()):
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    "output_index": oi,
                    "summary_index": si,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
        if draw(st.booleans()):  # otherwise the text arrives only with the item's .done
            for piece in pieces(draw, entry):
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "output_index": oi,
                        "summary_index": si,
                        "delta": piece,
                    }
                )
            events.append(
                {
                    "type": "response.reasoning_summary_text.done",
                    "output_index": oi,
                    "summary_index": si,
                    "text": entry,
                }
            )
    for ci, entry in enumerate(raw):
        if draw(st.booleans()):
            events.append(
                {
                    "type": "response.content_part.added",
                    "output_index": oi,
                    "content_index": ci,
                    "part": {"type": "reasoning_text", "text": ""},
                }
            )
        if draw(st.booleans()):
            for piece in pieces(draw, entry):
                events.append(
                    {
                        "type": "response.reasoning_text.delta",
                        "output_index": oi,
                        "content_index": ci,
                        "delta": piece,
                    }
                )
    return done, events


@st.composite
def _message(draw: st.DrawFn, oi: int) -> tuple[Event, list[Event]]:
    entries: list[Event] = []
    events: list[Event] = []
    for ci in range(draw(st.integers(0, 2))):
        refusal = draw(st.booleans())
        value = draw(text)
        key = "refusal" if refusal else "text"
        entry: Event = {"type": "refusal" if refusal else "output_text", key: value}
        if not refusal:
            entry["annotations"] = []
        entries.append(entry)
        if draw(st.booleans()):
            events.append(
                {
                    "type": "response.content_part.added",
                    "output_index": oi,
                    "content_index": ci,
                    "part": {**entry, key: ""},
                }
            )
        if draw(st.booleans()):
            for piece in pieces(draw, value):
                events.append(
                    {
                        "type": "response.refusal.delta" if refusal else "response.output_text.delta",
                        "output_index": oi,
                        "content_index": ci,
                        "delta": piece,
                    }
                )
    done = {"id": f"msg_{oi}", "type": "message", "role": "assistant", "status": "completed"}
    return {**done, "content": entries}, events


@st.composite
def _call(draw: st.DrawFn, oi: int) -> tuple[Event, list[Event]]:
    arguments = draw(st.sampled_from(["", "{}", '{"city": "Paris"}', '{"a":[1,2,{"b":"é"}]}']))
    done = {
        "id": f"fc_{oi}",
        "type": "function_call",
        "call_id": f"call_{oi}",
        "name": draw(st.sampled_from(["weather", "add"])),
        "arguments": arguments,
        "status": "completed",
    }
    events: list[Event] = []
    if draw(st.booleans()):
        events += [
            {"type": "response.function_call_arguments.delta", "output_index": oi, "delta": piece}
            for piece in pieces(draw, arguments)
        ]
    events.append(
        {"type": "response.function_call_arguments.done", "output_index": oi, "arguments": arguments}
    )
    return done, events


def _native(oi: int) -> tuple[Event, list[Event]]:
    done = {"id": f"ws_{oi}", "type": "web_search_call", "status": "completed", "action": {"query": "q"}}
    return done, [{"type": "response.web_search_call.searching", "output_index": oi, "item_id": done["id"]}]


def _skeleton(item: Event) -> Event:
    """What ``response.output_item.added`` carries: the item before its content streamed."""
    kind = item["type"]
    if kind == "message":
        return {**item, "content": [], "status": "in_progress"}
    if kind == "reasoning":
        return {"id": item["id"], "type": "reasoning", "summary": []}
    if kind == "function_call":
        return {**item, "arguments": "", "status": "in_progress"}
    return {**item, "status": "in_progress"}


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Event], Event]:
    """A whole stream and the ``response.completed`` body it ends with."""
    events: list[Event] = [
        {"type": "response.created", "response": {"id": "resp_1", "model": "m", "status": "in_progress"}},
        {"type": "response.in_progress", "response": {"id": "resp_1", "model": "m", "status": "in_progress"}},
    ]
    output: list[Event] = []
    kinds = draw(st.lists(st.sampled_from(["reasoning", "message", "call", "native"]), max_size=5))
    for oi, kind in enumerate(kinds):
        if kind == "reasoning":
            item, inner = draw(_reasoning(oi))
        elif kind == "message":
            item, inner = draw(_message(oi))
        elif kind == "call":
            item, inner = draw(_call(oi))
        else:
            item, inner = _native(oi)
        output.append(item)
        events.append({"type": "response.output_item.added", "output_index": oi, "item": _skeleton(item)})
        events += inner
        events.append({"type": "response.output_item.done", "output_index": oi, "item": item})
    for oi, kind in enumerate(kinds):
        # a provider-native item (an MCP tool listing, a web search) may stay open while later
        # items stream, and finish late or never say so (recorded OpenAI traffic does both)
        if kind == "native":
            done = next(
                e for e in events if e["type"] == "response.output_item.done" and e["output_index"] == oi
            )
            events.remove(done)
            later = draw(st.integers(events.index(_added(events, oi)) + 1, len(events)))
            if draw(st.booleans()):
                events.insert(later, done)
    body = {"id": "resp_1", "model": "m", "status": "completed", "output": output}
    events.append({"type": "response.completed", "response": body})
    return events, body


def _added(events: list[Event], oi: int) -> Event:
    return next(e for e in events if e["type"] == "response.output_item.added" and e["output_index"] == oi)


@given(streams())
def test_deltas_add_up_to_the_final_parts_in_every_order(case: tuple[list[Event], Event]) -> None:
    events, body = case
    accumulator = wire.StreamAccumulator()
    deltas = [delta for event in events for delta in accumulator.feed(event)]
    assert accumulator.finished
    response = accumulator.result()
    assert response == wire.decode_response(body)  # streamed == non-streamed
    check_deltas(deltas, response.message)


# -- recorded traffic ------------------------------------------------------------------------------
def _recorded_streams(samples: Path) -> list[tuple[str, list[Event]]]:
    out: list[tuple[str, list[Event]]] = []
    for path in sorted((samples / "openai-responses").glob("*.yaml")):
        for n, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            raw = interaction["response"].get("body")
            raw = raw.get("string") if isinstance(raw, dict) else raw
            if not isinstance(raw, str) or "event:" not in raw:
                continue
            events = [json.loads(line[5:]) for line in raw.splitlines() if line.startswith("data:")]
            out.append((f"{path.name}#{n}", events))
    return out


def test_recorded_streams_deltas_add_up(provider_samples: Path) -> None:
    recorded = _recorded_streams(provider_samples)
    assert len(recorded) >= 8
    for name, events in recorded:
        accumulator = wire.StreamAccumulator()
        deltas = [delta for event in events for delta in accumulator.feed(event)]
        if not accumulator.finished:
            continue
        response = accumulator.result()
        assert isinstance(response, ModelResponse), name
        check_deltas(deltas, response.message)


@pytest.mark.parametrize("cut", range(1, len(_RAW_REASONING)))
def test_a_stream_cut_anywhere_still_adds_up(cut: int) -> None:
    """What arrived before a cut (the run keeps it as a partial reply) matches its deltas too."""
    accumulator = wire.StreamAccumulator()
    deltas = [delta for event in _RAW_REASONING[:cut] for delta in accumulator.feed(event)]
    check_deltas(deltas, accumulator.result().message)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 10**9, "delta": "x"},
        {"type": "response.reasoning_text.delta", "output_index": 0, "content_index": -1, "delta": "x"},
        {"type": "response.output_text.delta", "output_index": "0", "content_index": 0, "delta": "x"},
        {"type": "response.output_item.done", "output_index": 0, "item": ["not", "an", "object"]},
    ],
)
def test_a_malformed_index_is_a_decode_error_not_an_allocation(event: Event) -> None:
    """A hostile server cannot make the accumulator build a list a billion entries long."""
    accumulator = wire.StreamAccumulator()
    with pytest.raises(DecodeError):
        accumulator.feed(event)
