"""Phase 1 of ``sanitize_history``: ``SanitizeLimits`` and the pass that holds untrusted history
to them. What the limits count is written once, in ``part_size`` (every string of a part) and
``fields_size`` (a message's own strings): measured in characters for a cheap screen, in UTF-8
bytes where the screen cannot decide."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from tether.errors import HistoryTooLarge, UserError
from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult

__all__ = ["MESSAGE_FIELDS", "SanitizeLimits", "check_limits", "fields_size", "part_size", "utf8_size"]

Measure: TypeAlias = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class SanitizeLimits:
    """Bounds on untrusted history; exceeding one raises ``HistoryTooLarge``.

    Bytes are UTF-8 bytes of every string a message holds (texts, signatures, provider ids,
    tool names, ids and arguments, URLs, media types, titles, and the message's own ids, model,
    provider and stop reason) plus the raw bytes of inline media. ``max_part_bytes`` bounds the
    strings of each part (and of each item of a tool result's content), and each of the
    message's own strings on its own; inline media is bounded in total over the history by
    ``max_inline_media_bytes``.
    """

    max_messages: int = 10_000
    max_total_bytes: int = 64 * 1024 * 1024
    max_part_bytes: int = 1024 * 1024
    max_inline_media_bytes: int = 32 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_total_bytes", "max_part_bytes", "max_inline_media_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise UserError(f"SanitizeLimits.{name} must be a non-negative int, not {value!r}")


def _where(i: int, k: int | None = None, c: int | None = None) -> str:
    if k is None:
        return f"message {i}"
    return f"message {i}, part {k}" if c is None else f"message {i}, part {k}, content {c}"


def _too_big(size: int, limit: int, i: int, k: int, c: int | None = None) -> HistoryTooLarge:
    return HistoryTooLarge(
        f"a part of {size} bytes is over {limit}", limit="max_part_bytes", where=_where(i, k, c)
    )


# -- sizes: what the limits count, written once ------------------------------------------------
def utf8_size(text: str) -> int:
    """The exact UTF-8 bytes of ``text`` (a lone surrogate counts 3, as "surrogatepass")."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def part_size(part: object, measure: Measure) -> int:
    """What ``max_part_bytes`` counts for one part or tool-result content item: all its strings,
    measured with ``measure`` — ``utf8_size`` for the exact bytes, ``len`` for characters (at most the
    bytes, at least a quarter of them: the cheap screen of ``check_limits``).

    A tool result counts its call id and name (its content items count as parts of their own);
    media its URL, media type and title (inline data is not a string: it counts toward
    ``max_inline_media_bytes`` and the total, not toward the part)."""
    tp = type(part)
    if tp is Text:
        text: Text = part  # type: ignore[assignment]
        n = measure(text.text)
        s = text.signature
        if s is not None:
            n += measure(s)
        s = text.provider_id
        if s is not None:
            n += measure(s)
        return n
    if tp is ToolCall:
        call: ToolCall = part  # type: ignore[assignment]
        n = measure(call.arguments) + measure(call.name)
        s = call.id
        if s is not None:
            n += measure(s)
        s = call.signature
        if s is not None:
            n += measure(s)
        s = call.provider_id
        if s is not None:
            n += measure(s)
        return n
    if tp is ToolResult:
        result: ToolResult = part  # type: ignore[assignment]
        return measure(result.call_id) + measure(result.name)
    if tp is Reasoning:
        reasoning: Reasoning = part  # type: ignore[assignment]
        n = measure(reasoning.text)
        s = reasoning.signature
        if s is not None:
            n += measure(s)
        s = reasoning.provider
        if s is not None:
            n += measure(s)
        s = reasoning.provider_id
        if s is not None:
            n += measure(s)
        return n
    media: Image | Document = part  # type: ignore[assignment]
    n = 0
    s = media.url
    if s is not None:
        n = measure(s)
    s = media.media_type
    if s is not None:
        n += measure(s)
    if tp is Document:
        document: Document = part  # type: ignore[assignment]
        s = document.title
        if s is not None:
            n += measure(s)
    return n


MESSAGE_FIELDS = ("run_id", "conversation_id", "provider", "model", "stop_reason", "response_id")
"""The string fields of a message itself; each counts toward ``max_part_bytes`` on its own."""


def fields_size(m: Message, measure: Measure) -> int:
    """The message's own strings (``MESSAGE_FIELDS``) together, measured with ``measure``."""
    n = 0
    s = m.run_id
    if s is not None:
        n = measure(s)
    s = m.conversation_id
    if s is not None:
        n += measure(s)
    s = m.provider
    if s is not None:
        n += measure(s)
    s = m.model
    if s is not None:
        n += measure(s)
    s = m.stop_reason
    if s is not None:
        n += measure(s)
    s = m.response_id
    if s is not None:
        n += measure(s)
    return n


def _message_size(m: Message) -> int:
    """Every byte of ``m`` the total counts, exactly: its strings and inline media."""
    n = fields_size(m, utf8_size)
    for part in m.parts:
        n += part_size(part, utf8_size)
        if type(part) is ToolResult:
            result: ToolResult = part  # type: ignore[assignment]
            for item in result.content:
                n += part_size(item, utf8_size)
                if type(item) is not Text:
                    n += _inline_bytes(item)
        elif type(part) is Image or type(part) is Document:
            n += _inline_bytes(part)
    return n


def _inline_bytes(item: object) -> int:
    media: Image | Document = item  # type: ignore[assignment]
    data = media.data
    return 0 if data is None else len(data)


# -- phase 1: limits ---------------------------------------------------------------------------
_MEDIA = 1 << 62
"""Added to a message's screen per media item: no limit is that large, so a message holding
media is always measured exactly (its inline data has a limit of its own)."""


def check_limits(msgs: Sequence[Message], limits: SanitizeLimits) -> list[int]:
    """Raise ``HistoryTooLarge`` at the first limit crossed: the number of messages, then in
    history order a message's parts, its own fields and the total after it. Return the indexes
    of the messages phase 2 must visit: system messages and messages holding media.

    Every message is screened in characters (``part_size`` and ``fields_size`` measured with
    ``len``). The loop takes the common shapes itself — a message without fields of its own, a
    text, call or tool result whose optional strings are unset — and hands anything else to those
    two functions. A message whose strings hold at most a quarter of ``max_part_bytes``
    characters in all cannot have one over that many bytes, so only a message over the screen, or
    holding media, is measured exactly, part by part (``_measure_message``). The total is counted
    in characters until four times the count could cross ``max_total_bytes``; from there on
    ``_check_total`` counts it exactly.
    """
    if len(msgs) > limits.max_messages:
        raise HistoryTooLarge(
            f"history has {len(msgs)} messages, over {limits.max_messages}",
            limit="max_messages",
            where=_where(limits.max_messages),
        )
    part_q = limits.max_part_bytes >> 2
    total_q = limits.max_total_bytes >> 2
    size = part_size
    inline = [0]  # inline media bytes so far
    visit: list[int] = []
    chars = 0  # a lower bound of the bytes counted so far whose quadruple is an upper bound
    for i, m in enumerate(msgs):
        n = 0
        if m.model or m.stop_reason or m.provider or m.response_id or m.run_id or m.conversation_id:
            n = fields_size(m, len)  # (the field assistant messages usually carry tested first)
        if m.role == "tool":  # tool results only
            results: tuple[ToolResult, ...] = m.parts  # type: ignore[assignment]
            for result in results:
                n += len(result.call_id) + len(result.name)
                for item in result.content:
                    if type(item) is not Text:
                        n += _MEDIA
                    elif item.signature or item.provider_id:  # type: ignore[union-attr]
                        n += size(item, len)
                    else:
                        n += len(item.text)  # type: ignore[union-attr]
        else:
            for part in m.parts:
                tp = type(part)
                if tp is ToolCall:
                    call: ToolCall = part  # type: ignore[assignment]
                    if call.signature or call.provider_id or not call.id:
                        n += size(call, len)
                    else:
                        n += len(call.arguments) + len(call.name) + len(call.id)
                elif tp is Text:
                    text: Text = part  # type: ignore[assignment]
                    if text.signature or text.provider_id:
                        n += size(text, len)
                    else:
                        n += len(text.text)
                elif tp is Reasoning:
                    n += size(part, len)
                else:
                    n += _MEDIA
        if n > part_q:
            if n >= _MEDIA:
                visit.append(i)
            n = _measure_message(m, i, limits, inline)  # exact bytes
        elif m.role == "system":
            visit.append(i)
        chars += n
        if chars > total_q:  # the bytes may now cross max_total: count them exactly from here
            _check_total(msgs, i, limits, inline, visit)
            break
    return visit


def _check_total(
    msgs: Sequence[Message], at: int, limits: SanitizeLimits, inline: list[int], visit: list[int]
) -> None:
    """The rest of phase 1 once the character count of messages ``0..at`` could cross
    ``max_total_bytes``: the total counted exactly, each further message measured part by part."""
    max_total = limits.max_total_bytes
    total = sum(_message_size(msgs[j]) for j in range(at + 1))
    if total > max_total:
        raise _over_total(max_total, at)
    for i in range(at + 1, len(msgs)):
        m = msgs[i]
        total += _measure_message(m, i, limits, inline)
        if total > max_total:  # only message i can cross it: the bound held before it
            raise _over_total(max_total, i)
        if m.role == "system" or _holds_media(m):
            visit.append(i)


def _holds_media(m: Message) -> bool:
    for part in m.parts:
        if type(part) is Image or type(part) is Document:
            return True
        if type(part) is ToolResult:
            result: ToolResult = part  # type: ignore[assignment]
            if any(type(item) is not Text for item in result.content):
                return True
    return False


def _over_total(limit: int, i: int) -> HistoryTooLarge:
    return HistoryTooLarge(f"history is over {limit} bytes", limit="max_total_bytes", where=_where(i))


def _measure_message(m: Message, i: int, limits: SanitizeLimits, inline: list[int]) -> int:
    """The indexed, exact pass over one message: raise on the first part, content item or field
    over ``max_part_bytes`` (or inline media crossing its limit); return the message's bytes."""
    max_part = limits.max_part_bytes
    total = 0
    for k, part in enumerate(m.parts):
        n = part_size(part, utf8_size)
        if n > max_part:
            raise _too_big(n, max_part, i, k)
        if type(part) is ToolResult:
            result: ToolResult = part  # type: ignore[assignment]
            for c, item in enumerate(result.content):
                size = part_size(item, utf8_size)
                if size > max_part:
                    raise _too_big(size, max_part, i, k, c)
                n += size + _add_inline(item, inline, limits, i, k, c)
        else:
            n += _add_inline(part, inline, limits, i, k)
        total += n
    for name in MESSAGE_FIELDS:
        value: str | None = getattr(m, name)
        size = 0 if value is None else utf8_size(value)
        if size > max_part:
            raise HistoryTooLarge(
                f"field {name} of {size} bytes is over {max_part}",
                limit="max_part_bytes",
                where=f"message {i}, field {name}",
            )
        total += size
    return total


def _add_inline(
    item: object, inline: list[int], limits: SanitizeLimits, i: int, k: int, c: int | None = None
) -> int:
    """Count a part's inline media bytes (0 for anything else) toward ``max_inline_media_bytes``."""
    if type(item) is not Image and type(item) is not Document:
        return 0
    size = _inline_bytes(item)
    inline[0] += size
    if inline[0] > limits.max_inline_media_bytes:
        raise HistoryTooLarge(
            f"inline media is over {limits.max_inline_media_bytes} bytes",
            limit="max_inline_media_bytes",
            where=_where(i, k, c),
        )
    return size
