"""Per-message memos owned by their caller (a driver): values looked up by message identity and
forgotten with the message.

Messages are immutable, so whatever was computed from one (its encoding for a target, the fact
that it passed a content check) stays true for as long as it lives. Entries are keyed by
``id(message)`` *and* hold a weak reference that is compared on every lookup, so a recycled id
never returns another message's value, and the entry is removed when the message dies. Nothing
here is shared between drivers: each driver creates its own memos (no process-wide state).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

from tether.messages import Message
from tether.models._base import Profile

__all__ = ["MessageTable", "PerMessageCache"]

_V = TypeVar("_V")
_Entry = tuple["weakref.ReferenceType[Message]", _V]


class MessageTable(Mapping[int, _V], Generic[_V]):
    """``message -> value`` by identity; an entry disappears with its message.

    As a ``Mapping`` it is keyed by ``id(message)`` (for tests and diagnostics); use :meth:`get_for`
    and :meth:`put` to read and write, which check that the id still belongs to the same message.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, _Entry[_V]] = {}

    def get_for(self, message: Message) -> _V | None:
        """The value stored for this very message object, or ``None``."""
        entry = self._entries.get(id(message))
        if entry is not None and entry[0]() is message:
            return entry[1]
        return None

    def has(self, message: Message) -> bool:
        """Whether a value is stored for this very message object."""
        entry = self._entries.get(id(message))
        return entry is not None and entry[0]() is message

    def missing(self, messages: Sequence[Message]) -> list[tuple[int, Message]]:
        """``(index, message)`` for each of ``messages`` with no value stored (one pass, for the
        per-step loops that skip what they already did)."""
        entries = self._entries
        out: list[tuple[int, Message]] = []
        for index, message in enumerate(messages):
            entry = entries.get(id(message))
            if entry is None or entry[0]() is not message:
                out.append((index, message))
        return out

    def put(self, message: Message, value: _V) -> None:
        """Store ``value`` for ``message`` until the message is garbage-collected."""
        key = id(message)
        entries = self._entries

        def forget(ref: weakref.ReferenceType[Message]) -> None:
            current = entries.get(key)
            if current is not None and current[0] is ref:
                del entries[key]

        entries[key] = (weakref.ref(message, forget), value)

    def __getitem__(self, key: int) -> _V:
        return self._entries[key][1]

    def __iter__(self) -> Iterator[int]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()


class PerMessageCache(Generic[_V]):
    """Encodings per target profile and message, so building the request at each step of a run
    converts only the messages added since the previous step.

    Each driver owns one (there is no process-wide cache). Cached values are shared by every
    request that reuses the message: callers treat them as read-only.
    """

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[Profile, MessageTable[_V]] = {}

    def table(self, profile: Profile) -> MessageTable[_V]:
        """The entries for ``profile`` (created on first use)."""
        table = self._tables.get(profile)
        if table is None:
            table = self._tables.setdefault(profile, MessageTable())
        return table

    def encode(
        self, messages: Sequence[Message], profile: Profile, encode: Callable[[Message, Profile], _V]
    ) -> list[_V]:
        """``[encode(message, profile) for message in messages]``, reusing cached results."""
        table = self.table(profile)
        entries = table._entries  # pyright: ignore[reportPrivateUsage]  (the hot loop of every step)
        out: list[_V] = []
        for message in messages:
            entry = entries.get(id(message))
            if entry is not None and entry[0]() is message:
                out.append(entry[1])
                continue
            value = encode(message, profile)
            table.put(message, value)
            out.append(value)
        return out

    def __getitem__(self, profile: Profile) -> MessageTable[_V]:
        """The live entries for ``profile``, keyed by ``id(message)`` (for tests and diagnostics)."""
        return self._tables[profile]

    def clear(self) -> None:
        """Forget every cached encoding."""
        self._tables.clear()
