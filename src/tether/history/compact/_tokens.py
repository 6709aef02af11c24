"""Token bookkeeping for compaction: a running tally over a growing history, and the trigger.

``TokenTally`` keeps prefix sums of message token counts, counted through ``budget_history``'s
cache (by identity, then by content), so checking a run's history before each request costs
O(new messages): the messages counted before are not looked at again. ``Trigger`` says when a
request is over its threshold of the model's window and what the compaction aims at.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tether.errors import UserError
from tether.history._tokens import TokenCounter, approximate_counter
from tether.history._trim import BudgetHistory
from tether.messages import Message

__all__ = ["TokenTally", "Trigger"]

_UNBOUNDED = 1 << 62


class TokenTally:
    """Prefix sums of token counts over a history that only grows (a run's message list).

    ``update(history)`` counts only the messages added since the last update when ``history``
    still starts with the same message objects; any other sequence is recounted (each message
    through the counter's cache, so an equal history costs a lookup per message). ``prefix(i)``
    is the tokens of ``history[:i]``; ``total`` of everything counted.
    """

    __slots__ = ("_budget", "_first", "_last", "_sums")

    def __init__(self, counter: TokenCounter | None = None, *, cache_size: int | None = None) -> None:
        self._budget = BudgetHistory(counter or approximate_counter(), _UNBOUNDED, cache_size=cache_size)
        self._sums: list[int] = [0]
        self._first: Message | None = None
        self._last: Message | None = None

    @property
    def counter(self) -> TokenCounter:
        return self._budget.counter

    def count(self, message: Message) -> int:
        """The (cached) token count of one message."""
        return self._budget.count(message)

    def update(self, history: Sequence[Message]) -> int:
        """Count what is new in ``history`` and return its total tokens."""
        n = len(history)
        seen = len(self._sums) - 1
        if seen and not (n >= seen and history[0] is self._first and history[seen - 1] is self._last):
            self._sums = [0]
            seen = 0
        if n > seen:
            sums = self._sums
            count = self._budget.count
            total = sums[-1]
            for i in range(seen, n):
                total += count(history[i])
                sums.append(total)
            self._first = history[0]
            self._last = history[n - 1]
        elif n == 0:
            self._first = self._last = None
        return self._sums[n]

    def prefix(self, index: int) -> int:
        """Tokens of the first ``index`` messages counted."""
        return self._sums[index]

    def between(self, start: int, end: int) -> int:
        """Tokens of ``history[start:end]``."""
        return self._sums[end] - self._sums[start]

    @property
    def total(self) -> int:
        return self._sums[-1]

    def __len__(self) -> int:
        return len(self._sums) - 1


@dataclass(frozen=True, slots=True)
class Trigger:
    """When to compact: a request of more than ``limit`` tokens (``threshold`` of the usable
    window, which is ``window`` minus ``reserve`` for the answer) is compacted down to at most
    ``goal`` tokens (``target`` of it). ``overhead`` is what every request carries besides the
    messages (instructions, tool definitions): it counts against both."""

    window: int
    threshold: float = 0.8
    target: float = 0.5
    reserve: int = 0
    overhead: int = 0

    def __post_init__(self) -> None:
        for name in ("window", "reserve", "overhead"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise UserError(f"{name} must be an int >= 0, not {value!r}")
        if self.window <= self.reserve:
            raise UserError(f"the window ({self.window}) must be larger than the reserve ({self.reserve})")
        for name in ("threshold", "target"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= 1:
                raise UserError(f"{name} must be a fraction in (0, 1], not {value!r}")
        if self.target >= self.threshold:
            raise UserError(f"target ({self.target}) must be below threshold ({self.threshold})")

    @property
    def usable(self) -> int:
        return self.window - self.reserve

    @property
    def limit(self) -> int:
        """The most message tokens a request may carry before compaction starts."""
        return max(math.floor(self.threshold * self.usable) - self.overhead, 0)

    @property
    def goal(self) -> int:
        """The message tokens a compaction aims at."""
        return max(math.floor(self.target * self.usable) - self.overhead, 0)

    def due(self, tokens: int) -> bool:
        """True when messages of ``tokens`` tokens are over the limit."""
        return tokens > self.limit

    def at(self, fraction: float) -> int:
        """The message tokens at ``fraction`` of the usable window (a soft threshold)."""
        return max(math.floor(fraction * self.usable) - self.overhead, 0)
