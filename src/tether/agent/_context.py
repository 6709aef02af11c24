"""``RunContext``: what a tool, a dynamic instruction or a history processor may see of a run."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Generic, TypeVar, overload

from tether.messages import Message, Usage

__all__ = ["MessagesView", "RunContext"]

Deps = TypeVar("Deps")


class MessagesView(Sequence[Message]):
    """A read-only, fixed-length view of the first ``n`` messages of a list that only grows.

    Handing a model or a tool this view costs O(1) per step, where a copy would cost O(history).
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Message], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):  # the slice of the first n items, without copying them all
            span = range(self._n)[index]
            return self._items[span.start : span.stop : span.step] if span else []
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("message index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._items, self._n)

    def __repr__(self) -> str:
        return f"MessagesView({self._n} messages)"


@dataclass(frozen=True, slots=True)
class RunContext(Generic[Deps]):
    """The run as seen from a tool, a dynamic instruction function or a history processor.

    ``messages`` is the conversation sent so far (a read-only view); ``step`` counts model
    requests made so far; ``tool_call_id`` is set while a tool runs.
    """

    deps: Deps
    run_id: str
    conversation_id: str
    messages: Sequence[Message] = ()
    usage: Usage = Usage()  # noqa: RUF009 - Usage is immutable
    step: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None
