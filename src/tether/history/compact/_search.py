"""Ranked keyword search over messages: what ``recall`` runs on a conversation's compacted part,
usable as well for an in-memory store's search.

A query is cut into terms (words and identifiers, so ``src/app.py``, ``DB-4471`` and ``1e-3``
stay whole; case is ignored). A message matches when its transcript text (``render_message``:
texts, call names, ids and arguments, result contents) contains a term; its score adds, per term,
the occurrences (at most 5) weighted by how rare the term is among the messages searched, plus
a bonus when the whole query appears as written. Ties go to the more recent message. Each hit
carries an excerpt of bounded size around its first match.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tether.errors import UserError
from tether.history.compact._input import render_message
from tether.messages import Message

__all__ = ["SearchHit", "format_hits", "query_terms", "search_messages"]

_TERM = re.compile(r"\w(?:[\w./:@#+-]*\w)?")
_SPACE = re.compile(r"\s+")
MAX_TERMS = 32
MAX_QUERY_CHARS = 1_000
ECHO_CHARS = 200


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One matching message: its ``position`` (index in what was searched plus the offset), its
    ``role``, the ``score``, an ``excerpt`` and where it lies in the message's transcript text
    (``start``/``end`` of ``length`` characters)."""

    position: int
    role: str
    score: float
    excerpt: str
    start: int
    end: int
    length: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def query_terms(query: str) -> list[str]:
    """The distinct lowercase terms of a query, in order (at most 32)."""
    if not isinstance(query, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"a search query must be a string, not {type(query).__name__}")
    seen: dict[str, None] = {}
    for match in _TERM.finditer(query[:MAX_QUERY_CHARS].lower()):
        seen.setdefault(match.group(0).strip(".:/-"), None)
    return [t for t in seen if t][:MAX_TERMS]


def search_messages(
    messages: Sequence[Message],
    query: str,
    *,
    limit: int = 5,
    max_chars: int = 1_500,
    offset: int = 0,
) -> list[SearchHit]:
    """The ``limit`` messages best matching ``query``, best first, each with an excerpt of at
    most ``max_chars`` characters. Positions are ``offset + index``. O(total text searched)."""
    if type(limit) is not int or limit < 1:
        raise UserError(f"search needs limit >= 1, not {limit!r}")
    if type(max_chars) is not int or max_chars < 80:
        raise UserError(f"search needs max_chars >= 80, not {max_chars!r}")
    terms = query_terms(query)
    if not terms:
        return []
    phrase = _SPACE.sub(" ", query.strip().lower())
    texts = [render_message(m, max_part_chars=0) for m in messages]
    lowered = [t.lower() for t in texts]
    counts = [[min(low.count(term), 5) for term in terms] for low in lowered]
    n = len(messages)
    weights: list[float] = []
    for k in range(len(terms)):
        df = sum(1 for row in counts if row[k])
        weights.append(math.log(1 + n / df) if df else 0.0)
    scored: list[tuple[float, int]] = []
    for i, row in enumerate(counts):
        score = sum(c * w for c, w in zip(row, weights, strict=True))
        if not score:
            continue
        if len(terms) > 1 and phrase in lowered[i]:
            score += 2 * sum(weights)
        scored.append((score, i))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    hits: list[SearchHit] = []
    for score, i in scored[:limit]:
        text, low = texts[i], lowered[i]
        found = [t for t in terms if t in low]
        if phrase in low:
            found.insert(0, phrase)
        first = min(low.find(t) for t in found)
        start = 0 if len(text) <= max_chars else max(0, min(first - max_chars // 3, len(text) - max_chars))
        end = min(len(text), start + max_chars)
        hits.append(
            SearchHit(offset + i, messages[i].role, round(score, 4), text[start:end], start, end, len(text))
        )
    return hits


def _echo(query: str) -> str:
    """The query as the header repeats it: at most ``ECHO_CHARS`` characters of it."""
    if len(query) <= ECHO_CHARS:
        return repr(query)
    return f"{query[:ECHO_CHARS]!r}… ({len(query):,} characters)"


def format_hits(hits: Sequence[SearchHit], *, query: str, searched: int) -> str:
    """Hits as text for a model: a header line (repeating at most the first 200 characters of the
    query), then each hit with its position and, when the excerpt is part of a longer message,
    which characters it shows."""
    shown = _echo(query)
    if not hits:
        return f"No message among the {searched:,} searched matches {shown}."
    lines = [f"{len(hits)} of the {searched:,} searched messages match {shown}, best first:"]
    for hit in hits:
        lines.append("")
        lines.append(f"--- message {hit.position} ({hit.role}) ---")
        lines.append(hit.excerpt)
        if hit.start or hit.end < hit.length:
            lines.append(f"[characters {hit.start:,}-{hit.end:,} of {hit.length:,}]")
    return "\n".join(lines)
