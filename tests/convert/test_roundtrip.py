"""Property tests: ``from_x(to_x(h)) == h`` for every history format ``x`` can represent."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given

from messages.strategies import histories  # tests/messages (tests/ is on sys.path)
from tether import Message, Text, ToolCall, ToolResult, convert

from .strategies import LANGCHAIN, PLAIN, PYDANTIC_AI, RESPONSES, conversations


def _round_trip(name: str, history: list[Message]) -> None:
    fmt = convert.FORMATS[name]
    data, exported = fmt.dump(history)
    assert exported.lossless, exported.losses
    back, imported = fmt.load(data)
    assert imported.lossless, imported.losses
    assert back == history


@given(histories)
def test_tether_contract_round_trips_anything(history: list[Message]) -> None:
    _round_trip("tether", history)


@given(conversations(RESPONSES))
def test_openai_responses_round_trip(history: list[Message]) -> None:
    _round_trip("openai_responses", history)


@given(conversations(RESPONSES))
def test_openai_agents_round_trip(history: list[Message]) -> None:
    _round_trip("openai_agents", history)


@given(conversations(PYDANTIC_AI))
def test_pydantic_ai_round_trip(history: list[Message]) -> None:
    _round_trip("pydantic_ai", history)


@given(conversations(LANGCHAIN))
def test_langchain_round_trip(history: list[Message]) -> None:
    _round_trip("langchain", history)


@given(conversations(PLAIN))
def test_openai_chat_round_trip(history: list[Message]) -> None:
    _round_trip("openai_chat", history)


@given(conversations(PLAIN))
def test_anthropic_round_trip(history: list[Message]) -> None:
    _round_trip("anthropic", history)


@given(conversations(PLAIN))
def test_gemini_round_trip(history: list[Message]) -> None:
    _round_trip("gemini", history)


# The formats whose mapping lives in tether.convert or the Responses wire. (The Chat, Anthropic
# and Gemini wires drop some empty texts on the second pass; reported to their owners.)
STABLE = ["tether", "openai_responses", "openai_agents", "pydantic_ai", "langchain"]


@pytest.mark.parametrize("name", STABLE)
@given(history=histories)
def test_every_export_is_stable_after_one_round_trip(name: str, history: list[Message]) -> None:
    """For any history at all: what an export cannot carry is lost once (and reported), so
    exporting the re-imported history gives the same data."""
    fmt = convert.FORMATS[name]
    data, _ = fmt.dump(history)
    back, _ = fmt.load(data)
    again, _ = fmt.dump(back)
    assert again == data


def _blank(part: object) -> bool:
    """An empty text without a signature or provider id (an empty signature is none: no provider
    issues one)."""
    return type(part) is Text and not part.text and not part.signature and part.provider_id is None


def _unsigned(part: object) -> object:
    """An empty signature or provider id is none: some wires leave an empty one out."""
    if type(part) is Text or type(part) is ToolCall:
        if part.signature == "":
            part = msgspec.structs.replace(part, signature=None)
        if part.provider_id == "":
            part = msgspec.structs.replace(part, provider_id=None)
    return part


def _flat(messages: list[Message]) -> list[tuple[str, object]]:
    """Every part with its role, whole. An empty unsigned text carries nothing, so some wires
    leave it out (an empty Chat ``content``, an empty Gemini function response); that alone is
    not a loss. Every other field of every part must survive."""
    out: list[tuple[str, object]] = []
    for m in messages:
        for p in m.parts:
            if _blank(p):
                continue
            if type(p) is ToolResult:
                content = tuple(_unsigned(c) for c in p.content if not _blank(c))
                p = msgspec.structs.replace(p, content=content)
            out.append((m.role, _unsigned(p)))
    return out


@pytest.mark.parametrize("name", sorted(set(convert.FORMATS) - {"tether"}))
@given(history=histories)
def test_no_silent_loss_of_content(name: str, history: list[Message]) -> None:
    """When neither direction reports anything, every part comes back whole (text, ids, and the
    ``failed`` / ``synthesized`` flags of results), in order, with its role. (Message metadata
    such as usage or run stamps is not content; see ADR 0007.)"""
    fmt = convert.FORMATS[name]
    data, exported = fmt.dump(history)
    back, imported = fmt.load(data)
    if exported.lossless and imported.lossless:
        assert _flat(back) == _flat(history)


def test_gemini_reports_joining_several_result_texts() -> None:
    # found by test_no_silent_loss_of_content: two texts travel as one "\n"-joined output
    history = [Message("tool", (ToolResult("0", "f", (Text(""), Text(""))),))]
    _, report = convert.to_gemini(history)
    assert [(loss.kind, loss.what) for loss in report.losses] == [("approximated", "text parts")]
