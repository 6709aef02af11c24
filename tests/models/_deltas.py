"""The contract between a streamed response's deltas and its final message, checked the same way
for every driver: each delta names a part of the final message of its own kind (``TextDelta`` a
``Text``, ``ReasoningDelta`` a ``Reasoning``, ``ToolCallDelta`` a ``ToolCall``), and per part index
the deltas concatenated are that part (its text, or a call's arguments). A call's name arrives in
a delta before or with its arguments. A UI that renders only the deltas shows the final message."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from hypothesis import strategies as st

from tether.messages import Message, Reasoning, Text, ToolCall
from tether.models import ModelResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta

_KIND = {TextDelta: Text, ReasoningDelta: Reasoning, ToolCallDelta: ToolCall}


def check_deltas(events: Iterable[StreamEvent], message: Message) -> None:
    """Fail (with what differs) unless the deltas among ``events`` add up to ``message``'s parts."""
    parts = message.parts
    joined: dict[int, str] = {}
    named: dict[int, str] = {}
    for event in events:
        if isinstance(event, ModelResponse):
            continue
        assert 0 <= event.index < len(parts), f"{event!r} names no part of {parts!r}"
        part = parts[event.index]
        expected = _KIND[type(event)]
        assert type(part) is expected, f"{event!r} is a delta of a {expected.__name__}, part is {part!r}"
        if isinstance(event, ToolCallDelta):
            assert isinstance(part, ToolCall)
            if event.name is not None:
                assert event.name == part.name, (event, part)
                named[event.index] = event.name
            if event.id is not None:
                assert event.id == part.id, (event, part)
            if event.arguments:
                assert event.index in named, f"arguments before the call's name: {event!r}"
            joined[event.index] = joined.get(event.index, "") + event.arguments
        else:
            joined[event.index] = joined.get(event.index, "") + event.text
    for index, part in enumerate(parts):
        if isinstance(part, ToolCall):
            assert named.get(index) == part.name, f"part {index}: no delta named the call {part!r}"
            assert joined.get(index, "") == part.arguments, (index, joined.get(index), part)
        elif isinstance(part, (Text, Reasoning)):
            assert joined.get(index, "") == part.text, (index, joined.get(index), part)


def pieces(draw: st.DrawFn, text: str, *, min_pieces: int = 0) -> list[str]:
    """``text`` cut at drawn places (possibly not at all, possibly into empty pieces)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), min_size=min_pieces, max_size=4)))
    edges = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def final(events: Sequence[StreamEvent]) -> ModelResponse:
    last = events[-1]
    assert isinstance(last, ModelResponse), last
    return last
