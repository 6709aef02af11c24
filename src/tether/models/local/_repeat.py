"""A guard against a local model that repeats itself: small models at low temperature fall into
loops ("and I'm your guest, and I'm your guest, …") that would otherwise run until the token bound
or the context is full. Pure Python over the generated text, so it works for any GGUF and is tested
without llama.cpp."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["REPETITION", "RepetitionDetector"]

REPETITION = "repetition"
"""``Message.stop_reason`` of a local step stopped because its text repeated itself (the
``ModelResponse.stop_reason`` is the normalized ``"length"``: the step was cut short)."""


@dataclass(slots=True)
class RepetitionDetector:
    """Feed the text of one generation piece by piece; :meth:`feed` turns true once the text ends
    in a loop. Two signs count as a loop:

    - the tail is one unit repeated back to back (period ``1 … max_period`` characters) over at
      least ``min_span`` characters and at least ``min_repeats`` times — ``"ha ha ha"`` is fine,
      a sentence said three times in a row is not. Units of up to ``short_period`` characters
      need twice the span, so a separator line (``"=" * 80``) or an indentation is not a loop;
    - one line of at least ``min_line`` characters (whitespace trimmed) completed ``line_repeats``
      times, even with other lines between them.
    """

    min_span: int = 64
    min_repeats: int = 3
    short_period: int = 4
    max_period: int = 256
    min_line: int = 16
    line_repeats: int = 4
    _text: str = ""
    _lines: dict[str, int] = field(default_factory=lambda: {})
    _line_start: int = 0
    tripped: bool = False

    @property
    def text(self) -> str:
        return self._text

    def feed(self, piece: str) -> bool:
        """Add ``piece``; true when the text so far ends in a loop (and from then on)."""
        if self.tripped or not piece:
            return self.tripped
        self._text += piece
        self.tripped = self._completed_lines_repeat() or self._tail_repeats()
        return self.tripped

    def _completed_lines_repeat(self) -> bool:
        text = self._text
        end = text.rfind("\n")
        if end < self._line_start:
            return False
        for line in text[self._line_start : end].split("\n"):
            key = line.strip()
            if len(key) >= self.min_line:
                count = self._lines.get(key, 0) + 1
                self._lines[key] = count
                if count >= self.line_repeats:
                    return True
        self._line_start = end + 1
        return False

    def _tail_repeats(self) -> bool:
        text = self._text
        n = len(text)
        if n < self.min_span:
            return False
        window = max(self.max_period * self.min_repeats, 2 * self.min_span)
        tail = text[-window:] if n > window else text
        size = len(tail)
        for period in range(1, min(self.max_period, size // self.min_repeats) + 1):
            # the tail has this period for at least max(min_span, min_repeats * period) characters
            span = self.min_span * (2 if period <= self.short_period else 1)
            need = max(span, self.min_repeats * period)
            if need > size:
                continue
            if tail[size - need + period :] == tail[size - need : size - period]:
                unit = tail[size - period :]
                if (unit + unit).find(unit, 1) == period:  # not a run of a shorter unit, checked before
                    return True
        return False
