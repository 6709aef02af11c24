"""OpenAI Responses streaming: events to deltas and the final ``ModelResponse``.

A delta's ``index`` is the index of its part in the final message, whatever the order of the
events the Responses API allows: message, reasoning and call items stream one after another
(``output_index`` ascending; provider-native items, which give no part, may stay open across
them); a reasoning item gives one part per summary entry and then one per raw reasoning
entry (``response.reasoning_text.delta``, streamed by OpenAI-compatible servers for open-weight
models), or one empty part; a message gives one part per output text or refusal; a function call
one part; a provider-native item none. So the part index of an entry is the number of parts of
the items before it plus its position in its own item, counted from what the stream said so far.

When an item is done, text its deltas did not carry (a server that sends some text only in the
``.done`` events, a call without arguments that decodes as ``{}``) goes out as one more delta,
so the deltas of every part add up to the final part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from tether.errors import DecodeError
from tether.messages import Part, Reasoning, Text, ToolCall
from tether.models._base import ModelResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from tether.models.wire._common import ConversionReport
from tether.models.wire._json import fail, obj
from tether.models.wire._openai_responses_decode import decode_response

__all__ = ["StreamAccumulator"]

Item = dict[str, Any]

_MAX_GAP: Final = 16
"""How far past the entries seen so far a summary or content index may point (entries arrive in
order; a larger index is a malformed event, not a reason to allocate a list that long)."""

_STARTS: Final = frozenset({"response.created", "response.in_progress", "response.queued"})
_ENDS: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _index(event: Mapping[str, Any], key: str) -> int:
    value = event.get(key, 0)
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise fail(f"{key!r} must be a non-negative integer, got {value!r}", f"$.{key}")
    return value


def _text(event: Mapping[str, Any], key: str) -> str:
    value = event.get(key)
    return value if isinstance(value, str) else ""


def _empty(kind: str) -> Item:
    if kind == "message":
        return {"type": "message", "role": "assistant", "content": []}
    return {"type": "reasoning", "summary": [], "content": []}


def _partial_count(item: Mapping[str, Any]) -> int:
    """How many parts an item that has not finished gives (as ``decode_response`` would)."""
    kind = item.get("type")
    if kind == "message":
        content = item.get("content")
        return len(cast(list[Any], content)) if isinstance(content, list) else 1
    if kind == "reasoning":
        return max(1, len(item.get("summary") or ()) + len(item.get("content") or ()))
    if kind == "function_call":
        return 1 if item.get("call_id") else 0
    return 0


def _item_parts(item: Item) -> tuple[Part, ...]:
    """The parts one finished output item gives in the final message (none if it is malformed:
    the final response then fails to decode anyway)."""
    try:
        return decode_response({"output": [item]}).message.parts
    except DecodeError:
        return ()


class StreamAccumulator:
    """Assembles Responses streaming events into deltas and the final ``ModelResponse``.

    The final message is built from the streamed items (``response.output_item.done``, or what
    arrived of items that never finished), never from the ``output`` of ``response.completed``, so
    it can be compared with what the non-streamed call returns. Events are never modified.
    """

    def __init__(self) -> None:
        self.response: dict[str, Any] = {}
        self.done: dict[int, Item] = {}
        self.partial: dict[int, Item] = {}
        self.finished = False
        self._parts: dict[int, tuple[Part, ...]] = {}  # the final parts of each finished item
        self._sent: dict[tuple[int, int], str] = {}  # (output index, part in item) → delta text
        self._named: set[tuple[int, int]] = set()  # calls whose id and name went out

    # -- where a part goes ------------------------------------------------------------------------
    def _count(self, oi: int) -> int:
        parts = self._parts.get(oi)
        return len(parts) if parts is not None else _partial_count(self.done.get(oi) or self.partial[oi])

    def _part_index(self, oi: int, offset: int) -> int:
        keys = set(self.done) | set(self.partial)
        return sum(self._count(j) for j in keys if j < oi) + offset

    def _delta(self, oi: int, offset: int, kind: str, text: str) -> list[StreamEvent]:
        key = (oi, offset)
        self._sent[key] = self._sent.get(key, "") + text
        index = self._part_index(oi, offset)
        if kind == "reasoning":
            return [ReasoningDelta(index, text)]
        if kind == "message":
            return [TextDelta(index, text)]
        return [ToolCallDelta(index, arguments=text)]

    # -- events -----------------------------------------------------------------------------------
    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        """Take one event (a decoded SSE ``data`` object); return the deltas it carries.
        A malformed index raises ``DecodeError``."""
        kind = event.get("type")
        if kind in _STARTS or kind in _ENDS:
            self.response = dict(obj(event.get("response") or {}, "$.response"))
            self.finished = self.finished or kind in _ENDS
            return []
        if not isinstance(kind, str) or not kind.startswith("response."):
            return []
        oi = _index(event, "output_index")
        if kind == "response.output_item.added":
            return self._added(oi, obj(event.get("item") or {}, "$.item"))
        if kind == "response.output_item.done":
            return self._finish(oi, dict(obj(event.get("item") or {}, "$.item")))
        if oi in self.done:
            return []  # the item is final: what it said at .done is what counts
        if kind == "response.content_part.added":
            part = obj(event.get("part") or {}, "$.part")
            entry = str(part.get("type") or "output_text")
            field_text = _text(part, "refusal" if entry == "refusal" else "text")
            return self._append(oi, "content", _index(event, "content_index"), entry, field_text)
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            entry = "refusal" if kind == "response.refusal.delta" else "output_text"
            return self._append(oi, "content", _index(event, "content_index"), entry, _text(event, "delta"))
        if kind == "response.reasoning_summary_part.added":
            part = obj(event.get("part") or {}, "$.part")
            si = _index(event, "summary_index")
            return self._append(oi, "summary", si, "summary_text", _text(part, "text"))
        if kind == "response.reasoning_summary_text.delta":
            si = _index(event, "summary_index")
            return self._append(oi, "summary", si, "summary_text", _text(event, "delta"))
        if kind == "response.reasoning_text.delta":
            ci = _index(event, "content_index")
            return self._append(oi, "content", ci, "reasoning_text", _text(event, "delta"))
        if kind == "response.function_call_arguments.delta":
            return self._arguments(oi, _text(event, "delta"))
        return []

    def _added(self, oi: int, raw: Mapping[str, Any]) -> list[StreamEvent]:
        item: Item = dict(raw)
        kind = item.get("type")
        if kind == "message":
            item["content"] = []  # entries arrive as events
        elif kind == "reasoning":
            item["summary"], item["content"] = [], []
        self.partial[oi] = item
        if kind != "function_call" or not item.get("call_id"):
            return []
        self._named.add((oi, 0))
        arguments = _text(item, "arguments")
        self._sent[(oi, 0)] = arguments
        call_id, name = item.get("call_id"), item.get("name")
        return [
            ToolCallDelta(
                self._part_index(oi, 0),
                id=call_id if isinstance(call_id, str) else None,
                name=name if isinstance(name, str) else None,
                arguments=arguments,
            )
        ]

    def _append(self, oi: int, field: str, index: int, entry: str, text: str) -> list[StreamEvent]:
        kind = "reasoning" if field == "summary" or entry == "reasoning_text" else "message"
        item = self.partial.setdefault(oi, _empty(kind))
        if item.get("type") != kind:
            return []  # text for an item of another kind: nothing of the final message
        entries = item.get(field)
        if not isinstance(entries, list):
            entries = item[field] = []
        entries = cast(list[Item], entries)
        if index > len(entries) + _MAX_GAP:
            raise fail(f"entry index {index} is far past the {len(entries)} entries so far", f"$.{field}")
        key = "refusal" if entry == "refusal" else "text"
        while len(entries) <= index:
            entries.append({"type": entry, key: ""})
        current = entries[index]
        key = "refusal" if current.get("type") == "refusal" else "text"
        current[key] = str(current.get(key) or "") + text
        if not text:
            return []
        offset = index
        if field == "content" and kind == "reasoning":  # raw reasoning follows the summary parts
            offset += len(item.get("summary") or ())
        return self._delta(oi, offset, kind, text)

    def _arguments(self, oi: int, text: str) -> list[StreamEvent]:
        item = self.partial.setdefault(oi, {"type": "function_call"})
        if item.get("type") != "function_call":
            return []
        item["arguments"] = _text(item, "arguments") + text
        if not text or (oi, 0) not in self._named:
            return []  # a call that has not said who it is: its done event says it all
        return self._delta(oi, 0, "call", text)

    def _finish(self, oi: int, item: Item) -> list[StreamEvent]:
        """The item is final: send what its deltas did not say."""
        self.done[oi] = item
        parts = self._parts[oi] = _item_parts(item)
        out: list[StreamEvent] = []
        base = self._part_index(oi, 0)
        for offset, part in enumerate(parts):
            sent = self._sent.get((oi, offset), "")
            if type(part) is ToolCall:
                rest = part.arguments[len(sent) :] if part.arguments.startswith(sent) else ""
                if (oi, offset) not in self._named:
                    out.append(ToolCallDelta(base + offset, id=part.id, name=part.name, arguments=rest))
                elif rest:
                    out.append(ToolCallDelta(base + offset, arguments=rest))
            elif type(part) is Text or type(part) is Reasoning:
                rest = part.text[len(sent) :] if part.text.startswith(sent) else ""
                if rest:
                    delta = TextDelta if type(part) is Text else ReasoningDelta
                    out.append(delta(base + offset, rest))
        return out

    # -- the result -------------------------------------------------------------------------------
    def body(self) -> dict[str, Any]:
        """The response body assembled so far (``output`` from the streamed items)."""
        output: list[Item] = []
        for oi in sorted(set(self.done) | set(self.partial)):
            item = self.done.get(oi) or self.partial[oi]
            if item.get("type") == "function_call" and not item.get("call_id"):
                continue  # a call that never said who it is cannot be kept
            output.append(item)
        return {**self.response, "output": output}

    def result(self, *, report: ConversionReport | None = None) -> ModelResponse:
        """The final response (also usable on a cut stream: what arrived so far), and its losses."""
        return decode_response(self.body(), report=report)
