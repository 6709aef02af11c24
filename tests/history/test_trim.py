"""trim_history and budget_history: the boundary rule, the budget, the cache."""

from __future__ import annotations

import gc
import inspect

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import HistoryError, Message, Text, ToolCall, ToolResult, UserError, assistant, system, tool, user
from tether.history import (
    TrimReport,
    approximate_counter,
    budget_history,
    check_history,
    trim_history,
)

from .strategies import histories, valid_histories


def _res(cid: str) -> ToolResult:
    return ToolResult(cid, "f", (Text("result " * 5),))


def _chat() -> list[Message]:
    return [
        system("sys"),  # 0
        user("q1"),  # 1
        assistant(ToolCall("a", "f"), ToolCall("b", "f")),  # 2
        tool(_res("a")),  # 3
        tool(_res("b")),  # 4
        assistant("answer 1"),  # 5
        user("q2"),  # 6
        assistant(ToolCall("c", "f")),  # 7
        tool(_res("c")),  # 8
        assistant("answer 2"),  # 9
    ]


class _Counting:
    """A counter that records what it was asked (one token per character of text)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, message: Message) -> int:
        self.calls += 1
        return 1 + sum(len(p.text) for p in message.parts if isinstance(p, Text)) + 2 * len(message.parts)


# -- trim_history -------------------------------------------------------------------------------


def test_trim_keeps_the_newest_messages() -> None:
    h = _chat()
    assert trim_history(4)(h) == h[6:]
    assert trim_history(3)(h) == h[7:]


def test_trim_advances_past_tool_messages_whose_call_was_cut() -> None:
    h = _chat()
    out, report = trim_history(6).apply(h)  # the cut lands on message 4, a result of call b
    assert out == h[5:]
    assert report == TrimReport(kept=5, dropped=5, boundary=1)
    assert report.start == 5
    out, report = trim_history(7).apply(h)  # lands on 3: both results of the cut turn go
    assert out == h[5:]
    assert report.boundary == 2


def test_trim_advances_past_system_messages() -> None:
    h = [user("a"), system("s"), user("b")]
    assert trim_history(2)(h) == [h[2]]


def test_trim_advances_past_an_assistant_turn_whose_results_were_cut() -> None:
    # A result placed before its call (broken history): trimming to the call must not keep it.
    h = [user("x"), tool(_res("a")), assistant(ToolCall("a", "f")), user("y")]
    assert trim_history(2)(h) == [h[3]]


def test_an_assistant_turn_with_its_results_in_the_window_can_open() -> None:
    h = _chat()
    assert trim_history(3)(h)[0] is h[7]


def test_a_short_history_is_returned_unchanged() -> None:
    h = [tool(_res("x")), user("hi")]
    out = trim_history(2)(h)
    assert out == h
    assert out is not h
    assert trim_history(5)(h) == h


def test_a_cut_leaving_nothing_openable_raises() -> None:
    h = [user("q"), assistant(ToolCall("a", "f"), ToolCall("b", "f")), tool(_res("a")), tool(_res("b"))]
    with pytest.raises(HistoryError, match="nothing that can open a request"):
        trim_history(2)(h)


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_trim_validates_its_argument(bad: object) -> None:
    with pytest.raises(UserError, match="max_messages"):
        trim_history(bad)  # type: ignore[arg-type]


def test_processors_are_plain_one_argument_callables() -> None:
    assert len(inspect.signature(trim_history(3)).parameters) == 1
    assert len(inspect.signature(budget_history(approximate_counter(), 9)).parameters) == 1


# -- budget_history -----------------------------------------------------------------------------


def test_budget_keeps_the_newest_messages_within_the_budget() -> None:
    h = _chat()
    counter = _Counting()
    costs = [counter(m) for m in h]
    budget = sum(costs[6:])
    out, report = budget_history(counter, budget).apply(h)
    assert out == h[6:]
    assert report.tokens == budget
    out, report = budget_history(counter, budget - 1).apply(h)
    assert out == h[7:]
    assert report.tokens == sum(costs[7:])


def test_budget_never_splits_a_call_from_its_results() -> None:
    h = _chat()
    counter = _Counting()
    budget = sum(counter(m) for m in h[4:])  # fits message 4 (a result of call b) but not its call
    out, report = budget_history(counter, budget).apply(h)
    assert out == h[5:]
    assert report.boundary == 1
    assert check_history(out) == []


def test_a_history_within_budget_is_returned_unchanged() -> None:
    h = _chat()
    out = budget_history(approximate_counter(), 10**9)(h)
    assert out == h


def test_the_newest_message_over_the_budget_raises() -> None:
    h = [user("short"), user("x" * 400)]
    with pytest.raises(HistoryError, match=r"message 1, \d+ tokens\) is over the budget of 10 tokens"):
        budget_history(approximate_counter(), 10)(h)


def test_budget_leaving_only_results_raises() -> None:
    h = [user("q" * 200), assistant(ToolCall("a", "f", '{"x": "' + "y" * 300 + '"}')), tool(_res("a"))]
    counter = approximate_counter()
    with pytest.raises(HistoryError, match="nothing that can open"):
        budget_history(counter, counter(h[2]) + 1)(h)


def test_counts_are_cached_per_message_so_a_growing_conversation_costs_only_its_new_messages() -> None:
    counter = _Counting()
    processor = budget_history(counter, 10**9)
    h = _chat()
    processor(h)
    assert counter.calls == len(h)
    grown = [*h, user("q3"), assistant("answer 3")]
    processor(grown)
    assert counter.calls == len(h) + 2
    processor(grown)
    assert counter.calls == len(h) + 2


def test_the_cache_does_not_keep_messages_alive() -> None:
    processor = budget_history(_Counting(), 10**9)
    processor([user("temporary")])
    gc.collect()
    assert len(processor._counts) == 0  # pyright: ignore[reportPrivateUsage]


def test_a_bad_counter_result_is_a_user_error() -> None:
    with pytest.raises(UserError, match="token counter returned"):
        budget_history(lambda m: -1, 10)([user("x")])


@pytest.mark.parametrize("bad", [0, -5, 2.5])
def test_budget_validates_its_arguments(bad: object) -> None:
    with pytest.raises(UserError, match="max_tokens"):
        budget_history(approximate_counter(), bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="token counter"):
        budget_history(42, 10)  # type: ignore[arg-type]


def test_trim_report_serializes() -> None:
    _, report = trim_history(6).apply(_chat())
    assert msgspec.json.decode(report.to_json()) == {"kept": 5, "dropped": 5, "boundary": 1, "tokens": None}


# -- properties ---------------------------------------------------------------------------------


@given(valid_histories(max_turns=6), st.integers(1, 30))
def test_trim_never_splits_a_pair(h: list[Message], n: int) -> None:
    try:
        out, report = trim_history(n).apply(h)
    except HistoryError:
        assert all(m.role in ("tool", "system") for m in h[len(h) - n :])
        return
    assert out == h[report.start :]
    if len(h) <= n:
        assert out == h
    else:
        assert len(out) <= n
        assert out[0].role in ("user", "assistant")
    assert check_history(out) == []


def _answered_right_after(h: list[Message], at: int) -> set[str]:
    ids: set[str] = set()
    j = at + 1
    while j < len(h) and h[j].role == "tool":
        ids.update(r.call_id for r in h[j].tool_results)
        j += 1
    return ids


@given(histories, st.integers(1, 30))
def test_trim_keeps_a_suffix_and_opens_cleanly(h: list[Message], n: int) -> None:
    try:
        out, report = trim_history(n).apply(h)
    except HistoryError:
        assert all(m.role != "user" for m in h[len(h) - n :])
        return
    assert out == h[report.start :]
    if len(h) > n:
        first = out[0]
        assert first.role in ("user", "assistant")
        open_ids = {c.id for c in first.tool_calls if c.id} - _answered_right_after(h, report.start)
        cut_results = {r.call_id for m in h[: report.start] for r in m.tool_results}
        assert not open_ids & cut_results


@given(valid_histories(max_turns=6), st.integers(1, 2000))
def test_budget_never_exceeds_the_budget_nor_splits_a_pair(h: list[Message], budget: int) -> None:
    counter = approximate_counter()
    processor = budget_history(counter, budget)
    try:
        out, report = processor.apply(h)
    except HistoryError:
        return
    total = sum(counter(m) for m in out)
    assert total == report.tokens
    assert total <= budget
    assert out == h[report.start :]
    assert check_history(out) == []
    if out != h:
        assert sum(counter(m) for m in h) > budget


_SHARED = budget_history(approximate_counter(), 400)


@given(histories)
def test_one_processor_across_many_histories_never_serves_a_stale_count(h: list[Message]) -> None:
    # Messages of earlier examples die and their ids get reused: counts must still be fresh.
    counter = approximate_counter()
    for m in h:
        assert _SHARED.count(m) == counter(m)
