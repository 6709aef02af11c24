"""A run that moved to another process (``run.recovered``) as each stream protocol carries it:
the lost request's open message ends, the continuation's messages get ids of their own (a
repeated step must not extend the lost one), and the move is said in the protocol's own custom
event. AG-UI events are validated with ag-ui-protocol's models."""

from __future__ import annotations

from typing import Any

import pytest

from tether.messages import Message, Text, Usage
from tether.serve._events import (
    MessageCompletedEvent,
    RunCompletedEvent,
    RunRecoveredEvent,
    RunStartedEvent,
    TextDeltaEvent,
    encode_event,
)
from tether.serve.agui._events import RECOVERED_EVENT
from tether.serve.agui._events import Translator as AguiTranslator
from tether.serve.aisdk._chunks import Translator as ChunkTranslator

core = pytest.importorskip("ag_ui.core", reason="ag-ui-protocol (a dev extra) is not installed")
pydantic = pytest.importorskip("pydantic")
EVENT = pydantic.TypeAdapter(core.Event)

R, C = "run-1", "conv-1"
LOG = [
    RunStartedEvent(R, C, "tell me"),
    TextDeltaEvent(R, C, 1, 0, "word1 "),
    TextDeltaEvent(R, C, 1, 0, "wo"),  # the process dies here
    RunRecoveredEvent(R, C, "proc-a", 1, "model_request", "moved"),
    TextDeltaEvent(R, C, 1, 0, "word1 "),  # the repeated request numbers its step 1 again
    TextDeltaEvent(R, C, 1, 0, "word2"),
    MessageCompletedEvent(R, C, Message("assistant", (Text("word1 word2"),), run_id=R)),
    RunCompletedEvent(R, C, "word1 word2", Usage(), 1, 0),
]


def _feed(translator: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in LOG:
        out += translator.feed(encode_event(event))
    return out


def test_agui_ends_the_lost_message_and_starts_a_new_one() -> None:
    events = _feed(AguiTranslator(R, C))
    for event in events:
        EVENT.validate_python(event)
    starts = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    ends = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_END"]
    assert len(starts) == 2
    assert len(set(starts)) == 2  # the continuation's message is not the lost one
    assert sorted(starts) == sorted(ends)  # every message opened is closed
    custom = [e for e in events if e["type"] == "CUSTOM"]
    assert custom == [
        {
            "type": "CUSTOM",
            "name": RECOVERED_EVENT,
            "value": {"fromProcess": "proc-a", "repeats": "model_request", "reason": "moved"},
        }
    ]
    lost_end = events.index({"type": "TEXT_MESSAGE_END", "messageId": starts[0]})
    assert lost_end < events.index(custom[0])  # closed before the move is announced
    after = [e["delta"] for e in events if e.get("messageId") == starts[1] and "delta" in e]
    assert "".join(after) == "word1 word2"
    assert events[-1]["type"] == "RUN_FINISHED"


def test_ai_sdk_chunks_end_the_lost_part_and_number_the_continuation_anew() -> None:
    chunks = _feed(ChunkTranslator(R, C))
    starts = [c["id"] for c in chunks if c["type"] == "text-start"]
    ends = [c["id"] for c in chunks if c["type"] == "text-end"]
    assert len(starts) == 2
    assert len(set(starts)) == 2
    assert sorted(starts) == sorted(ends)
    moved = [c for c in chunks if c["type"] == "data-tether-recovered"]
    assert len(moved) == 1
    assert moved[0]["transient"] is True
    assert moved[0]["data"]["repeats"] == "model_request"
    assert chunks.index({"type": "text-end", "id": starts[0]}) < chunks.index(moved[0])
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta" and c["id"] == starts[1])
    assert text == "word1 word2"
    assert chunks[-1]["type"] == "finish"
