"""Message content in the GenAI conventions' structured form, bounded in size (opt-in only).

``gen_ai.input.messages`` / ``gen_ai.output.messages`` are JSON arrays of
``{"role", "parts": [...], "finish_reason"?}`` with parts ``text``, ``reasoning``, ``tool_call``
(``id``, ``name``, ``arguments``), ``tool_call_response`` (``id``, ``response``), ``uri``
(``modality``, ``mime_type``, ``uri``) and ``blob`` (inline media: its bytes are never recorded,
only ``modality``, ``mime_type`` and ``size``). Each value is bounded by ``max_chars``: a text is
cut (saying how much was left out) and the oldest input messages are left out first (their
number goes to ``tether.content.omitted_messages``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult

__all__ = ["cut", "input_messages", "instructions", "output_messages", "tool_arguments", "tool_result"]

_OVERHEAD = 48  # JSON punctuation and keys per part, counted against the budget
_MIN_PART = 64
_encode = msgspec.json.Encoder().encode


def cut(text: str, limit: int) -> str:
    """``text`` bounded to about ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    keep = max(limit - 32, 0)
    return f"{text[:keep]}…[{len(text) - keep} more chars]"


class _Budget:
    __slots__ = ("left",)

    def __init__(self, limit: int) -> None:
        self.left = limit

    def text(self, value: str) -> str:
        value = cut(value, max(self.left - _OVERHEAD, _MIN_PART))
        self.left -= len(value) + _OVERHEAD
        return value


def _arguments(raw: str) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw  # kept verbatim: what the model produced


def _media(part: Image | Document) -> dict[str, Any]:
    modality = "image" if type(part) is Image else "document"
    if part.url is not None:
        return {"type": "uri", "modality": modality, "mime_type": part.media_type, "uri": cut(part.url, 512)}
    return {"type": "blob", "modality": modality, "mime_type": part.media_type, "size": len(part.data or b"")}


def _part(part: object, budget: _Budget) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "content": budget.text(part.text)}
    if isinstance(part, Reasoning):
        return {"type": "reasoning", "content": budget.text(part.text)}
    if isinstance(part, ToolCall):
        raw = budget.text(part.arguments)
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": _arguments(raw)}
    if isinstance(part, ToolResult):
        return {"type": "tool_call_response", "id": part.call_id, "response": budget.text(part.text)}
    if isinstance(part, Image | Document):
        return _media(part)
    return {"type": type(part).__name__.lower()}  # pragma: no cover - every part type is listed


def _message(message: Message, budget: _Budget) -> dict[str, Any]:
    return {"role": message.role, "parts": [_part(p, budget) for p in message.parts]}


def input_messages(messages: Sequence[Message], max_chars: int) -> tuple[str, int]:
    """The messages sent, newest kept first within the budget; and how many older ones were
    left out."""
    budget = _Budget(max_chars)
    kept: list[dict[str, Any]] = []
    for message in reversed(messages):
        if budget.left < _MIN_PART + _OVERHEAD:
            break
        kept.append(_message(message, budget))
    kept.reverse()
    return _encode(kept).decode(), len(messages) - len(kept)


def output_messages(message: Message, finish_reason: str, max_chars: int) -> str:
    entry = _message(message, _Budget(max_chars))
    entry["finish_reason"] = finish_reason
    return _encode([entry]).decode()


def instructions(text: str, max_chars: int) -> str:
    return _encode([{"type": "text", "content": cut(text, max_chars)}]).decode()


def tool_arguments(call: ToolCall, max_chars: int) -> str:
    return cut(call.arguments, max_chars)


def tool_result(result: ToolResult, max_chars: int) -> str:
    return cut(result.text, max_chars)
