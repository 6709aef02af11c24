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
from tether.history._input import as_messages
from tether.history._tokens import ApproximateCounter, TokenCounter
from tether.messages import Message, ToolCall, ToolResult

__all__ = ["CACHE_SIZE", "BudgetHistory", "TrimHistory", "TrimReport", "budget_history", "trim_history"]

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


def _unanswered(msgs: Sequence[Message], at: int) -> set[str]:
    """Ids of the calls of the assistant message at ``at`` that the tool messages right after it
    leave unanswered (calls without an id are never looked for)."""
    ids = {p.id for p in msgs[at].parts if type(p) is ToolCall and p.id}
    j = at + 1
    n = len(msgs)
    while ids and j < n and msgs[j].role == "tool":
        ids.difference_update(r.call_id for r in msgs[j].parts if type(r) is ToolResult)
        j += 1
    return ids


def _opening(msgs: Sequence[Message], start: int) -> int:
    """The first index at or after ``start`` that can open a request.

    A user message can open; an assistant message can open unless a result of one of its calls
    that is not right after it lies before it (in a normalized history that never happens: then
    it and its block go too). One pass: the results before each candidate are gathered
    incrementally, and only once a candidate has an unanswered call, so a normalized history
    never pays for a scan of the cut part."""
    n = len(msgs)
    answered_before: set[str] | None = None  # call ids of results in msgs[:scanned]
    scanned = 0
    i = start
    while i < n:
        role = msgs[i].role
        if role == "user":
            return i
        if role == "assistant":
            open_ids = _unanswered(msgs, i)
            if not open_ids:
                return i
            if answered_before is None:
                answered_before = set()
            for m in msgs[scanned:i]:
                if m.role == "tool":
                    answered_before.update(r.call_id for r in m.parts if type(r) is ToolResult)
            scanned = i
            if answered_before.isdisjoint(open_ids):
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
        msgs = as_messages(history, "trim_history")
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
    """An identity-cache entry: a weak reference to the message, with its id and token count."""

    __slots__ = ("key", "tokens")

    key: int
    tokens: int


CACHE_SIZE = 10_000
"""Default number of messages ``budget_history`` remembers by content (see ``BudgetHistory``)."""


class BudgetHistory:
    """The processor ``budget_history(counter, max_tokens)`` returns.

    Token counts are cached in two layers (messages are immutable, so a count never goes stale):

    - by identity, for as long as the message object lives: no content is hashed, and the entry
      is evicted by a weak-reference callback when the message is collected;
    - by content, for at most ``cache_size`` messages (and at least the ``cache_size / 2`` used
      most recently): a history decoded from JSON or loaded from a store on every request holds
      new objects equal to the ones already counted, and they are found here (one hash and one
      equality test each, both in C) instead of being counted again. This table keeps up to
      ``cache_size`` messages alive; ``cache_size=0`` turns it off. The default (``None``) is
      ``CACHE_SIZE``, or ``0`` for an ``ApproximateCounter``, whose rule costs less than a
      lookup by content.

    So a conversation re-run with more messages, whether the same objects or freshly decoded
    ones, costs counting only its new messages.
    """

    __slots__ = ("__weakref__", "_counts", "_older", "_recent", "cache_size", "counter", "max_tokens")

    def __init__(self, counter: TokenCounter, max_tokens: int, *, cache_size: int | None = None) -> None:
        if not callable(counter):
            raise UserError("budget_history needs a token counter: a callable message -> int")
        if type(max_tokens) is not int or max_tokens < 1:
            raise UserError(f"budget_history needs max_tokens >= 1, not {max_tokens!r}")
        if cache_size is None:
            # The approximate rule costs less than one lookup by content (a hash and an equality
            # test over the whole message): recounting is the cheaper way for it.
            cache_size = 0 if isinstance(counter, ApproximateCounter) else CACHE_SIZE
        elif type(cache_size) is not int or cache_size < 0:
            raise UserError(f"budget_history needs cache_size >= 0 (or None), not {cache_size!r}")
        self.counter = counter
        self.max_tokens = max_tokens
        self.cache_size = cache_size
        self._counts: dict[int, _Count] = {}
        # Two generations of at most ``cache_size / 2`` messages each: a hit in the older one
        # moves the entry to the recent one, so what is still in use survives the next turnover.
        self._recent: dict[Message, int] = {}
        self._older: dict[Message, int] = {}

    def _remember(self, message: Message, tokens: int) -> None:
        recent = self._recent
        recent[message] = tokens
        if 2 * len(recent) >= self.cache_size:  # a new generation: the oldest one is forgotten
            self._older = recent
            self._recent = {}

    def _evict(self, entry: weakref.ref[Message]) -> None:
        key = cast(_Count, entry).key
        if self._counts.get(key) is entry:
            del self._counts[key]

    def count(self, message: Message) -> int:
        """The (cached) token count of one message."""
        entry = self._counts.get(id(message))
        if entry is not None and entry() is message:
            return entry.tokens
        if type(message) is not Message:
            raise UserError(f"budget_history counts Messages, not a {type(message).__name__}")
        return self._count_new(message)

    def _count_new(self, message: Message) -> int:
        """The count of a message object not in the identity cache (looked up by content)."""
        tokens = None
        if self.cache_size:
            tokens = self._recent.get(message)
            if tokens is None:
                tokens = self._older.pop(message, None)
                if tokens is not None:
                    self._remember(message, tokens)
        if tokens is None:
            tokens = self.counter(message)
            if type(tokens) is not int or tokens < 0:
                raise UserError(f"the token counter returned {tokens!r}; it must return an int >= 0")
            if self.cache_size:
                self._remember(message, tokens)
        key = id(message)
        entry = _Count(message, self._evict)
        entry.key = key
        entry.tokens = tokens
        self._counts[key] = entry
        return tokens

    def apply(self, history: Iterable[Message]) -> tuple[list[Message], TrimReport]:
        """The newest messages within the budget, and what was cut."""
        msgs = as_messages(history, "budget_history")
        n = len(msgs)
        get = self._counts.get
        count_new = self._count_new
        budget = self.max_tokens
        total = 0
        j = n
        while j > 0:
            m = msgs[j - 1]
            entry = get(id(m))
            tokens = entry.tokens if entry is not None and entry() is m else count_new(m)
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
        count = self.count
        kept = total - sum(count(m) for m in msgs[j:start])
        return list(msgs[start:]), TrimReport(n - start, start, start - j, kept)

    def __call__(self, history: Iterable[Message]) -> list[Message]:
        """The newest messages whose counted tokens fit ``max_tokens``, cut where a request can open."""
        return self.apply(history)[0]

    def __repr__(self) -> str:
        return f"budget_history({self.counter!r}, {self.max_tokens})"


def budget_history(counter: TokenCounter, max_tokens: int, *, cache_size: int | None = None) -> BudgetHistory:
    """A history processor keeping the newest messages that fit ``max_tokens`` by ``counter``,
    with ``trim_history``'s boundary rule; it never separates a call from its results. A history
    that fits is returned unchanged; a cut that leaves nothing openable raises ``HistoryError``.
    ``cache_size`` bounds how many messages it remembers by content (``BudgetHistory``)."""
    return BudgetHistory(counter, max_tokens, cache_size=cache_size)
