"""Anthropic decoding: ``messages`` transcripts and Messages API response bodies to tether
messages, and the streaming accumulator. The mapping is described in
:mod:`tether.models.wire.anthropic` (the public module, which re-exports these names)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, cast

import msgspec

from tether.messages import (
    Document,
    Image,
    Message,
    Part,
    Reasoning,
    ResultPart,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
from tether.models._base import ModelResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from tether.models.wire._common import ConversionReport
from tether.models.wire._json import b64decode, fail, obj, seq, string, token_count

__all__ = [
    "PROVIDER",
    "StreamAccumulator",
    "decode_messages",
    "decode_response",
    "decode_usage",
    "normalize_stop_reason",
]

JSON = dict[str, Any]
_json_object = msgspec.json.Decoder(dict[str, Any])
PROVIDER: Final = "anthropic"
"""The provider stamped on messages and reasoning decoded from the Anthropic Messages API."""

_STOP_REASONS: Final = MappingProxyType(
    {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "tool_use": "tool_calls",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "refusal": "content_filter",
    }
)
_FIELDS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "text": frozenset({"type", "text"}),
        "thinking": frozenset({"type", "thinking", "signature"}),
        "redacted_thinking": frozenset({"type", "data"}),
        "tool_use": frozenset({"type", "id", "name", "input"}),
        "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
        "image": frozenset({"type", "source"}),
        "document": frozenset({"type", "source", "title"}),
    }
)
"""The fields of each block type that tether carries; any other (``cache_control``, ``citations``,
``context``…) is dropped on import and reported."""


_CARRIES_NOTHING: Final[Mapping[str, object]] = MappingProxyType({"caller": {"type": "direct"}})
"""Block field values that only state the default (a tool call the model made itself, not one made
from code execution): not a loss when a response leaves them out."""


def _media(block: Mapping[str, Any], path: str) -> Image | Document:
    kind = block["type"]
    source = obj(block.get("source"), f"{path}.source")
    source_type = string(source, "type", f"{path}.source")
    title = block.get("title") if isinstance(block.get("title"), str) else None
    if source_type == "url":
        url = string(source, "url", f"{path}.source")
        return Image(url=url) if kind == "image" else Document(url=url, title=title)
    if source_type not in ("base64", "text"):
        raise fail(f"unknown {kind} source type {source_type!r}", f"{path}.source.type")
    media_type = string(source, "media_type", f"{path}.source")
    data = string(source, "data", f"{path}.source")
    raw = data.encode() if source_type == "text" else b64decode(data, f"{path}.source.data")
    if kind == "image":
        return Image(data=raw, media_type=media_type)
    return Document(data=raw, media_type=media_type, title=title)


def _decode_result(
    block: Mapping[str, Any], path: str, names: Mapping[str, str], mi: int, pi: int, report: ConversionReport
) -> ToolResult:
    call_id = string(block, "tool_use_id", path)
    name = names.get(call_id)
    if name is None:
        report.approximate(mi, pi, "tool result name", f"no tool_use {call_id!r} before it")
        name = ""
    raw = block.get("content", "")
    content: list[ResultPart] = []
    if isinstance(raw, str):
        if raw:
            content.append(Text(raw))
    else:
        for ci, item in enumerate(seq(raw, f"{path}.content")):
            item_path = f"{path}.content[{ci}]"
            item = obj(item, item_path)
            kind = string(item, "type", item_path)
            if kind == "text":
                content.append(Text(string(item, "text", item_path)))
            elif kind in ("image", "document"):
                content.append(_media(item, item_path))
            else:
                report.drop(mi, pi, f"tool result {kind} block", "no tether equivalent")
                continue
            _report_fields(item, kind, mi, pi, report, where=f"tool result content[{ci}] ")
    return ToolResult(call_id, name, tuple(content), failed=block.get("is_error") is True)


def _report_fields(
    block: Mapping[str, Any], kind: str, mi: int, pi: int, report: ConversionReport, *, where: str = ""
) -> None:
    """Report each field of a carried block that tether has no place for (e.g. ``cache_control``:
    tether messages hold no prompt-cache breakpoints), so import never loses one silently."""
    known = _FIELDS.get(kind, frozenset())
    for key in block:
        if key not in known:
            report.drop(mi, pi, f"{where}{key}", f"the {kind} block field has no tether equivalent")


def _decode_assistant_block(block: Mapping[str, Any], kind: str, path: str) -> Part | None:
    if kind == "text":
        return Text(string(block, "text", path))
    if kind == "thinking":
        return Reasoning(
            string(block, "thinking", path), signature=string(block, "signature", path), provider=PROVIDER
        )
    if kind == "redacted_thinking":
        return Reasoning(signature=string(block, "data", path), redacted=True, provider=PROVIDER)
    if kind == "tool_use":
        arguments = block.get("input", {})
        if isinstance(arguments, str):  # a streamed call whose argument JSON never completed
            text = arguments
        elif isinstance(arguments, Mapping):
            text = msgspec.json.encode(arguments).decode()
        else:
            raise fail("tool_use input must be an object", f"{path}.input")
        return ToolCall(string(block, "id", path), string(block, "name", path), text)
    return None


def decode_messages(items: object, *, path: str = "$") -> tuple[list[Message], ConversionReport]:
    """An Anthropic ``messages`` list (a transcript) → tether messages.

    A user turn holding ``tool_result`` blocks becomes a tool message (results) followed by a user
    message with the other blocks; the tool name of a result comes from its ``tool_use``. Blocks
    with no tether equivalent (server tools, citations, compaction) are dropped and reported.
    Malformed input raises :class:`~tether.DecodeError` with a JSON path, starting at ``path``
    (where ``items`` sits in a larger document, e.g. ``$.messages``).
    """
    report = ConversionReport()
    out: list[Message] = []
    names: dict[str, str] = {}
    root = path
    for mi, raw in enumerate(seq(items, root)):
        path = f"{root}[{mi}]"
        entry = obj(raw, path)
        role = string(entry, "role", path)
        if role not in ("user", "assistant", "system"):
            raise fail(f"unknown role {role!r}", f"{path}.role")
        content = entry.get("content")
        if isinstance(content, str):
            out.append(Message(role, (Text(content),)))
            continue
        parts: list[Part] = []
        results: list[ToolResult] = []
        for pi, block in enumerate(seq(content, f"{path}.content")):
            bpath = f"{path}.content[{pi}]"
            block = obj(block, bpath)
            kind = string(block, "type", bpath)
            if role == "user" and kind == "tool_result":
                results.append(_decode_result(block, bpath, names, mi, pi, report))
            elif role != "assistant" and kind == "text":
                parts.append(Text(string(block, "text", bpath)))
            elif role == "user" and kind in ("image", "document"):
                parts.append(_media(block, bpath))
            elif role == "assistant":
                part = _decode_assistant_block(block, kind, bpath)
                if part is None:
                    report.drop(mi, pi, f"{kind} block", "no tether equivalent")
                    continue
                if type(part) is ToolCall and part.id is not None:
                    names[part.id] = part.name
                parts.append(part)
            else:
                report.drop(mi, pi, f"{kind} block", "no tether equivalent")
                continue
            _report_fields(block, kind, mi, pi, report)
        if results:
            out.append(Message("tool", tuple(results)))
        if role == "system" and not parts:
            report.drop(mi, None, "system message", "none of its blocks has a tether equivalent")
        elif parts or not results:
            out.append(Message(role, tuple(parts)))
    return out, report


def normalize_stop_reason(stop_reason: object) -> str:
    """Anthropic ``stop_reason`` → ``stop`` | ``tool_calls`` | ``length`` | ``content_filter``, or
    the provider value (``pause_turn``…) passed through."""
    if not isinstance(stop_reason, str):
        return "stop"
    return _STOP_REASONS.get(stop_reason, stop_reason)


def decode_usage(raw: object) -> Usage:
    """Anthropic ``usage`` → :class:`~tether.Usage`. ``input_tokens`` counts every prompt token
    (Anthropic reports cache reads and writes apart; they are added back, as OpenAI counts them)."""
    if not isinstance(raw, Mapping):
        return Usage()
    usage = cast(Mapping[str, Any], raw)

    def count(key: str) -> int:
        return token_count(usage.get(key))

    read, write = count("cache_read_input_tokens"), count("cache_creation_input_tokens")
    return Usage(
        input_tokens=token_count(count("input_tokens") + read + write),
        output_tokens=count("output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def decode_response(body: Mapping[str, Any], *, report: ConversionReport | None = None) -> ModelResponse:
    """A Messages API response body → :class:`~tether.models.ModelResponse`. Server-tool blocks
    (``server_tool_use``, ``web_search_tool_result``, code execution…) and block fields such as
    text ``citations`` have no tether equivalent: they are left out and, given a ``report``, listed
    there (message 0, part = block index)."""
    body = obj(body, "$")
    report = ConversionReport() if report is None else report
    parts: list[Part] = []
    for pi, block in enumerate(seq(body.get("content", []), "$.content")):
        path = f"$.content[{pi}]"
        block = obj(block, path)
        kind = string(block, "type", path)
        part = _decode_assistant_block(block, kind, path)
        if part is None:
            report.drop(0, pi, f"{kind} block", "a provider-side block with no tether equivalent")
            continue
        parts.append(part)
        known = _FIELDS.get(kind, frozenset())
        for key, value in block.items():
            if key not in known and value not in (None, [], {}, "", _CARRIES_NOTHING.get(key)):
                report.drop(0, pi, f"{kind} {key}", f"the {kind} block field has no tether equivalent")
    stop_reason = normalize_stop_reason(body.get("stop_reason"))
    usage = decode_usage(body.get("usage"))
    model = body.get("model")
    response_id = body.get("id")
    message = Message(
        "assistant",
        tuple(parts),
        provider=PROVIDER,
        model=model if isinstance(model, str) else None,
        stop_reason=stop_reason,
        usage=usage,
        response_id=response_id if isinstance(response_id, str) else None,
    )
    return ModelResponse(message, stop_reason, usage)


# -- streaming -----------------------------------------------------------------------------------
_KEPT_BLOCKS: Final = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})


class StreamAccumulator:
    """Feeds Messages streaming events (``message_start``, ``content_block_*``, ``message_delta``…)
    as dicts. :meth:`feed` returns the deltas of each event; :meth:`body` is the equivalent
    non-streamed response body and :meth:`result` its :func:`decode_response`, so a streamed
    response equals the non-streamed one part for part. Delta indexes are final part indexes and
    the deltas of each part add up to it: a tool call's arguments go out in one delta when its
    block stops, as the final message writes them (the object re-encoded, ``{}`` for none), not
    as the API's ``partial_json`` pieces, whose spacing and escapes differ."""

    def __init__(self) -> None:
        self._message: JSON = {}
        self._blocks: dict[int, JSON] = {}
        self._json: dict[int, list[str]] = {}
        self._part_index: dict[int, int] = {}
        self._usage: JSON = {}
        self._stopped = False
        self._settled: set[int] = set()  # tool_use blocks whose arguments went out

    @property
    def finished(self) -> bool:
        """True once ``message_stop`` (or a stop reason) arrived: the response is complete."""
        return self._stopped or self._message.get("stop_reason") is not None

    def feed(self, event: Mapping[str, Any]) -> list[StreamEvent]:
        """Absorb one event; return the deltas it carries."""
        kind = event.get("type")
        if kind == "message_start":
            self._message = dict(obj(event.get("message"), "$.message"))
            self._usage.update(obj(self._message.get("usage") or {}, "$.message.usage"))
        elif kind == "content_block_start":
            return self._start(int(event["index"]), obj(event.get("content_block"), "$.content_block"))
        elif kind == "content_block_delta":
            return self._delta(int(event["index"]), obj(event.get("delta"), "$.delta"))
        elif kind == "content_block_stop":
            return self._settle(int(event["index"]))
        elif kind == "message_stop":
            self._stopped = True
            return [d for index in sorted(self._blocks) for d in self._settle(index)]
        elif kind == "message_delta":
            delta = obj(event.get("delta") or {}, "$.delta")
            for key in ("stop_reason", "stop_sequence"):
                if key in delta:
                    self._message[key] = delta[key]
            usage = event.get("usage")
            if isinstance(usage, Mapping):
                self._usage.update({k: v for k, v in cast(Mapping[str, Any], usage).items() if v is not None})
        return []

    def _start(self, index: int, block: Mapping[str, Any]) -> list[StreamEvent]:
        self._blocks[index] = dict(block)
        kind = block.get("type")
        if kind not in _KEPT_BLOCKS:
            return []
        part = self._part_index[index] = len(self._part_index)
        if kind == "tool_use":
            self._json[index] = []
            return [ToolCallDelta(part, id=block.get("id"), name=block.get("name"))]
        if kind == "text" and block.get("text"):
            return [TextDelta(part, block["text"])]
        if kind == "thinking" and block.get("thinking"):
            return [ReasoningDelta(part, block["thinking"])]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamEvent]:
        block = self._blocks.get(index)
        if block is None:
            raise fail("content_block_delta before content_block_start", f"$.index({index})")
        kind = delta.get("type")
        part = self._part_index.get(index)
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [TextDelta(part, delta["text"])] if part is not None and delta["text"] else []
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return [ReasoningDelta(part, delta["thinking"])] if part is not None and delta["thinking"] else []
        if kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "input_json_delta":  # sent whole when the block stops (see the class)
            self._json.setdefault(index, []).append(delta.get("partial_json", ""))
        return []

    def _settle(self, index: int) -> list[StreamEvent]:
        """A block stopped: a tool call's arguments, as the final message holds them."""
        part = self._part_index.get(index)
        block = self._blocks.get(index)
        if part is None or block is None or block.get("type") != "tool_use" or index in self._settled:
            return []
        self._settled.add(index)
        call = _decode_assistant_block(self._assembled(index), "tool_use", f"$.content[{index}]")
        arguments = call.arguments if type(call) is ToolCall else ""
        return [ToolCallDelta(part, arguments=arguments)] if arguments else []

    def _assembled(self, index: int) -> JSON:
        """Block ``index`` as the non-streamed body holds it."""
        block = self._blocks[index]
        text = "".join(self._json.get(index) or ())
        if not text:
            return block
        try:
            return {**block, "input": _json_object.decode(text)}
        except msgspec.DecodeError:
            return {**block, "input": text}  # cut off mid-arguments: kept verbatim

    def body(self) -> JSON:
        """The non-streamed response body equivalent to the events fed so far."""
        content = [self._assembled(index) for index in sorted(self._blocks)]
        body = {**self._message, "content": content}
        if self._usage:
            body["usage"] = self._usage
        return body

    def result(self, *, report: ConversionReport | None = None) -> ModelResponse:
        """The response the equivalent non-streamed call would have produced (and its losses)."""
        return decode_response(self.body(), report=report)
