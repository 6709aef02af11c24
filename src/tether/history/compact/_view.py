"""Compaction, the pure parts: ``elide``, the summary view and the pair-safe boundary.

A compacted history is a *view* derived from the unchanged log (docs/adr/0010-compaction.md):

- ``elide`` replaces the content of old tool results (and of reasoning nothing authenticates) with
  a placeholder saying what was elided and how large it was. Calls, results, ids, names, flags and
  signatures stay, so the view pairs exactly like the log.
- ``compacted_view`` sends a summary of everything before a boundary, then the messages after it.
  The summary travels as the first ``Text`` part of a user turn: merged into the first kept
  message when that is a user message, otherwise a user message of its own right before it (the
  first kept message is then an assistant turn). The view opens with a user turn, alternates as
  the log did, and every call keeps its results, which every provider accepts.
- ``compaction_boundary`` picks where a summary ends for a token target, with
  ``trim_history``'s boundary rule (one scanner decides what can open a request).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeAlias

import msgspec
from msgspec.structs import replace

from tether.errors import HistoryError, UserError
from tether.history._input import as_messages
from tether.history._trim import TrimHistory
from tether.history.compact._tokens import TokenTally
from tether.messages import Document, Image, Message, Part, Reasoning, ResultPart, Text, ToolResult

__all__ = [
    "ELIDED_PREFIX",
    "RECALL_HINT",
    "SUMMARY_CLOSE",
    "SUMMARY_NOTE",
    "SUMMARY_OPEN",
    "ElideReport",
    "ElidedPart",
    "compacted_view",
    "compaction_boundary",
    "elide",
    "is_elided",
    "split_summary",
    "summary_part",
]

ELIDED_PREFIX = "[elided: "
"""How every placeholder ``elide`` writes begins."""
RECALL_HINT = "use recall to fetch it"
"""The default hint at the end of a placeholder (pass ``hint=None`` when no recall tool is given)."""

SUMMARY_OPEN = "<conversation-summary>"
SUMMARY_CLOSE = "</conversation-summary>"
SUMMARY_NOTE = (
    "The earlier messages of this conversation were compacted into the summary below; the originals are kept."
)
"""The default line between ``SUMMARY_OPEN`` and the summary (``compacted_view(note=...)``)."""

ElidedKind: TypeAlias = Literal["tool-result", "reasoning"]
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class ElidedPart:
    """One part whose content ``elide`` replaced: ``message`` and ``part`` index the history
    passed in; ``name`` is the tool's (``None`` for reasoning); ``bytes`` the size elided."""

    message: int
    part: int
    kind: ElidedKind
    name: str | None
    bytes: int


@dataclass(frozen=True, slots=True)
class ElideReport:
    """What ``elide`` replaced, and the reasoning it left alone because a signature, a redacted
    payload or a provider item id vouches for its text (``kept``: (message, part))."""

    elided: tuple[ElidedPart, ...] = ()
    kept: tuple[tuple[int, int], ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.elided)

    @property
    def bytes(self) -> int:
        """The bytes of content replaced by placeholders."""
        return sum(p.bytes for p in self.elided)

    def to_dict(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "bytes": self.bytes,
            "elided": [asdict(p) for p in self.elided],
            "kept": [list(k) for k in self.kept],
        }

    def to_json(self) -> bytes:
        return _encoder.encode(self.to_dict())


def _size(item: ResultPart | Part) -> int:
    if type(item) is Text:
        return len(item.text.encode("utf-8", "surrogatepass"))
    if type(item) is Image or type(item) is Document:
        if item.data is not None:
            return len(item.data)
        return len((item.url or "").encode("utf-8", "surrogatepass"))
    return 0  # pragma: no cover - result content holds only Text, Image and Document


def _placeholder(size: int, what: str, hint: str | None) -> str:
    tail = f"; {hint}" if hint else ""
    return f"{ELIDED_PREFIX}{size:,} bytes of {what}{tail}]"


def is_elided(text: str) -> bool:
    """True for a placeholder ``elide`` wrote (so eliding twice changes nothing)."""
    return text.startswith(ELIDED_PREFIX) and text.endswith("]") and "\n" not in text


def _result_what(result: ToolResult) -> str:
    media = [type(c).__name__.lower() for c in result.content if type(c) is not Text]
    what = f"{result.name} output"
    if media:
        counts = {kind: media.count(kind) for kind in dict.fromkeys(media)}
        listed = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in counts.items())
        what += f" ({listed})"
    return what


def elide(
    history: Iterable[Message],
    *,
    keep_last: int = 8,
    min_bytes: int = 256,
    hint: str | None = RECALL_HINT,
    tool_results: bool = True,
    reasoning: bool = True,
) -> tuple[list[Message], ElideReport]:
    """Replace old bulky content with placeholders, pair-safe; report each replacement.

    Messages before the last ``keep_last`` are looked at. A tool result whose content is larger
    than ``min_bytes`` keeps its call id, name and ``failed``/``synthesized`` flags; its content
    becomes one text, e.g. ``[elided: 14,210 bytes of read_file output; use recall to fetch it]``.
    A reasoning part's text is replaced the same way only when nothing vouches for it (no
    signature, not redacted, no provider item id): providers verify signed reasoning against its
    exact text, so signed reasoning stays byte for byte and is listed in ``report.kept``. User and
    assistant text, calls and their arguments are never touched. Messages that change are new
    objects with the same identity stamps; the others are the very objects passed in.
    """
    if type(keep_last) is not int or keep_last < 0:
        raise UserError(f"elide needs keep_last >= 0, not {keep_last!r}")
    if type(min_bytes) is not int or min_bytes < 0:
        raise UserError(f"elide needs min_bytes >= 0, not {min_bytes!r}")
    if hint is not None and not isinstance(hint, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"elide needs hint to be a string or None, not {type(hint).__name__}")
    msgs = as_messages(history, "elide")
    end = max(len(msgs) - keep_last, 0)
    out = list(msgs)
    elided: list[ElidedPart] = []
    kept: list[tuple[int, int]] = []
    for i in range(end):
        m = msgs[i]
        if m.role == "tool" and tool_results:
            parts = _elide_results(m, i, min_bytes, hint, elided)
        elif m.role == "assistant" and reasoning:
            parts = _elide_reasoning(m, i, min_bytes, hint, elided, kept)
        else:
            continue
        if parts is not None:
            out[i] = replace(m, parts=parts)
    return out, ElideReport(tuple(elided), tuple(kept))


def _elide_results(
    m: Message, i: int, min_bytes: int, hint: str | None, elided: list[ElidedPart]
) -> tuple[Part, ...] | None:
    parts: list[Part] = list(m.parts)
    changed = False
    for k, part in enumerate(m.parts):
        if type(part) is not ToolResult:  # pragma: no cover - tool messages hold only results
            continue
        content = part.content
        if len(content) == 1 and type(content[0]) is Text and is_elided(content[0].text):
            continue
        size = sum(_size(c) for c in content)
        if size <= min_bytes:
            continue
        text = _placeholder(size, _result_what(part), hint)
        parts[k] = replace(part, content=(Text(text),))
        elided.append(ElidedPart(i, k, "tool-result", part.name, size))
        changed = True
    return tuple(parts) if changed else None


def _elide_reasoning(
    m: Message,
    i: int,
    min_bytes: int,
    hint: str | None,
    elided: list[ElidedPart],
    kept: list[tuple[int, int]],
) -> tuple[Part, ...] | None:
    parts: list[Part] = list(m.parts)
    changed = False
    for k, part in enumerate(m.parts):
        if type(part) is not Reasoning or is_elided(part.text):
            continue
        size = _size(Text(part.text))
        if size <= min_bytes:
            continue
        if part.signature is not None or part.redacted or part.provider_id is not None:
            kept.append((i, k))
            continue
        parts[k] = replace(part, text=_placeholder(size, "reasoning", hint))
        elided.append(ElidedPart(i, k, "reasoning", None, size))
        changed = True
    return tuple(parts) if changed else None


# -- the summary view ------------------------------------------------------------------------------
def summary_part(summary: str, *, note: str | None = SUMMARY_NOTE) -> Text:
    """The ``Text`` part that carries a summary in a view (``split_summary`` reads it back)."""
    if not isinstance(summary, str) or not summary.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError("a compaction summary must be a non-empty string")
    if note is not None and (not isinstance(note, str) or "\n" in note):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError("the summary note must be one line of text (or None)")
    head = f"{SUMMARY_OPEN}\n{note}\n\n" if note else f"{SUMMARY_OPEN}\n\n"
    return Text(f"{head}{summary}\n{SUMMARY_CLOSE}")


def split_summary(message: Message) -> tuple[str | None, Message | None]:
    """``(summary, rest)`` of a view's first message: the summary a view placed in it (``None``
    when it holds none), and the message without that part (``None`` when nothing is left).
    A message without a summary comes back as ``(None, message)``."""
    if message.role != "user" or not message.parts:
        return None, message
    first = message.parts[0]
    if type(first) is not Text:
        return None, message
    text = first.text
    if not (text.startswith(SUMMARY_OPEN + "\n") and text.endswith("\n" + SUMMARY_CLOSE)):
        return None, message
    body = text[len(SUMMARY_OPEN) + 1 : -len(SUMMARY_CLOSE) - 1]
    if body.startswith("\n"):  # written without a note
        summary = body[1:]
    else:
        head, sep, summary = body.partition("\n\n")
        if not sep or "\n" in head:
            return None, message
    rest = message.parts[1:]
    return summary, (replace(message, parts=rest) if rest else None)


def compacted_view(
    history: Iterable[Message], summary: str | None, boundary: int, *, note: str | None = SUMMARY_NOTE
) -> list[Message]:
    """The view sent for a history compacted at ``boundary``: ``summary`` stands for
    ``history[:boundary]``, followed by ``history[boundary:]``.

    The summary is the first ``Text`` part of the view's first user turn: merged into
    ``history[boundary]`` when it is a user message, otherwise (an assistant turn whose calls are
    answered right after it) a user message of its own placed before it; with nothing after the
    boundary the view is that one user message. ``summary=None`` gives ``history[boundary:]``.
    A boundary where no request can open (a tool message, a system message, a turn whose results
    were cut) is a ``HistoryError``: boundaries come from ``compaction_boundary``.
    """
    msgs = as_messages(history, "compacted_view")
    n = len(msgs)
    if type(boundary) is not int or not 0 <= boundary <= n:
        raise UserError(f"compacted_view needs 0 <= boundary <= {n}, not {boundary!r}")
    part = summary_part(summary, note=note) if summary is not None else None
    if boundary > 0 and boundary < n:
        opening = TrimHistory(n - boundary).apply(msgs)[1].start
        if opening != boundary:
            raise HistoryError(
                f"no request can open at message {boundary} ({msgs[boundary].role}); "
                f"the nearest boundary after it is message {opening}"
            )
    elif boundary == 0 and n and msgs[0].role not in ("user", "assistant"):
        raise HistoryError(f"no request can open at message 0 ({msgs[0].role})")
    view = list(msgs[boundary:])
    if part is None:
        return view
    if view and view[0].role == "user":
        first = view[0]
        view[0] = replace(first, parts=(part, *first.parts))
    else:
        view.insert(0, Message("user", (part,)))
    return view


def compaction_boundary(
    history: Sequence[Message], tally: TokenTally, *, start: int, target: int, head: int = 0
) -> int | None:
    """Where a new summary should end so that ``head`` tokens (the summary) plus the messages
    after the boundary fit ``target``, moved forward to where a request can open
    (``trim_history``'s rule); when nothing after that point can open, the last point before it
    that can. The boundary is after ``start`` (the previous one) and before the last message;
    ``None`` when there is none. ``tally`` counts ``history`` (updated here: O(new messages));
    the search is O(log n) plus one scan of the part after ``start``. ``target=0`` asks for the
    latest boundary (a forced compaction keeps only the newest turn)."""
    n = len(history)
    tally.update(history)
    if n - start < 2:
        return None
    total = tally.total
    # the smallest j with head + tokens(history[j:]) <= target, by bisection on the prefix sums
    lo, hi = start + 1, n - 1
    if head + total - tally.prefix(hi) > target:
        j = hi
    else:
        while lo < hi:
            mid = (lo + hi) // 2
            if head + total - tally.prefix(mid) <= target:
                hi = mid
            else:
                lo = mid + 1
        j = lo
    # a view over a growing list (the run's) is read item by item: only the part after ``start``
    tail = history[start:] if isinstance(history, list | tuple) else [history[i] for i in range(start, n)]
    cut = j - start
    try:
        return start + TrimHistory(n - j).apply(tail)[1].start
    except HistoryError:
        pass
    # nothing at or after j can open: the latest earlier point that can (checked by the same rule)
    for k in range(cut - 1, 0, -1):
        if tail[k].role in ("user", "assistant"):
            try:
                opening = TrimHistory(len(tail) - k).apply(tail)[1].start
            except HistoryError:  # an assistant turn whose results lie before it (not normalized)
                return None
            return start + opening if opening < cut else None
    return None
