"""``sanitize_history``: the explicit boundary pass for history that arrives from outside.

It drops system messages and media parts that point anywhere but ``http``/``https``, removes
user and assistant messages left empty by those drops, repairs pairing, and bounds the work an
untrusted caller can cause (``SanitizeLimits``). It never rewrites what it keeps.

Three phases, one pass each:

1. limits (``check_limits`` in ``_limits``): every string and inline byte against
   ``SanitizeLimits``; raises ``HistoryTooLarge`` at the first crossing, before any other work,
   and notes the messages phase 2 must visit (system messages, messages holding media);
2. media (``_drop_unsafe``): on those messages only, drop system messages, unsafe media and the
   user/assistant messages the drops left empty;
3. pairing: ``normalize_history`` on what is kept, its report re-indexed to the history passed in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

import msgspec
from msgspec.structs import replace

from tether.errors import UserError
from tether.history._input import as_messages
from tether.history._limits import SanitizeLimits, check_limits
from tether.history._normalize import CallRef, HistoryRepair, repair_pairing
from tether.messages import Document, Image, Message, Text, ToolResult

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


# -- phase 2: media and system messages ----------------------------------------------------------
@dataclass(slots=True)
class _Dropped:
    """What phase 2 dropped, by index in the history passed in."""

    systems: int = 0
    unsafe: list[UnsafePart] = field(default_factory=lambda: [])
    removed: list[int] = field(default_factory=lambda: [])


def _drop_unsafe(
    msgs: Sequence[Message], visit: list[int], dropped: _Dropped
) -> tuple[Sequence[Message], list[int] | None]:
    """The messages kept and, when any was dropped or rebuilt, ``origin[j]``: the index in
    ``msgs`` of kept message ``j`` (``None``: ``msgs`` is kept as it is)."""
    kept: list[Message] = []
    origin: list[int] = []
    changed = False
    start = 0
    for i in visit:
        kept.extend(msgs[start:i])
        origin.extend(range(start, i))
        start = i + 1
        m = msgs[i]
        if m.role == "system":
            dropped.systems += 1
            changed = True
            continue
        parts = _safe_parts(m, i, dropped.unsafe)
        if parts is not None:
            changed = True
            if not parts and m.role != "tool":
                dropped.removed.append(i)
                continue
            m = replace(m, parts=parts)
        kept.append(m)
        origin.append(i)
    if not changed:
        return msgs, None
    kept.extend(msgs[start:])
    origin.extend(range(start, len(msgs)))
    return kept, origin


def _unsafe_scheme(item: Image | Document) -> str | None:
    """The scheme of a media item given by a URL that is not http(s); ``None`` when it is kept."""
    if item.url is None:
        return None
    scheme = url_scheme(item.url)
    return None if scheme in _SAFE_SCHEMES else scheme


def _kind(item: Image | Document) -> MediaKind:
    return "image" if type(item) is Image else "document"


def _safe_parts(m: Message, i: int, unsafe: list[UnsafePart]) -> tuple[object, ...] | None:
    """``m``'s parts without unsafe media (inside tool results too, which stay), or ``None`` when
    every part is kept as it is."""
    keep: list[object] | None = None
    for k, part in enumerate(m.parts):
        tp = type(part)
        if tp is Image or tp is Document:
            media: Image | Document = part  # type: ignore[assignment]
            scheme = _unsafe_scheme(media)
            if scheme is not None:
                unsafe.append(UnsafePart(i, k, _kind(media), scheme))
                if keep is None:
                    keep = list(m.parts[:k])
                continue
        elif tp is ToolResult:
            result: ToolResult = part  # type: ignore[assignment]
            cleaned = _safe_content(result, i, k, unsafe)
            if cleaned is not result:
                if keep is None:
                    keep = list(m.parts[:k])
                part = cleaned
        if keep is not None:
            keep.append(part)
    return None if keep is None else tuple(keep)


def _safe_content(result: ToolResult, i: int, k: int, unsafe: list[UnsafePart]) -> ToolResult:
    """``result`` without its unsafe media items (the same object when there is none)."""
    keep: list[Text | Image | Document] | None = None
    for c, item in enumerate(result.content):
        if type(item) is not Text:
            media: Image | Document = item  # type: ignore[assignment]
            scheme = _unsafe_scheme(media)
            if scheme is not None:
                unsafe.append(UnsafePart(i, k, _kind(media), scheme, c))
                if keep is None:
                    keep = list(result.content[:c])
                continue
        if keep is not None:
            keep.append(item)
    return result if keep is None else replace(result, content=tuple(keep))


# -- the pass ----------------------------------------------------------------------------------
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
    visit = check_limits(msgs, limits)
    dropped = _Dropped()
    kept, origin = _drop_unsafe(msgs, visit, dropped) if visit else (msgs, None)
    out, repair = repair_pairing(kept)
    if origin is not None and repair != _NO_REPAIR:
        repair = _remap(repair, origin)
    return out, SanitizeReport(dropped.systems, tuple(dropped.unsafe), tuple(dropped.removed), repair)


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
