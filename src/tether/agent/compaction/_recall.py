"""The ``recall`` tool: search a conversation's compacted part and return the originals.

The tool is built around a loader bound to one conversation of one owner (a store load, or the
run's own messages), so it can only ever read that conversation. It searches the messages the
view no longer shows verbatim (summarized, cut or elided: positions below ``hidden()``) with
``search_messages`` and returns at most ``max_chars`` characters, each hit with its position.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from tether.errors import UserError
from tether.history import SearchHit, format_hits, search_messages
from tether.messages import Message

from .._tools import Tool

__all__ = ["MAX_RECALL_RESULTS", "recall_tool"]

MAX_RECALL_RESULTS = 8
_CUT = "\n[answer cut at its size bound]"


def recall_tool(
    load: Callable[[], Awaitable[Sequence[Message]]],
    *,
    hidden: Callable[[], int] | int | None = None,
    offset: int = 0,
    name: str = "recall",
    max_chars: int = 8_000,
) -> Tool[Any]:
    """A tool the model calls as ``recall(query, limit=5)``.

    ``load()`` returns the conversation's original messages; ``messages[i]`` is at position
    ``offset + i``. Messages at positions below ``hidden`` (a number, or a function read at each
    call, e.g. ``lambda: compactor.hidden``; ``None``: all) are searched. The answer holds at
    most ``max_chars`` characters: the best ``limit`` matches (at most 8), each an excerpt of
    its message around the match, with the message's position."""
    if not callable(load):
        raise UserError("recall_tool needs load: an async function returning the conversation's messages")
    if type(max_chars) is not int or max_chars < 400:
        raise UserError(f"recall_tool needs max_chars >= 400, not {max_chars!r}")
    if type(offset) is not int or offset < 0:
        raise UserError(f"recall_tool needs offset >= 0, not {offset!r}")

    async def recall(query: str, limit: int = 5) -> str:
        """Search the earlier part of this conversation that was summarized or elided, and return
        the original messages that match, with their positions.

        Args:
            query: words, names, identifiers, paths, numbers or error text to look for
            limit: how many matching messages to return (1-8)
        """
        limit = min(max(limit, 1), MAX_RECALL_RESULTS)
        messages = await load()
        upto = hidden() if callable(hidden) else hidden
        count = len(messages) if upto is None else max(0, min(upto - offset, len(messages)))
        if count == 0:
            return "Nothing in this conversation has been compacted: every message is still in view."
        searched = messages[:count] if isinstance(messages, list | tuple) else list(messages)[:count]
        per_hit = max(max_chars // limit, 80)
        hits = search_messages(searched, query, limit=limit, max_chars=per_hit, offset=offset)
        if not hits and not query.strip():
            return "Give a query: words, identifiers or numbers to look for."
        return bounded_hits(hits, query=query, searched=count, max_chars=max_chars)

    return Tool(recall, name=name)


def bounded_hits(hits: Sequence[SearchHit], *, query: str, searched: int, max_chars: int) -> str:
    """``format_hits`` within ``max_chars`` characters: the excerpts are shortened evenly (around
    their match) until the headers and excerpts fit; a text that still does not fit is cut and
    says so."""
    text = format_hits(hits, query=query, searched=searched)
    for _ in range(4):
        excess = len(text) - max_chars
        if excess <= 0 or not hits:
            return text
        cut = -(-excess // len(hits))
        hits = [_shorten(hit, cut) for hit in hits]
        text = format_hits(hits, query=query, searched=searched)
    if len(text) <= max_chars:
        return text
    return text[: max_chars - len(_CUT)] + _CUT


def _shorten(hit: SearchHit, by: int) -> SearchHit:
    """``hit`` with ``by`` fewer characters of excerpt: from its end when it starts its message,
    else a third from its start and the rest from its end (``search_messages`` puts the match at
    least a third in)."""
    keep = max(len(hit.excerpt) - by, 0)
    head = min(by // 3, len(hit.excerpt) - keep) if hit.start else 0
    start = hit.start + head
    return replace(hit, excerpt=hit.excerpt[head : head + keep], start=start, end=start + keep)
