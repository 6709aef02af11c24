"""``sanitize_history``: the explicit boundary pass for history that arrives from outside.

It drops system messages and media parts that point anywhere but ``http``/``https``, removes
user and assistant messages left empty by those drops, repairs pairing, and bounds the work an
untrusted caller can cause (``SanitizeLimits``). It never rewrites what it keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

import msgspec
from msgspec.structs import replace

from tether.errors import HistoryTooLarge, UserError
from tether.history._input import as_messages
from tether.history._normalize import CallRef, HistoryRepair, normalize_history
from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult

__all__ = [
    "SanitizeLimits",
    "SanitizeReport",
    "UnsafePart",
    "sanitize_history",
    "url_scheme",
]

MediaKind: TypeAlias = Literal["image", "document"]

_encoder = msgspec.json.Encoder()
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# WHATWG URL parsing strips leading/trailing C0 controls and spaces and removes every tab and
# newline before reading the scheme: do the same so "\tjava\nscript:" is seen as "javascript".
_STRIP = "".join(chr(c) for c in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")
_SAFE_SCHEMES = frozenset({"http", "https"})


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


@dataclass(frozen=True, slots=True)
class UnsafePart:
    """A media part dropped for its URL scheme. ``message``/``part`` index the history passed in;
    ``content`` indexes a tool result's content when the part sat inside one. ``scheme`` is the
    rejected scheme, lower-cased (``""`` when the URL has none)."""

    message: int
    part: int
    kind: MediaKind
    scheme: str
    content: int | None = None


@dataclass(frozen=True, slots=True)
class SanitizeReport:
    """What ``sanitize_history`` did, by index in the history passed in.

    ``system_prompts``: system messages dropped. ``unsafe_parts``: media dropped for its scheme.
    ``removed``: user/assistant messages removed because the drops left them empty. ``repair``:
    the pairing repair of the same pass (indexes also refer to the history passed in).
    """

    system_prompts: int = 0
    unsafe_parts: tuple[UnsafePart, ...] = ()
    removed: tuple[int, ...] = ()
    repair: HistoryRepair = field(default_factory=HistoryRepair)

    @property
    def changed(self) -> bool:
        """True when the returned history differs from the one passed in."""
        return bool(self.system_prompts or self.unsafe_parts or self.removed or self.repair.changed)

    def to_dict(self) -> dict[str, object]:
        """The report as plain JSON-ready data."""
        return {
            "changed": self.changed,
            "system_prompts": self.system_prompts,
            "unsafe_parts": self.unsafe_parts,
            "removed": self.removed,
            "repair": self.repair.to_dict(),
        }

    def to_json(self) -> bytes:
        """The report as JSON."""
        return _encoder.encode(self.to_dict())


def url_scheme(url: str) -> str:
    """The scheme of ``url`` as a browser would read it, lower-cased; ``""`` when there is none."""
    cleaned = url.strip(_STRIP).translate(_TAB_NEWLINE)
    match = _SCHEME.match(cleaned)
    return match.group(1).lower() if match else ""


def _where(i: int, k: int | None = None, c: int | None = None) -> str:
    if k is None:
        return f"message {i}"
    return f"message {i}, part {k}" if c is None else f"message {i}, part {k}, content {c}"


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _over_total(limit: int, i: int) -> HistoryTooLarge:
    return HistoryTooLarge(f"history is over {limit} bytes", limit="max_total_bytes", where=_where(i))


def _too_big(size: int, limit: int, i: int, k: int, c: int | None = None) -> HistoryTooLarge:
    return HistoryTooLarge(
        f"a part of {size} bytes is over {limit}", limit="max_part_bytes", where=_where(i, k, c)
    )


def _size(text: str | None) -> int:
    if not text:
        return 0
    return len(text) if text.isascii() else _utf8(text)


def _part_size(part: Text | Reasoning | ToolCall) -> int:
    """Every string of a text, reasoning or tool-call part, in UTF-8 bytes."""
    if isinstance(part, ToolCall):
        size = _size(part.arguments) + _size(part.name) + _size(part.id)
    elif isinstance(part, Reasoning):
        size = _size(part.text) + _size(part.provider)
    else:
        size = _size(part.text)
    return size + _size(part.signature) + _size(part.provider_id)


MESSAGE_FIELDS = ("run_id", "conversation_id", "provider", "model", "stop_reason", "response_id")
"""The string fields of a message itself; each counts toward ``max_part_bytes`` on its own."""


def _media_bytes(item: Image | Document) -> int:
    """A media item as ``_Media.check`` counts it: its strings, plus inline data or the URL."""
    size = _size(item.media_type)
    if type(item) is Document:
        document: Document = item  # type: ignore[assignment]
        size += _size(document.title)
    return size + (len(item.data) if item.data is not None else _size(item.url))


def _message_bytes(m: Message) -> int:
    """Every byte of ``m`` the limits count, exactly (the pass counts characters until the total
    could approach ``max_total_bytes``, then switches to this)."""
    size = 0
    for part in m.parts:
        if isinstance(part, ToolResult):
            size += _size(part.call_id) + _size(part.name)
            for item in part.content:
                size += _part_size(item) if isinstance(item, Text) else _media_bytes(item)
        elif isinstance(part, Image | Document):
            size += _media_bytes(part)
        else:
            size += _part_size(part)
    for name in MESSAGE_FIELDS:
        size += _size(getattr(m, name))
    return size


_USER_PARTS = frozenset({Text, Image, Document})


def _user_media(parts: tuple[object, ...]) -> bool:
    """True when a user/system message holds only what the pairing check may ignore."""
    return all(type(p) in _USER_PARTS for p in parts)


class _AnyObject(msgspec.Struct):
    """Matches any JSON object: decoding one validates the text without building values."""


# The same test as ``ToolCall.truncated`` without the property call, once per call of the pass.
_object_checker = msgspec.json.Decoder(_AnyObject)


def _check_fields(m: Message, i: int, limit: int) -> None:
    """Raise when one of the message's own strings is over ``max_part_bytes``."""
    for name in MESSAGE_FIELDS:
        size = _size(getattr(m, name))
        if size > limit:
            raise HistoryTooLarge(
                f"field {name} of {size} bytes is over {limit}",
                limit="max_part_bytes",
                where=f"message {i}, field {name}",
            )


class _Media:
    """Inline-media accounting and the URL verdict for one media item."""

    __slots__ = ("limit", "max_part", "total")

    def __init__(self, limits: SanitizeLimits) -> None:
        self.limit = limits.max_inline_media_bytes
        self.max_part = limits.max_part_bytes
        self.total = 0

    def check(self, item: Image | Document, i: int, k: int, c: int | None = None) -> tuple[int, str | None]:
        """(bytes counted, rejected scheme or ``None`` when the item is kept). The item's text
        (URL, media type, title) counts toward ``max_part_bytes``; inline data does not."""
        text = _size(item.media_type)
        if type(item) is Document:
            document: Document = item  # type: ignore[assignment]
            text += _size(document.title)
        if item.data is not None:
            if text > self.max_part:
                raise _too_big(text, self.max_part, i, k, c)
            size = len(item.data)
            self.total += size
            if self.total > self.limit:
                raise HistoryTooLarge(
                    f"inline media is over {self.limit} bytes",
                    limit="max_inline_media_bytes",
                    where=_where(i, k, c),
                )
            return size + text, None
        url = item.url or ""
        size = text + _size(url)
        if size > self.max_part:
            raise _too_big(size, self.max_part, i, k, c)
        scheme = url_scheme(url)
        return size, (None if scheme in _SAFE_SCHEMES else scheme)


def _clean_result(
    result: ToolResult, i: int, k: int, media: _Media, unsafe: list[UnsafePart]
) -> tuple[int, ToolResult]:
    """The content of a tool result, item by item: (bytes counted, the result without unsafe
    items). Raises on the first item over a limit."""
    keep: list[Text | Image | Document] | None = None
    size = 0
    for c, item in enumerate(result.content):
        if type(item) is Text:
            n = _part_size(item)  # type: ignore[arg-type]
            if n > media.max_part:
                raise _too_big(n, media.max_part, i, k, c)
            size += n
        else:
            entry: Image | Document = item  # type: ignore[assignment]
            n, scheme = media.check(entry, i, k, c)
            size += n
            if scheme is not None:
                unsafe.append(UnsafePart(i, k, "image" if type(entry) is Image else "document", scheme, c))
                if keep is None:
                    keep = list(result.content[:c])
                continue
        if keep is not None:
            keep.append(item)
    return size, (result if keep is None else replace(result, content=tuple(keep)))


def _slow_message(
    m: Message, i: int, max_part: int, media: _Media, unsafe: list[UnsafePart]
) -> tuple[int, list[object] | None]:
    """The indexed pass over one message that needs attention (media, or a part over the limit):
    (bytes counted, the kept parts or ``None`` when every part is kept). Raises on a limit."""
    total = 0
    keep: list[object] | None = None
    for k, part in enumerate(m.parts):
        tp = type(part)
        if tp is ToolResult:
            result: ToolResult = part  # type: ignore[assignment]
            s = result.call_id
            n = len(s) if s.isascii() else _utf8(s)
            s = result.name
            n += len(s) if s.isascii() else _utf8(s)
            if n > max_part:
                raise _too_big(n, max_part, i, k)
            size, cleaned = _clean_result(result, i, k, media, unsafe)
            n += size
            if cleaned is not result:
                if keep is None:
                    keep = list(m.parts[:k])
                part = cleaned
        elif tp is Image or tp is Document:
            n, scheme = media.check(part, i, k)  # type: ignore[arg-type]
            if scheme is not None:
                unsafe.append(UnsafePart(i, k, "image" if tp is Image else "document", scheme))
                if keep is None:
                    keep = list(m.parts[:k])
                total += n
                continue
        else:
            n = _part_size(part)  # type: ignore[arg-type]
            if n > max_part:
                raise _too_big(n, max_part, i, k)
        total += n
        if keep is not None:
            keep.append(part)
    return total, keep


def sanitize_history(
    history: Iterable[Message], *, limits: SanitizeLimits | None = None
) -> tuple[list[Message], SanitizeReport]:
    """Make untrusted history safe to run: see the module docstring and ADR 0002.

    Raises ``HistoryTooLarge`` (naming the limit and the message/part) as soon as a limit is
    crossed, before doing more work. Deterministic and idempotent.
    """
    if limits is None:
        limits = _DEFAULT_LIMITS
    elif not isinstance(cast(object, limits), SanitizeLimits):
        raise UserError(f"sanitize_history takes limits=SanitizeLimits(...), not a {type(limits).__name__}")
    msgs = as_messages(history, "sanitize_history")
    if len(msgs) > limits.max_messages:
        raise HistoryTooLarge(
            f"history has {len(msgs)} messages, over {limits.max_messages}",
            limit="max_messages",
            where=_where(limits.max_messages),
        )
    max_part = limits.max_part_bytes
    max_total = limits.max_total_bytes
    # The fast pass counts characters, not bytes: a string of c characters is c to 4c bytes in
    # UTF-8, so c <= part_q guarantees c's bytes fit max_part_bytes. Anything over the cheap
    # bound goes to the indexed pass, which counts exact bytes (see _slow_message).
    part_q = max_part >> 2
    total_q = max_total >> 2
    # ``chars``: a lower bound of the bytes counted so far whose quadruple is an upper bound.
    # Once the upper bound could cross max_total_bytes, ``total`` holds the exact count instead.
    chars = 0
    total = -1  # -1: exact counting not needed yet
    check_arguments = _object_checker.decode
    media = _Media(limits)
    unsafe: list[UnsafePart] = []
    removed: list[int] = []
    systems = 0
    # Built only once a message is dropped or rebuilt: until then the output is ``msgs[:i]``.
    kept: list[Message] | None = None
    origin: list[int] = []  # once ``kept`` exists: origin[j] is the index in ``msgs`` of kept[j]
    # The same pass checks the pairing of the common case (every call answered right after it,
    # nothing else): when it holds, pairing repair has nothing to do. Anything it is unsure of
    # sets ``irregular`` and ``normalize_history`` repairs the kept messages afterwards.
    irregular = False
    pending: dict[str, int] | None = None  # call ids of the last assistant turn not yet answered
    truncated: list[CallRef] = []
    for i, m in enumerate(msgs):
        role = m.role
        parts = m.parts
        # Fast pass: count characters; anything unusual sends the message to the indexed pass.
        n = 0
        slow = False
        if role == "tool":
            if pending is None or not parts:
                irregular = True
                pending = {}
            for part in parts:
                if type(part) is not ToolResult:
                    slow = True
                    break
                result: ToolResult = part  # type: ignore[assignment]
                s = result.call_id
                if pending.pop(s, None) is None:
                    irregular = True
                x = len(s) + len(result.name)
                if x > part_q:
                    slow = True
                    break
                for item in result.content:
                    if type(item) is Text and item.signature is None and item.provider_id is None:
                        size = len(item.text)
                        if size <= part_q:
                            x += size
                            continue
                    slow = True
                    break
                if slow:
                    break
                n += x
        elif role == "assistant":
            if pending:
                irregular = True
            pending = None
            for part in parts:
                tp = type(part)
                if tp is ToolCall:
                    call: ToolCall = part  # type: ignore[assignment]
                    s = call.arguments
                    cid = call.id
                    try:
                        check_arguments(s)
                    except (msgspec.DecodeError, RecursionError):  # exactly ToolCall.truncated
                        truncated.append(CallRef(i, cid, call.name))
                    if cid is None:
                        irregular = True
                        x = len(s) + len(call.name)
                    else:
                        if not cid or (pending is not None and cid in pending):
                            irregular = True  # unpaired calls: normalize names them
                        elif pending is None:
                            pending = {cid: 1}
                        else:
                            pending[cid] = 1
                        x = len(s) + len(call.name) + len(cid)
                    s = call.signature
                    if s is not None:
                        x += len(s)
                    s = call.provider_id
                    if s is not None:
                        x += len(s)
                elif tp is Text:
                    text: Text = part  # type: ignore[assignment]
                    x = len(text.text)
                    s = text.signature
                    if s is not None:
                        x += len(s)
                    s = text.provider_id
                    if s is not None:
                        x += len(s)
                elif tp is Reasoning:
                    reasoning: Reasoning = part  # type: ignore[assignment]
                    x = len(reasoning.text)
                    s = reasoning.signature
                    if s is not None:
                        x += len(s)
                    s = reasoning.provider
                    if s is not None:
                        x += len(s)
                    s = reasoning.provider_id
                    if s is not None:
                        x += len(s)
                else:
                    slow = True
                    break
                if x > part_q:
                    slow = True
                    break
                n += x
        else:
            if role != "system":
                if pending:
                    irregular = True
                pending = None
            for part in parts:
                if type(part) is not Text:
                    slow = True
                    break
                text = part  # type: ignore[assignment]
                x = len(text.text)
                s = text.signature
                if s is not None:
                    x += len(s)
                s = text.provider_id
                if s is not None:
                    x += len(s)
                if x > part_q:
                    slow = True
                    break
                n += x
        keep: list[object] | None = None
        if slow:
            n, keep = _slow_message(m, i, max_part, media, unsafe)  # exact bytes
            if (role != "user" and role != "system") or not _user_media(parts):
                irregular = True
        # The message's own strings (unrolled: this runs for every message).
        x = 0
        s = m.run_id
        if s is not None:
            x = len(s)
        s = m.conversation_id
        if s is not None:
            x += len(s)
        s = m.provider
        if s is not None:
            x += len(s)
        s = m.model
        if s is not None:
            x += len(s)
        s = m.stop_reason
        if s is not None:
            x += len(s)
        s = m.response_id
        if s is not None:
            x += len(s)
        if x > part_q:  # one of them may be over the per-field cap
            _check_fields(m, i, max_part)
        if total < 0:
            chars += n + x
            if chars > total_q:  # the bytes may now cross max_total: count them exactly from here
                total = sum(_message_bytes(msgs[j]) for j in range(i + 1))
                if total > max_total:
                    raise _over_total(max_total, i)
        else:
            total += _message_bytes(m)
            if total > max_total:  # only message i can cross it: the bound held before it
                raise _over_total(max_total, i)
        if keep is not None or role == "system":
            if kept is None:
                kept, origin = list(msgs[:i]), list(range(i))
            if role == "system":
                systems += 1
                continue
            if keep is not None:
                if not keep and role != "tool":
                    removed.append(i)
                    continue
                m = replace(m, parts=tuple(keep))
        if kept is not None:
            kept.append(m)
            origin.append(i)
    if irregular or pending:
        out, repair = normalize_history(msgs if kept is None else kept)
        if kept is not None and repair != _NO_REPAIR:
            repair = _remap(repair, origin)
    else:
        out = list(msgs) if kept is None else kept
        repair = HistoryRepair(truncated=tuple(truncated)) if truncated else _NO_REPAIR
    if not (systems or unsafe or removed or repair.changed):
        return out, SanitizeReport(repair=repair)
    return out, SanitizeReport(systems, tuple(unsafe), tuple(removed), repair)


_DEFAULT_LIMITS = SanitizeLimits()
_NO_REPAIR = HistoryRepair()


def _remap(repair: HistoryRepair, origin: list[int]) -> HistoryRepair:
    def refs(items: tuple[CallRef, ...]) -> tuple[CallRef, ...]:
        return tuple(CallRef(origin[r.message], r.call_id, r.name, r.reason) for r in items)

    return HistoryRepair(
        refs(repair.synthesized),
        refs(repair.dropped),
        tuple(origin[i] for i in repair.removed),
        refs(repair.truncated),
        refs(repair.unpaired),
    )
