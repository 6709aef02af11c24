"""Every compacted view is a history every provider accepts: it passes ``check_history``, keeps
every call paired with its results, every id and signature intact, and goes through each wire
encoder and each driver's request builder to a request that opens with a user turn, alternates as
the log did and pairs every call. Checked on generated histories (hypothesis) and on the
recorded provider conversations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given
from hypothesis import strategies as st

from tether import Message, Reasoning, ToolCall, ToolResult
from tether.history import (
    TokenTally,
    check_history,
    compacted_view,
    compaction_boundary,
    elide,
    normalize_history,
    split_summary,
)
from tether.models.anthropic import AnthropicModel
from tether.models.gemini import GeminiModel
from tether.models.openai_chat import OpenAIChatModel
from tether.models.openai_responses import OpenAIResponsesModel
from tether.models.wire import anthropic as anthropic_wire
from tether.models.wire import gemini as gemini_wire
from tether.models.wire import openai_chat as chat_wire
from tether.models.wire import openai_responses as responses_wire

from .strategies import histories, valid_histories

JSON = dict[str, Any]


# -- what each provider requires of a request's history ---------------------------------------------
def _turn_problems(turns: list[JSON], key: str, model_role: str, call: str, result: str) -> list[str]:
    """Anthropic ``messages`` / Gemini ``contents``: opens with a user turn, roles alternate,
    each call is answered in the very next user turn (results first), and no result answers
    anything else."""
    problems: list[str] = []
    if not turns:
        return ["empty request"]
    if turns[0]["role"] != "user":
        problems.append(f"opens with {turns[0]['role']}")
    for i, turn in enumerate(turns):
        if not turn[key]:
            problems.append(f"turn {i} is empty")
        if i and turn["role"] == turns[i - 1]["role"]:
            problems.append(f"turns {i - 1} and {i} are both {turn['role']}")
    for i, turn in enumerate(turns):
        calls = [_id(b, call) for b in turn[key] if call in b or b.get("type") == call]
        if turn["role"] == model_role and calls:
            following = turns[i + 1][key] if i + 1 < len(turns) else []
            answered = [_id(b, result) for b in following if result in b or b.get("type") == result]
            if sorted(answered) != sorted(calls):
                problems.append(f"turn {i}: calls {calls} answered by {answered}")
            kinds = [result in b or b.get("type") == result for b in following]
            if kinds != sorted(kinds, reverse=True):
                problems.append(f"turn {i + 1}: results do not come first")
        if turn["role"] == "user":
            previous = turns[i - 1][key] if i else []
            asked = {_id(b, call) for b in previous if call in b or b.get("type") == call}
            for b in turn[key]:
                if (result in b or b.get("type") == result) and _id(b, result) not in asked:
                    problems.append(f"turn {i}: result {_id(b, result)} answers no call right before it")
    return problems


def _id(block: JSON, kind: str) -> str:
    if kind in ("tool_use",):
        return block["id"]
    if kind == "tool_result":
        return block["tool_use_id"]
    return block[kind].get("id") or block[kind]["name"]


def anthropic_problems(messages: list[JSON]) -> list[str]:
    return _turn_problems(messages, "content", "assistant", "tool_use", "tool_result")


def gemini_problems(contents: list[JSON]) -> list[str]:
    return _turn_problems(contents, "parts", "model", "functionCall", "functionResponse")


def chat_problems(messages: list[JSON]) -> list[str]:
    """OpenAI Chat: the first non-system message is a user one; an assistant message with
    ``tool_calls`` is followed by exactly one tool message per call and nothing else between."""
    problems: list[str] = []
    body = [m for m in messages if m["role"] != "system"]
    if not body or body[0]["role"] != "user":
        problems.append("does not open with a user message")
    i = 0
    while i < len(body):
        m = body[i]
        if m["role"] == "tool":
            problems.append(f"message {i}: tool message without its calls right before it")
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = sorted(c["id"] for c in m["tool_calls"])
            j = i + 1
            answered: list[str] = []
            while j < len(body) and body[j]["role"] == "tool":
                answered.append(body[j]["tool_call_id"])
                j += 1
            if sorted(answered) != ids:
                problems.append(f"message {i}: calls {ids} answered by {answered}")
            i = j
            continue
        i += 1
    return problems


def responses_problems(items: list[JSON]) -> list[str]:
    """OpenAI Responses: opens with a user item; every function_call has one
    function_call_output after it, and every output answers an earlier call."""
    problems: list[str] = []
    if not items or items[0].get("role") != "user":
        problems.append("does not open with a user item")
    open_calls: set[str] = set()
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            open_calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in open_calls or item["call_id"] in answered:
                problems.append(f"item {index}: output for {item['call_id']} answers no open call")
            answered.add(item["call_id"])
    if open_calls - answered:
        problems.append(f"calls without output: {sorted(open_calls - answered)}")
    return problems


ENCODERS: list[tuple[str, Callable[[list[Message]], list[JSON]], Callable[[list[JSON]], list[str]]]] = [
    ("anthropic", lambda h: anthropic_wire.encode_messages(h)[0], anthropic_problems),
    ("gemini", lambda h: gemini_wire.encode_messages(h)[0], gemini_problems),
    ("openai-chat", lambda h: chat_wire.encode_messages(h)[0], chat_problems),
    ("openai-responses", lambda h: responses_wire.encode_messages(h)[0], responses_problems),
]

DRIVERS: list[tuple[str, Any]] = [
    ("anthropic", AnthropicModel("claude-sonnet-4-5", api_key="k")),
    ("gemini", GeminiModel("gemini-2.5-pro", api_key="k")),
    ("openai-chat", OpenAIChatModel("gpt-4.1", api_key="k")),
    ("openai-responses", OpenAIResponsesModel("gpt-5", api_key="k")),
]


def _build(name: str, driver: Any, history: list[Message]) -> list[Any]:
    """The history part of the request each driver's request builder makes (no I/O)."""
    if name == "openai-responses":
        return driver.request_body(history, instructions="be concise")["input"]
    kwargs = driver.request(history, instructions="be concise")
    if name == "gemini":
        return kwargs["contents"]
    return kwargs["messages"]


def _signed(history: list[Message]) -> list[tuple[str | None, ...]]:
    """Every id and signature a history carries, in order."""
    out: list[tuple[str | None, ...]] = []
    for m in history:
        for p in m.parts:
            if type(p) is ToolCall:
                out.append(("call", p.id, p.signature, p.name, p.arguments))
            elif type(p) is ToolResult:
                out.append(("result", p.call_id, p.name))
            elif type(p) is Reasoning and (p.signature or p.redacted or p.provider_id):
                out.append(("reasoning", p.text, p.signature, p.provider_id))
    return out


def _views(history: list[Message], targets: list[int], keep: int) -> list[list[Message]]:
    """The compacted views of a history: elided, summarized at the boundary each target gives,
    and both at once."""
    elided, _ = elide(history, keep_last=keep, min_bytes=0)
    views = [elided]
    tally = TokenTally()
    for target in targets:
        b = compaction_boundary(history, tally, start=0, target=target)
        if b is not None:
            views.append(compacted_view(history, f"summary up to {b}", b))
            views.append(compacted_view(elided, f"summary up to {b}", b))
    return views


def _sendable(h: list[Message]) -> list[Message]:
    """What a run sends: the normalized history without system messages."""
    normalized, _ = normalize_history(h)
    return [m for m in normalized if m.role != "system"]


def test_the_checks_catch_what_providers_reject() -> None:
    """The rule checks above can fail: a summary placed as its own user turn before a user
    message, or a cut between a call and its result, is caught for every wire."""
    from tether import Text, assistant, tool, user

    history = [
        user("q"),
        assistant(ToolCall("c1", "f", "{}")),
        tool(ToolResult("c1", "f", (Text("r"),))),
        assistant("a"),
        user("q2"),
    ]
    two_users = [user("summary"), *history[4:]]
    cut_pair = [user("summary"), history[2], history[3], history[4]]
    for name, encode, problems in ENCODERS:
        assert problems(encode(history)) == [], name
        assert problems(encode(cut_pair)), name
        if name in ("anthropic", "gemini"):
            assert problems(encode(two_users)), name
    assert compacted_view(history, "summary", 4)[0].parts[1:] == history[4].parts


# -- generated histories -----------------------------------------------------------------------------------
@given(histories, st.lists(st.integers(0, 400), min_size=1, max_size=4), st.integers(0, 6))
def test_every_compacted_view_passes_check_history(h: list[Message], targets: list[int], keep: int) -> None:
    history = _sendable(h)
    assume(history and history[0].role in ("user", "assistant"))
    # repair cannot pair calls without an id (or reusing one): compaction adds no other problem
    unpairable = {p.kind for p in check_history(history)}
    assert unpairable <= {"call-without-id", "duplicate-call-id"}
    for view in _views(history, targets, keep):
        assert {p.kind for p in check_history(view)} <= unpairable
        assert _signed(view) == _signed(history[len(history) - _tail(view) :])


def _tail(view: list[Message]) -> int:
    """How many log messages a view holds (its summary message, if alone, is not one of them)."""
    summary, rest = split_summary(view[0]) if view else (None, None)
    return len(view) - (1 if summary is not None and rest is None else 0)


@given(valid_histories(), st.lists(st.integers(0, 400), min_size=1, max_size=3), st.integers(0, 4))
def test_every_wire_encoder_accepts_every_compacted_view(
    h: list[Message], targets: list[int], keep: int
) -> None:
    history = _sendable(h)
    assume(len(history) >= 2 and history[0].role == "user")
    for name, encode, problems in ENCODERS:
        if problems(encode(history)):
            continue  # the log itself breaks a rule of this wire (e.g. two user turns in a row)
        for view in _views(history, targets, keep):
            assert problems(encode(view)) == [], (name, view)


@given(valid_histories(), st.integers(0, 400))
def test_every_driver_request_builder_accepts_compacted_views(h: list[Message], target: int) -> None:
    history = _sendable(h)
    assume(len(history) >= 2 and history[0].role == "user")
    for name, driver in DRIVERS:
        try:
            _build(name, driver, history)
        except Exception:  # content this profile refuses (e.g. a document URL): not compaction's
            continue
        for view in _views(history, [target], 2):
            assert _build(name, driver, view), name


# -- recorded conversations -------------------------------------------------------------------------------
def _recorded(samples: Path, folder: str, field: str, uri: str) -> list[tuple[str, list[Any]]]:
    out: list[tuple[str, list[Any]]] = []
    for path in sorted((samples / folder).glob("*.yaml")):
        for index, interaction in enumerate(yaml.safe_load(path.read_text())["interactions"]):
            body = interaction["request"].get("parsed_body")
            if isinstance(body, dict) and field in body and uri in interaction["request"]["uri"]:
                out.append((f"{path.name}[{index}]", body[field]))
    return out


RECORDED = [
    ("anthropic", "messages", "/messages", anthropic_wire.decode_messages, 0),
    ("gemini", "contents", "enerateContent", gemini_wire.decode_messages, 1),
    ("openai-chat", "messages", "/chat/completions", chat_wire.decode_messages, 2),
    ("openai-responses", "input", "/responses", responses_wire.decode_messages, 3),
]


@pytest.mark.parametrize(
    ("folder", "field", "uri", "decode", "which"), RECORDED, ids=[r[0] for r in RECORDED]
)
def test_recorded_conversations_compact_into_requests_their_provider_accepts(
    provider_samples: Path, folder: str, field: str, uri: str, decode: Any, which: int
) -> None:
    name, encode, problems = ENCODERS[which]
    compacted = 0
    signed = 0
    for where, raw in _recorded(provider_samples, folder, field, uri):
        if not isinstance(raw, list):
            continue
        try:
            messages, _ = decode(raw)
        except Exception:  # a request shape tether does not import: covered by the wire tests
            continue
        history = _sendable(messages)
        if len(history) < 3 or history[0].role != "user" or problems(encode(history)):
            continue
        tally = TokenTally()
        tally.update(history)
        for b in range(1, len(history)):
            if compaction_boundary(history, tally, start=b - 1, target=tally.between(b, len(history))) != b:
                continue  # no request can open at b
            for view in (
                compacted_view(history, "summary", b),
                compacted_view(elide(history, keep_last=1, min_bytes=0)[0], "summary", b),
            ):
                assert check_history(view) == [], where
                assert problems(encode(view)) == [], (where, b)
                kept = _signed(history[b:])
                assert _signed(view)[len(_signed(view)) - len(kept) :] == kept, where
                signed += len(kept)
                compacted += 1
    assert compacted >= 5, f"too few recorded {name} conversations compacted ({compacted})"
    if name in ("anthropic", "gemini"):
        assert signed, f"no signed reasoning or call ids were carried through the {name} views"
