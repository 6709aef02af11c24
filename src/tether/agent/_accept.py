"""What a run accepts from a model: text that is valid Unicode.

A model's text can hold surrogate halves: a provider that splits an emoji's UTF-16 pair across two
stream chunks (``"\\ud83d"`` in one SSE event, ``"\\ude00"`` in the next: JSON decoding makes each a
lone half), or a scripted model returning one. No JSON encoding, store or HTTP stream carries a
lone half, so the run takes in model output here, once: in a finished message each pair of halves
that belong together is joined into its character and every remaining lone half becomes U+FFFD;
streamed deltas hold a trailing high half back until the next delta of the same part (or emit it as
U+FFFD when the stream ends), so the deltas of a part still concatenate to the final text.

The work is done only when a surrogate is there: ASCII text (``str.isascii`` is O(1)) and text
without one pass through unchanged, as the same objects.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Final

from msgspec.structs import replace

from tether.messages import Message, Part, Reasoning, Text, ToolCall, ToolResult
from tether.models import ModelResponse

from ._result import ReasoningEvent, TextEvent, ToolCallDeltaEvent

__all__ = ["REPLACEMENT", "DeltaText", "accept_message", "accept_response", "valid_result", "valid_text"]

_log = logging.getLogger("tether.agent")

REPLACEMENT: Final = "\ufffd"
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_TEXT: Final = 0
_REASONING: Final = 1
_ARGUMENTS: Final = 2


def _suspect(text: str) -> bool:
    """True when ``text`` holds a surrogate half (free for ASCII text)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _join(text: str) -> str:
    """Pairs of halves joined into their characters, lone halves replaced by U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: each high half followed by a low half joined into its character,
    every other half replaced by U+FFFD; ``text`` itself when it holds no half."""
    return _join(text) if _suspect(text) else text


def valid_result(result: ToolResult) -> ToolResult:
    """``result`` with its text made valid Unicode (a tool's output: a file read with
    ``surrogateescape``, an exception quoting bytes); ``result`` itself when nothing changes."""
    content = tuple(
        replace(p, text=valid_text(p.text)) if type(p) is Text and _suspect(p.text) else p
        for p in result.content
    )
    if any(a is not b for a, b in zip(content, result.content, strict=True)):
        return replace(result, content=content)
    return result


def _lone(before: str, after: str) -> int:
    """How many lone halves :func:`_join` replaced (each is one U+FFFD more)."""
    return after.count(REPLACEMENT) - before.count(REPLACEMENT)


def _part_suspect(part: Part) -> bool:
    if type(part) is Text or type(part) is Reasoning:
        return _suspect(part.text)
    if type(part) is ToolCall:
        return _suspect(part.arguments) or _suspect(part.name) or (part.id is not None and _suspect(part.id))
    return False


def _valid_part(part: Part) -> tuple[Part, int]:
    if type(part) is Text or type(part) is Reasoning:
        text = _join(part.text)
        return replace(part, text=text), _lone(part.text, text)
    if type(part) is ToolCall:
        name, arguments = valid_text(part.name), valid_text(part.arguments)
        call_id = None if part.id is None else valid_text(part.id)
        lone = _lone(part.name + part.arguments + (part.id or ""), name + arguments + (call_id or ""))
        return replace(part, id=call_id, name=name, arguments=arguments), lone
    return part, 0


def accept_message(message: Message) -> tuple[Message, int]:
    """``message`` with valid Unicode in every text a model writes (text, reasoning, a tool call's
    name, arguments and id), and how many lone halves became U+FFFD (joined pairs do not count).
    The same message object when there was nothing to do."""
    parts = message.parts
    for part in parts:
        if _part_suspect(part):
            break
    else:
        return message, 0
    fixed: list[Part] = []
    lone = 0
    for part in parts:
        if _part_suspect(part):
            part, n = _valid_part(part)
            lone += n
        fixed.append(part)
    return replace(message, parts=tuple(fixed)), lone


def accept_response(response: ModelResponse, run_id: str, step: int) -> ModelResponse:
    """``response`` with its message accepted (:func:`accept_message`); lone halves replaced are
    logged once for the response at WARNING on the ``tether.agent`` logger (joined pairs are not:
    the text is what the model meant)."""
    for part in response.message.parts:  # the common case, inline: every text is ASCII, O(1) each
        if type(part) is Text or type(part) is Reasoning:
            if not part.text.isascii():
                break
        elif type(part) is ToolCall and not (
            part.arguments.isascii() and part.name.isascii() and (part.id or "").isascii()
        ):
            break
    else:
        return response
    message, lone = accept_message(response.message)
    if message is response.message:
        return response
    if lone:
        _log.warning(
            "run %s step %d: the model's message held %d lone UTF-16 surrogate(s), not valid "
            "Unicode; each was replaced with U+FFFD",
            run_id,
            step,
            lone,
        )
    return dataclasses.replace(response, message=message)


class DeltaText:
    """The text of one model stream's deltas, made valid as it arrives.

    ``text(i, t)``, ``reasoning(i, t)`` and ``arguments(i, t)`` return what to emit for a delta of
    part ``i``: a trailing high half is held back and put before the part's next delta (where its
    low half usually is); when the stream ends, ``flush`` gives events that emit what is still held
    as U+FFFD. Deltas without a half, while nothing is held, pass through unchanged.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[tuple[int, int], str] = {}

    def text(self, index: int, text: str) -> str:
        return text if text.isascii() and not self._held else self._take(_TEXT, index, text)

    def reasoning(self, index: int, text: str) -> str:
        return text if text.isascii() and not self._held else self._take(_REASONING, index, text)

    def arguments(self, index: int, text: str) -> str:
        return text if text.isascii() and not self._held else self._take(_ARGUMENTS, index, text)

    def _take(self, kind: int, index: int, text: str) -> str:
        key = (kind, index)
        held = self._held.pop(key, None)
        if held is not None:
            text = held + text
        if _SURROGATE.search(text) is None:
            return text
        if "\ud800" <= text[-1] <= "\udbff":  # a high half: its low half may start the next delta
            self._held[key] = text[-1]
            text = text[:-1]
        return _join(text)

    def flush(
        self, run_id: str, conversation_id: str, step: int
    ) -> list[TextEvent | ReasoningEvent | ToolCallDeltaEvent]:
        """The events that end the step's parts whose last delta was a high half, a lone half now:
        each says U+FFFD."""
        out: list[TextEvent | ReasoningEvent | ToolCallDeltaEvent] = []
        for kind, index in self._held:
            if kind == _TEXT:
                out.append(TextEvent(run_id, conversation_id, step, index, REPLACEMENT))
            elif kind == _REASONING:
                out.append(ReasoningEvent(run_id, conversation_id, step, index, REPLACEMENT))
            else:
                out.append(ToolCallDeltaEvent(run_id, conversation_id, step, index, None, None, REPLACEMENT))
        self._held.clear()
        return out
