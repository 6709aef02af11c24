"""trim_history and budget_history: the boundary rule, the budget, the cache."""

from __future__ import annotations

import gc
import inspect
import weakref

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tether import (
    HistoryError,
    Message,
    Text,
    ToolCall,
    ToolResult,
    UserError,
    assistant,
    dumps,
    loads,
    system,
    tool,
    user,
)
from tether.history import (
    CACHE_SIZE,
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


def test_counts_are_reused_for_an_equal_history_decoded_again() -> None:
    # The server case: the same conversation is loaded from JSON (or a store) on every request,
    # so every run sees new message objects equal to the ones already counted.
    counter = _Counting()
    processor = budget_history(counter, 10**9)
    h = _chat()
    processor(h)
    assert counter.calls == len(h)
    again = loads(dumps(h))
    assert again == h
    assert all(a is not b for a, b in zip(again, h, strict=True))
    assert processor(again) == again
    assert counter.calls == len(h)
    grown = [*loads(dumps(h)), user("q3"), assistant("answer 3")]
    out, report = processor.apply(grown)
    assert out == grown
    assert counter.calls == len(h) + 2
    assert report.tokens == sum(counter(m) for m in grown)


def test_a_count_found_by_content_is_the_count_of_that_content() -> None:
    counter = _Counting()
    processor = budget_history(counter, 10**9)
    processor([user("abc"), user("abcdef")])
    calls = counter.calls
    assert processor.count(user("abc")) == counter(user("abc"))
    assert processor.count(user("abcdef")) == counter(user("abcdef"))
    assert processor.count(user("abcdefg")) == counter(user("abcdefg"))
    assert counter.calls == calls + 4  # 3 direct calls, one miss: "abcdefg"


def test_the_content_cache_is_bounded_and_keeps_what_is_still_in_use() -> None:
    counter = _Counting()
    processor = budget_history(counter, 10**9, cache_size=4)
    processor.count(user("a"))
    processor.count(user("b"))
    processor.count(user("a"))  # a fresh equal object: found, so "a" is recent again
    processor.count(user("c"))
    processor.count(user("d"))  # "b" was not used since: forgotten
    assert counter.calls == 4
    processor.count(user("a"))
    assert counter.calls == 4
    processor.count(user("b"))
    assert counter.calls == 5


def test_the_approximate_counter_recounts_instead_of_looking_up_by_content() -> None:
    assert budget_history(approximate_counter(), 10).cache_size == 0
    assert budget_history(_Counting(), 10).cache_size == CACHE_SIZE
    assert budget_history(approximate_counter(), 10, cache_size=5).cache_size == 5


def test_the_cache_keeps_at_most_cache_size_messages_alive() -> None:
    processor = budget_history(_Counting(), 10**9, cache_size=3)
    temporary = [user(f"temporary {i}") for i in range(10)]
    refs = [weakref.ref(m) for m in temporary]
    processor(temporary)
    del temporary
    gc.collect()
    alive = [r() is not None for r in refs]
    assert 0 < sum(alive) <= 3
    assert alive[0]  # counted last (the budget walks from the newest back)
    assert len(processor._counts) == sum(alive)  # pyright: ignore[reportPrivateUsage]
    off = budget_history(_Counting(), 10**9, cache_size=0)
    off([user("temporary")])
    gc.collect()
    assert len(off._counts) == 0  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("bad", [-1, 2.5, "9"])
def test_cache_size_is_validated(bad: object) -> None:
    with pytest.raises(UserError, match="cache_size"):
        budget_history(approximate_counter(), 10, cache_size=bad)  # type: ignore[arg-type]


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


def _results_cut_oracle(h: list[Message], at: int) -> bool:
    """The original quadratic definition: calls of ``h[at]`` not answered right after it whose
    results lie anywhere before it (rescans ``h[:at]`` for every candidate)."""
    ids = {p.id for p in h[at].parts if isinstance(p, ToolCall) and p.id}
    j = at + 1
    while ids and j < len(h) and h[j].role == "tool":
        ids -= {r.call_id for r in h[j].tool_results}
        j += 1
    return bool(ids) and any(r.call_id in ids for m in h[:at] if m.role == "tool" for r in m.tool_results)


def _opening_oracle(h: list[Message], start: int) -> int | None:
    for i in range(start, len(h)):
        if h[i].role == "user" or (h[i].role == "assistant" and not _results_cut_oracle(h, i)):
            return i
    return None


@given(histories)
def test_the_linear_boundary_equals_the_quadratic_definition(h: list[Message]) -> None:
    for n in range(1, len(h)):
        expected = _opening_oracle(h, len(h) - n)
        try:
            _, report = trim_history(n).apply(h)
        except HistoryError:
            assert expected is None
        else:
            assert report.start == expected


@given(histories, st.data())
def test_budget_uses_the_same_boundary(h: list[Message], data: st.DataObject) -> None:
    assume(len(h) > 1)
    counter = approximate_counter()  # at least 4 tokens a message
    j = data.draw(st.integers(1, len(h) - 1))
    budget = sum(counter(m) for m in h[j:])  # the newest len(h) - j messages fit, one more does not
    expected = _opening_oracle(h, j)
    try:
        _, report = budget_history(counter, budget).apply(h)
    except HistoryError:
        assert expected is None
    else:
        assert report.start == expected
