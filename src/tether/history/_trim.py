"""History processors: ``trim_history`` (by count) and ``budget_history`` (by tokens).

Both keep the newest messages, then move the cut forward past anything that cannot open a
request (ADR 0002): tool messages (their calls were cut), system messages (runs never send them),
and an assistant tool-call turn whose results lie in the cut part. What they return is a suffix of
what they were given, so a call is never separated from the results right after it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import msgspec

from tether.errors import HistoryError, UserError
from tether.history._tokens import TokenCounter
from tether.messages import Message, ToolCall, ToolResult

__all__ = ["BudgetHistory", "TrimHistory", "TrimReport", "budget_history", "trim_history"]

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class TrimReport:
    """What a processor cut: ``dropped`` messages from the front (``start`` is the index of the
    first kept one), of which ``boundary`` were dropped only to keep the window openable.
    ``tokens`` is the counted size of what was kept (``None`` for ``trim_history``)."""

    kept: int
    dropped: int
    boundary: int = 0
    tokens: int | None = None

    @property
    def start(self) -> int:
        return self.dropped

    def to_json(self) -> bytes:
        """The report as JSON."""
        return _encoder.encode(self)


def _as_list(history: Iterable[Message]) -> list[Message] | tuple[Message, ...]:
    return history if isinstance(history, list | tuple) else list(history)


def _results_cut(msgs: Sequence[Message], at: int) -> bool:
    """Whether results of the calls of the assistant message at ``at`` lie before it.

    Only calls left unanswered by the tool messages right after it are looked for, so a
    normalized history never pays for the scan of the cut part."""
    ids = {p.id for p in msgs[at].parts if type(p) is ToolCall and p.id}
    j = at + 1
    while ids and j < len(msgs) and msgs[j].role == "tool":
        ids.difference_update(r.call_id for r in msgs[j].parts if type(r) is ToolResult)
        j += 1
    if not ids:
        return False
    return any(
        type(r) is ToolResult and r.call_id in ids for m in msgs[:at] if m.role == "tool" for r in m.parts
    )


def _opening(msgs: Sequence[Message], start: int) -> int:
    """The first index at or after ``start`` that can open a request."""
    n = len(msgs)
    i = start
    while i < n:
        m = msgs[i]
        if type(m) is not Message:
            raise UserError(f"history[{i}] is a {type(m).__name__}, not a Message")
        role = m.role
        if role == "user":
            return i
        # An assistant turn can open unless results of its calls would be cut (they lie before
        # it): then it and its block go too. A normalized history never has that.
        if role == "assistant" and not _results_cut(msgs, i):
            return i
        i += 1
    raise HistoryError(
        f"the cut at message {start} leaves nothing that can open a request "
        f"(messages {start}..{n - 1} are only tool results, system messages or cut tool turns)"
    )


class TrimHistory:
    """The processor ``trim_history(max_messages)`` returns."""

    __slots__ = ("max_messages",)

    def __init__(self, max_messages: int) -> None:
        if type(max_messages) is not int or max_messages < 1:
            raise UserError(f"trim_history needs max_messages >= 1, not {max_messages!r}")
        self.max_messages = max_messages

    def apply(self, history: Iterable[Message]) -> tuple[list[Message], TrimReport]:
        """The trimmed history and what was cut."""
        msgs = _as_list(history)
        n = len(msgs)
        if n <= self.max_messages:
            return list(msgs), TrimReport(n, 0)
        cut = n - self.max_messages
        start = _opening(msgs, cut)
        return list(msgs[start:]), TrimReport(n - start, start, start - cut)

    def __call__(self, history: Iterable[Message]) -> list[Message]:
        """The newest ``max_messages`` messages, cut where a request can open."""
        return self.apply(history)[0]

    def __repr__(self) -> str:
        return f"trim_history({self.max_messages})"


def trim_history(max_messages: int) -> TrimHistory:
    """A history processor keeping the newest ``max_messages`` messages, then advancing past
    anything that cannot open a request. A history of ``max_messages`` or fewer is returned
    unchanged; a cut that leaves nothing openable raises ``HistoryError``."""
    return TrimHistory(max_messages)


class _Count(weakref.ref[Message]):
    """A cache entry: a weak reference to the message, with its id and token count."""

    __slots__ = ("key", "tokens")

    key: int
    tokens: int


class BudgetHistory:
    """The processor ``budget_history(counter, max_tokens)`` returns.

    Counts are cached per message object for as long as the message lives (messages are
    immutable): keyed by identity, so a message's content is never hashed, and evicted by a
    weak-reference callback when the message is collected.
    """

    __slots__ = ("__weakref__", "_counts", "counter", "max_tokens")

    def __init__(self, counter: TokenCounter, max_tokens: int) -> None:
        if not callable(counter):
            raise UserError("budget_history needs a token counter: a callable message -> int")
        if type(max_tokens) is not int or max_tokens < 1:
            raise UserError(f"budget_history needs max_tokens >= 1, not {max_tokens!r}")
        self.counter = counter
        self.max_tokens = max_tokens
        self._counts: dict[int, _Count] = {}

    def _evict(self, entry: weakref.ref[Message]) -> None:
        key = cast(_Count, entry).key
        if self._counts.get(key) is entry:
            del self._counts[key]

    def count(self, message: Message) -> int:
        """The (cached) token count of one message."""
        key = id(message)
        entry = self._counts.get(key)
        if entry is not None and entry() is message:
            return entry.tokens
        tokens = self.counter(message)
        if type(tokens) is not int or tokens < 0:
            raise UserError(f"the token counter returned {tokens!r}; it must return an int >= 0")
        entry = _Count(message, self._evict)
        entry.key = key
        entry.tokens = tokens
        self._counts[key] = entry
        return tokens

    def apply(self, history: Iterable[Message]) -> tuple[list[Message], TrimReport]:
        """The newest messages within the budget, and what was cut."""
        msgs = _as_list(history)
        n = len(msgs)
        get = self._counts.get
        count = self.count
        budget = self.max_tokens
        total = 0
        j = n
        while j > 0:
            m = msgs[j - 1]
            if type(m) is not Message:
                raise UserError(f"history[{j - 1}] is a {type(m).__name__}, not a Message")
            entry = get(id(m))
            tokens = entry.tokens if entry is not None and entry() is m else count(m)
            if total + tokens > budget:
                break
            total += tokens
            j -= 1
        if j == 0:
            return list(msgs), TrimReport(n, 0, 0, total)
        if j == n:
            raise HistoryError(
                f"the newest message (message {n - 1}, {self.count(msgs[n - 1])} tokens) "
                f"is over the budget of {budget} tokens"
            )
        start = _opening(msgs, j)
        kept = total - sum(count(m) for m in msgs[j:start])
        return list(msgs[start:]), TrimReport(n - start, start, start - j, kept)

    def __call__(self, history: Iterable[Message]) -> list[Message]:
        """The newest messages whose counted tokens fit ``max_tokens``, cut where a request can open."""
        return self.apply(history)[0]

    def __repr__(self) -> str:
        return f"budget_history({self.counter!r}, {self.max_tokens})"


def budget_history(counter: TokenCounter, max_tokens: int) -> BudgetHistory:
    """A history processor keeping the newest messages that fit ``max_tokens`` by ``counter``,
    with ``trim_history``'s boundary rule; it never separates a call from its results. A history
    that fits is returned unchanged; a cut that leaves nothing openable raises ``HistoryError``."""
    return BudgetHistory(counter, max_tokens)
