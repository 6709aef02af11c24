"""Every history function rejects what is not a sequence of messages with a typed tether error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether import Message, TetherError, Text, ToolCall, ToolResult, UserError, assistant, tool, user
from tether.history import (
    approximate_counter,
    budget_history,
    check_history,
    normalize_history,
    prune_history,
    sanitize_history,
    trim_history,
)

FUNCTIONS: dict[str, Callable[[Any], object]] = {
    "check_history": check_history,
    "normalize_history": normalize_history,
    "sanitize_history": sanitize_history,
    "trim_history": trim_history(2),
    "budget_history": budget_history(approximate_counter(), 10_000),
    "prune_history": prune_history,
}


def _history() -> list[Message]:
    return [
        user("q"),
        assistant(ToolCall("c1", "f")),
        tool(ToolResult("c1", "f", (Text("r"),))),
        assistant("a"),
        user("q2"),
        assistant("a2"),
    ]


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("bad", [None, 42, 3.5, object(), "user: hi", b"bytes"])
def test_a_non_sequence_is_a_user_error_naming_the_function(name: str, bad: object) -> None:
    with pytest.raises(UserError, match=f"{name} takes a sequence of messages, not "):
        FUNCTIONS[name](bad)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_single_message_is_a_user_error_that_says_to_wrap_it(name: str) -> None:
    with pytest.raises(UserError, match="a single Message"):
        FUNCTIONS[name](user("hi"))


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("at", [0, 2, 5])
@pytest.mark.parametrize("bad", [None, "hi", {"role": "user"}, Text("hi")])
def test_an_item_that_is_not_a_message_is_named_by_index(name: str, at: int, bad: object) -> None:
    h: list[object] = list(_history())
    h[at] = bad
    with pytest.raises(UserError, match=rf"history\[{at}\] is a {type(bad).__name__}, not a Message"):
        FUNCTIONS[name](h)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_any_iterable_of_messages_is_accepted(name: str) -> None:
    def messages() -> Iterator[Message]:
        yield from _history()

    from_generator = FUNCTIONS[name](messages())
    from_tuple = FUNCTIONS[name](tuple(_history()))
    from_list = FUNCTIONS[name](list(_history()))
    assert from_generator == from_tuple == from_list  # the generator was read exactly once


@pytest.mark.parametrize("name", FUNCTIONS)
def test_a_short_history_is_checked_too(name: str) -> None:
    # trim and budget return a history that fits unchanged: they must still check its items.
    with pytest.raises(TetherError, match=r"history\[1\]"):
        FUNCTIONS[name]([user("q"), None])


def test_the_budget_counts_only_messages() -> None:
    processor = budget_history(approximate_counter(), 10)
    with pytest.raises(UserError, match="budget_history counts Messages, not a str"):
        processor.count("hi")  # type: ignore[arg-type]
