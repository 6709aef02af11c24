"""prune_history: reasoning and old tool exchanges go before the last N turns, pairs stay valid."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import Message, Reasoning, Text, ToolCall, ToolResult, UserError, assistant, tool, user
from tether.history import CallRef, PruneReport, check_history, prune_history

from .strategies import histories, valid_histories


def _res(cid: str) -> ToolResult:
    return ToolResult(cid, "f", (Text("r"),))


def _chat() -> list[Message]:
    return [
        user("q1"),  # 0
        assistant(Reasoning("think", signature="s"), ToolCall("a", "f"), ToolCall("b", "g")),  # 1
        tool(_res("a"), _res("b")),  # 2
        assistant(Reasoning("more"), Text("answer 1"), run_id="r1"),  # 3
        user("q2"),  # 4
        assistant(Reasoning("think 2"), ToolCall("c", "f")),  # 5
        tool(_res("c")),  # 6
        assistant("answer 2"),  # 7
    ]


def test_reasoning_and_tool_exchanges_before_the_last_turn_are_dropped() -> None:
    h = _chat()
    out, report = prune_history(h)
    assert out == [h[0], assistant(Text("answer 1"), run_id="r1"), *h[4:]]
    assert out[1].run_id == "r1"
    assert all(a is b for a, b in zip(out[2:], h[4:], strict=True))
    assert report.reasoning == ((1, 0), (3, 0))
    assert report.tool_calls == (CallRef(1, "a", "f"), CallRef(1, "b", "g"))
    assert report.results == ((2, "a"), (2, "b"))
    assert report.removed == (1, 2)
    assert check_history(out) == []


def test_only_reasoning() -> None:
    h = _chat()
    out, report = prune_history(h, tool_calls=False)
    assert out[1].parts == (ToolCall("a", "f"), ToolCall("b", "g"))
    assert out[2] is h[2]
    assert report.tool_calls == ()
    assert report.removed == ()


def test_only_tool_exchanges() -> None:
    h = _chat()
    out, report = prune_history(h, reasoning=False)
    assert out[1].parts == (Reasoning("think", signature="s"),)
    assert report.reasoning == ()
    assert report.removed == (2,)
    assert check_history(out) == []


def test_keep_turns_counts_user_messages_from_the_end() -> None:
    h = _chat()
    out, report = prune_history(h, keep_turns=2)
    assert out == h
    assert report == PruneReport()
    assert not report.changed
    assert prune_history(h, keep_turns=5)[0] == h


def test_nothing_to_prune_returns_a_new_list_of_the_same_objects() -> None:
    h = _chat()
    out, report = prune_history(h, reasoning=False, tool_calls=False)
    assert out == h
    assert out is not h
    assert not report.changed


def test_prune_report_serializes() -> None:
    _, report = prune_history(_chat())
    data = msgspec.json.decode(report.to_json())
    assert data["changed"] is True
    assert data["tool_calls"][0] == {"message": 1, "call_id": "a", "name": "f", "reason": ""}
    assert data["removed"] == [1, 2]


def test_keep_turns_is_validated() -> None:
    with pytest.raises(UserError, match="keep_turns"):
        prune_history([], keep_turns=0)


@given(valid_histories(max_turns=6), st.integers(1, 4), st.booleans(), st.booleans())
def test_prune_keeps_valid_histories_valid(h: list[Message], keep: int, reasoning: bool, calls: bool) -> None:
    out, report = prune_history(h, keep_turns=keep, reasoning=reasoning, tool_calls=calls)
    assert check_history(out) == []
    assert len(report.results) == sum(1 for _ in report.tool_calls)
    again, report2 = prune_history(out, keep_turns=keep, reasoning=reasoning, tool_calls=calls)
    assert again == out
    assert not report2.changed


@given(histories, st.integers(1, 3))
def test_prune_never_orphans_a_result_nor_touches_the_kept_turns(h: list[Message], keep: int) -> None:
    before = {p.kind for p in check_history(h)}
    out, _ = prune_history(h, keep_turns=keep)
    after = {p.kind for p in check_history(out)}
    assert "missing-result" not in after - before
    users = [i for i, m in enumerate(h) if m.role == "user"]
    if len(users) >= keep:
        tail = h[users[-keep] :]
        assert out[len(out) - len(tail) :] == tail
