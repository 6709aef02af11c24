"""``CompactionReport``: what one compaction did, and what the view now stands for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

import msgspec

from tether.messages import Usage

__all__ = ["CompactionReport", "CompactionStep"]

CompactionStep: TypeAlias = Literal["elide", "summarize", "budget"]
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """One compaction. Token counts are of the view's messages (instructions and tools apart).

    - ``steps``: what changed the view, in order (``elide``, ``summarize``, ``budget``).
    - ``tokens_before`` / ``tokens_after``; ``limit`` (the threshold) and ``goal`` (the target) in
      tokens of the ``window``.
    - ``boundary``: the position where the view's messages start (the summary stands for the
      ones before it); ``hidden``: positions below this are not in the view verbatim.
    - ``summarized``: the positions ``(first, last)`` newly summarized; ``skipped``: positions
      left out of the summary because there were too many at once (``Compaction.max_calls``).
    - ``elided`` / ``elided_bytes``: parts replaced by placeholders in this compaction.
    - ``dropped``: positions ``(first, last)`` cut without a summary (budget, the last resort).
    - ``error``: why the summarizer failed (``fallback`` is then true: elide and budget ran in
      its place). ``background``: a summary written while the run went on, adopted now.
      ``forced``: asked for (``/compact``), not triggered by size.
    - ``summarizer_calls`` / ``usage``: what summarizing cost; ``truncated``: the summarizer was
      cut at ``Compaction.summary_tokens`` (the summary is kept as written); ``record_id``: the
      record made.
    """

    steps: tuple[CompactionStep, ...]
    tokens_before: int
    tokens_after: int
    limit: int
    goal: int
    window: int
    boundary: int
    hidden: int
    summarized: tuple[int, int] | None = None
    skipped: tuple[int, int] | None = None
    elided: int = 0
    elided_bytes: int = 0
    dropped: tuple[int, int] | None = None
    error: str | None = None
    fallback: bool = False
    background: bool = False
    forced: bool = False
    summarizer_calls: int = 0
    truncated: bool = False
    usage: Usage = Usage()  # noqa: RUF009 - Usage is immutable
    record_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value: Any = getattr(self, name)
            out[name] = msgspec.to_builtins(value)
        return out

    def to_json(self) -> bytes:
        return _encoder.encode(self.to_dict())

    def line(self) -> str:
        """One line for a terminal, e.g. ``compacted 81,920 -> 40,310 tokens: summarized
        messages 0-311 (elided 14 tool outputs)``."""
        what: list[str] = []
        if self.summarized is not None:
            what.append(f"summarized messages {self.summarized[0]}-{self.summarized[1]}")
        if self.elided:
            what.append(f"elided {self.elided} old output{'s' if self.elided != 1 else ''}")
        if self.dropped is not None:
            what.append(f"left out messages {self.dropped[0]}-{self.dropped[1]}")
        if not what:
            what.append("nothing could be compacted")
        head = "compacted" if not self.background else "compacted in the background"
        text = f"{head} {self.tokens_before:,} -> {self.tokens_after:,} tokens: {', '.join(what)}"
        if self.truncated:
            text += " (the summary was cut at its token limit)"
        if self.error is not None:
            text += f" ({self.error})"
        return text
