"""check_history: every pairing violation, with its message index and a readable text."""

from __future__ import annotations

from hypothesis import given

from tether import Message, Text, ToolCall, ToolResult, assistant, tool, user
from tether.history import Problem, check_history, normalize_history

from .strategies import histories, valid_histories


def _res(cid: str) -> ToolResult:
    return ToolResult(cid, "search", (Text("ok"),))


def test_a_valid_history_has_no_problems() -> None:
    h = [user("hi"), assistant(ToolCall("c1", "search")), tool(_res("c1")), assistant("done")]
    assert check_history(h) == []


def test_every_kind_of_violation_is_reported_with_its_index() -> None:
    h = [
        user("hi"),  # 0
        tool(_res("c9")),  # 1 result before its call
        assistant(ToolCall("c1", "search"), ToolCall(None, "calc"), ToolCall("c1", "calc")),  # 2
        tool(_res("c1"), _res("c1")),  # 3 duplicate
        Message("tool"),  # 4 empty
        tool(_res("ghost")),  # 5 orphan
        assistant(ToolCall("c9", "search")),  # 6 missing result
        user("x"),  # 7
        tool(_res("c9")),  # 8 far from its call
    ]
    problems = check_history(h)
    assert [(p.message, p.call_id, p.kind) for p in problems] == [
        (1, "c9", "misplaced-result"),
        (2, None, "call-without-id"),
        (2, "c1", "duplicate-call-id"),
        (3, "c1", "duplicate-result"),
        (4, None, "empty-tool-message"),
        (5, "ghost", "orphan-result"),
        (6, "c9", "missing-result"),
        (8, "c9", "misplaced-result"),
    ]
    assert problems[0].text == "message 1: result for call 'c9' (search) comes before its call"
    assert (
        str(problems[-1])
        == "message 8: result for call 'c9' (search) is not in the tool messages right after its call"
    )
    assert (
        problems[6].text == "message 6: call 'c9' (search) has no result in the tool messages right after it"
    )


def test_problem_is_a_frozen_value() -> None:
    p = Problem(1, "c", "orphan-result", "t")
    assert p == Problem(1, "c", "orphan-result", "t")
    assert hash(p) == hash(Problem(1, "c", "orphan-result", "t"))


@given(valid_histories())
def test_valid_histories_pass_the_check(h: list[Message]) -> None:
    assert check_history(h) == []


@given(histories)
def test_problems_are_ordered_and_point_at_the_right_role(h: list[Message]) -> None:
    problems = check_history(h)
    assert [p.message for p in problems] == sorted(p.message for p in problems)
    for p in problems:
        role = h[p.message].role
        if p.kind in ("missing-result", "call-without-id", "duplicate-call-id"):
            assert role == "assistant"
        else:
            assert role == "tool"
    _, repair = normalize_history(h)
    assert (problems == []) is (not repair.changed and not repair.unpaired)
