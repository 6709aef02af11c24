"""OpenAI Chat Completions responses: ``chat.completion`` bodies and ``chat.completion.chunk``
streams → :class:`~tether.models.ModelResponse`. Re-exported by :mod:`tether.models.wire.openai_chat`
(the public module); this file keeps that module small."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from tether.errors import DecodeError
from tether.messages import Message, Part, Reasoning, Text, ToolCall, Usage
from tether.models._base import ModelResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from tether.models.wire._common import ConversionReport, fallback_id
from tether.models.wire._json import obj, opt_obj, opt_str, seq, string, token_count

__all__ = [
    "JSON",
    "StreamAccumulator",
    "decode_call",
    "decode_response",
    "decode_usage",
    "normalize_stop_reason",
]

JSON = dict[str, Any]

_THINK_OPEN: Final = "<think>"
_THINK_CLOSE: Final = "</think>"
_STOP_REASONS: Final = MappingProxyType(
    {
        "stop": "stop",
        "end_turn": "stop",
        "tool_calls": "tool_calls",
        "function_call": "tool_calls",
        "length": "length",
        "max_tokens": "length",
        "content_filter": "content_filter",
    }
)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def decode_call(raw: object, path: str) -> ToolCall:
    item = obj(raw, path)
    function = obj(item.get("function"), f"{path}.function")
    name = string(function, "name", f"{path}.function")
    arguments = opt_str(function, "arguments", f"{path}.function")
    call_id = opt_str(item, "id", path)
    return ToolCall(call_id or None, name, "{}" if arguments is None else arguments)


# -- decoding a response -------------------------------------------------------------------------
def normalize_stop_reason(finish_reason: object, *, has_tool_calls: bool) -> str:
    """Provider ``finish_reason`` → ``stop`` | ``tool_calls`` | ``length`` | ``content_filter``;
    unknown values pass through. A response carrying tool calls reports ``tool_calls`` even when
    a compatible server says ``stop``; a missing reason reads as ``stop``."""
    reason = _STOP_REASONS.get(finish_reason, finish_reason) if isinstance(finish_reason, str) else "stop"
    if has_tool_calls and reason == "stop":
        return "tool_calls"
    return reason


def decode_usage(raw: object) -> Usage:
    """``usage`` → :class:`~tether.Usage`: prompt tokens (cached included) are input tokens,
    ``prompt_tokens_details.cached_tokens`` cache reads, ``completion_tokens_details.reasoning_tokens``
    reasoning tokens (already counted in output)."""
    usage = opt_obj(raw)
    if not usage:
        return Usage()
    cached = opt_obj(usage.get("prompt_tokens_details")).get("cached_tokens")
    reasoning = opt_obj(usage.get("completion_tokens_details")).get("reasoning_tokens")
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens")),
        output_tokens=token_count(usage.get("completion_tokens")),
        cache_read_tokens=token_count(cached),
        reasoning_tokens=token_count(reasoning),
    )


def _split_think(content: str) -> tuple[str, str] | None:
    """``<think>…</think>rest`` at the very start of content → (reasoning, rest). A block that
    never closes (a reply cut at its length limit while thinking) is all reasoning: ``rest`` is
    empty, as the stream showed it."""
    if not content.startswith(_THINK_OPEN):
        return None
    end = content.find(_THINK_CLOSE, len(_THINK_OPEN))
    if end < 0:
        return content[len(_THINK_OPEN) :], ""
    return content[len(_THINK_OPEN) : end], content[end + len(_THINK_CLOSE) :]


def _google_signature(holder: Mapping[str, Any]) -> str | None:
    google = opt_obj(opt_obj(holder.get("extra_content")).get("google"))
    return _str(google.get("thought_signature"))


def _legacy_call(holder: Mapping[str, Any]) -> list[Any]:
    """The deprecated ``function_call`` field (one call, no id; finish reason ``function_call``),
    which older OpenAI-compatible servers still send, as a one-entry ``tool_calls`` list."""
    function = holder.get("function_call")
    return [{"type": "function", "function": function}] if isinstance(function, Mapping) else []


def decode_response(
    body: JSON, *, provider: str = "openai", report: ConversionReport | None = None
) -> ModelResponse:
    """A ``chat.completion`` body → the assistant message, normalized stop reason and usage.

    Part order: reasoning (``reasoning_content`` / ``reasoning`` fields, or a leading
    ``<think>…</think>`` block in the content, all of it when it never closes), text, refusal
    text, tool calls. A call without an
    id gets a deterministic one derived from the response id, its index, name and arguments.
    Gemini's ``extra_content.google.thought_signature`` is kept as the call's (or text's) signature.
    A deprecated ``function_call`` (no ``tool_calls``) is decoded as one such call. The message's
    ``audio`` and ``annotations`` (web search citations), and content entries without text, have
    no tether equivalent: they are left out and, given a ``report``, listed there (message 0;
    part = content index, ``None`` for a message field).
    """
    report = ConversionReport() if report is None else report
    choices: list[Any] = body.get("choices") or []
    if not isinstance(choices, list) or not choices:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise DecodeError("OpenAI Chat response has no choices", path="$.choices")
    choice = obj(choices[0], "$.choices[0]")
    message = obj(choice.get("message"), "$.choices[0].message")
    response_id = body.get("id") if isinstance(body.get("id"), str) else None
    message_signature = _google_signature(message)
    parts: list[Part] = []
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    content = message.get("content")
    if isinstance(reasoning, str) and reasoning:
        parts.append(Reasoning(reasoning, provider=provider))
    elif isinstance(content, str) and (split := _split_think(content)) is not None:
        parts.append(Reasoning(split[0], provider=provider))
        content = split[1]
    if isinstance(content, list):
        items: list[Any] = content  # pyright: ignore[reportUnknownVariableType]
        for ci, raw in enumerate(items):
            entry = opt_obj(raw)
            text = _str(entry.get("text"))
            if text is not None:
                parts.append(Text(text))
            else:
                kind = entry.get("type")
                what = f"{kind if isinstance(kind, str) else 'untyped'} content"
                report.drop(0, ci, what, "a content entry without text has no tether equivalent")
    elif isinstance(content, str) and content:
        parts.append(Text(content))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        parts.append(Text(refusal))
    for key in _DROPPED_FIELDS:
        if message.get(key) not in (None, [], {}, ""):
            report.drop(0, None, key, f"the message's {key} has no tether equivalent")
    raw_calls: object = message.get("tool_calls") or _legacy_call(message)
    calls: list[ToolCall] = []
    for ci, raw_call in enumerate(seq(raw_calls, "$.choices[0].message.tool_calls")):
        call = decode_call(raw_call, f"$.choices[0].message.tool_calls[{ci}]")
        call_id = call.id or fallback_id(response_id, ci, call.name, call.arguments)
        signature = _google_signature(raw_call) or (message_signature if ci == 0 else None)
        # "" (some compatible servers, for a tool without parameters) means no arguments, as a
        # missing field does; kept verbatim it would read as a truncated call and fail the tool.
        arguments = call.arguments if call.arguments.strip() else "{}"
        calls.append(ToolCall(call_id, call.name, arguments, signature=signature))
    if message_signature is not None and not calls:
        for pi, part in enumerate(parts):
            if type(part) is Text:
                parts[pi] = Text(part.text, signature=message_signature)
                break
    parts.extend(calls)
    stop_reason = normalize_stop_reason(choice.get("finish_reason"), has_tool_calls=bool(calls))
    if isinstance(refusal, str) and refusal and stop_reason == "stop":
        stop_reason = "content_filter"
    usage = decode_usage(body.get("usage"))
    model = body.get("model")
    assistant = Message(
        "assistant",
        tuple(parts),
        provider=provider,
        model=model if isinstance(model, str) else None,
        stop_reason=stop_reason,
        usage=usage,
        response_id=response_id,
    )
    return ModelResponse(assistant, stop_reason, usage)


_DROPPED_FIELDS: Final = ("audio", "annotations")
"""Fields of a response message tether messages have no place for (reported when present)."""


# -- streaming -----------------------------------------------------------------------------------
class _CallState:
    __slots__ = ("arguments", "extra", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments: list[str] = []
        self.extra: Any = None


class StreamAccumulator:
    """Feeds ``chat.completion.chunk`` dicts; :meth:`feed` returns the deltas for each chunk and
    :meth:`result` the :class:`~tether.models.ModelResponse`, built by :func:`decode_response` from
    the assembled body so it equals the non-streamed response part for part.

    Delta ``index`` values are part indexes of the final message, and the deltas of each part add
    up to it. A ``<think>`` block at the start of the content streams as reasoning (one that never
    closes is reasoning in the final message too). When the finish reason arrives, what the
    deltas have not said yet goes out: a held-back piece that could have been a tag, and ``{}``
    for a call whose arguments were empty (the final call's arguments).
    """

    def __init__(self, *, provider: str = "openai") -> None:
        self.provider = provider
        self._id: str | None = None
        self._model: str | None = None
        self._finish: Any = None
        self._usage: Any = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._extra: Any = None
        self._annotations: list[Any] = []
        self._audio: JSON = {}
        self._calls: dict[int, _CallState] = {}
        self._mode = "start"  # start | think | text: where content pieces go
        self._think = False  # the content opened with a <think> block
        self._text_seen = False
        self._buffer: str = ""

    def feed(self, chunk: JSON) -> list[StreamEvent]:
        """Absorb one chunk; return the deltas it carries."""
        events: list[StreamEvent] = []
        if isinstance(chunk.get("id"), str) and self._id is None:
            self._id = chunk["id"]
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        choices: list[Any] = chunk.get("choices") or []
        for raw_choice in choices:
            choice = opt_obj(raw_choice)
            if not choice or choice.get("index", 0) != 0:
                continue
            self._absorb(opt_obj(choice.get("delta")), events)
            if choice.get("finish_reason") is not None:
                if self._finish is None:
                    self._settle(events)
                self._finish = choice["finish_reason"]
        return events

    def _settle(self, events: list[StreamEvent]) -> None:
        """The stream is complete: send what the final message holds that no delta said."""
        if self._buffer:  # held back in case it became a tag; it did not
            if self._mode == "think":
                events.append(ReasoningDelta(0, self._buffer))
            else:
                self._mode = "text"
                self._text(self._buffer, events)
            self._buffer = ""
        for n, index in enumerate(sorted(self._calls)):
            state = self._calls[index]
            if not "".join(state.arguments).strip():  # decoded as {} (no arguments)
                events.append(ToolCallDelta(self._leading_parts() + n, arguments="{}"))

    def _absorb(self, delta: Mapping[str, Any], events: list[StreamEvent]) -> None:
        if delta.get("extra_content") is not None:
            self._extra = delta["extra_content"]
        annotations = delta.get("annotations")
        if isinstance(annotations, list):
            self._annotations.extend(annotations)  # pyright: ignore[reportUnknownArgumentType]
        audio = opt_obj(delta.get("audio"))
        for key, value in audio.items():  # pieces of data and transcript are joined
            previous = self._audio.get(key)
            self._audio[key] = (
                previous + value if isinstance(previous, str) and isinstance(value, str) else value
            )
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            if self._mode == "start" and not self._content:
                self._mode = "text"  # a reasoning field: content is plain text (as in decode_response)
            events.append(ReasoningDelta(0, reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._content.append(content)
            self._stream_content(content, events)
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._refusal.append(refusal)  # the text part after the answer text, if any
            reasoning_parts = 1 if self._reasoning or self._think else 0
            events.append(TextDelta(reasoning_parts + (1 if self._text_seen else 0), refusal))
        raw_calls: list[Any] = delta.get("tool_calls") or [
            {"index": 0, **call} for call in _legacy_call(delta)
        ]
        for raw in raw_calls:
            if not isinstance(raw, dict):
                continue
            self._absorb_call(raw, events)  # pyright: ignore[reportUnknownArgumentType]

    def _absorb_call(self, raw: JSON, events: list[StreamEvent]) -> None:
        index = raw.get("index", len(self._calls))
        state = self._calls.get(index)
        if state is None:
            state = self._calls[index] = _CallState()
        function = opt_obj(raw.get("function"))
        new_id = _str(raw.get("id")) or None
        new_name = _str(function.get("name"))
        arguments = _str(function.get("arguments")) or ""
        if new_id is not None:
            state.id = new_id
        if new_name:
            state.name += new_name
        if raw.get("extra_content") is not None:
            state.extra = raw["extra_content"]
        state.arguments.append(arguments)
        part_index = self._leading_parts() + sorted(self._calls).index(index)
        events.append(ToolCallDelta(part_index, new_id, new_name or None, arguments))

    def _leading_parts(self) -> int:
        reasoning = 1 if self._reasoning or self._think else 0
        return reasoning + (1 if self._text_seen else 0) + (1 if self._refusal else 0)

    def _text(self, text: str, events: list[StreamEvent]) -> None:
        if text:
            self._text_seen = True
            events.append(TextDelta(1 if self._reasoning or self._think else 0, text))

    def _stream_content(self, piece: str, events: list[StreamEvent]) -> None:
        if self._mode == "text":
            self._text(piece, events)
            return
        buffer = self._buffer + piece
        if self._mode == "start":
            if buffer.startswith(_THINK_OPEN):
                self._mode, self._think = "think", True
                buffer = buffer[len(_THINK_OPEN) :]
            elif _THINK_OPEN.startswith(buffer):
                self._buffer = buffer  # could still become "<think>"
                return
            else:
                self._mode, self._buffer = "text", ""
                self._text(buffer, events)
                return
        end = buffer.find(_THINK_CLOSE)
        if end >= 0:
            if end:
                events.append(ReasoningDelta(0, buffer[:end]))
            self._mode, self._buffer = "text", ""
            self._text(buffer[end + len(_THINK_CLOSE) :], events)
            return
        keep = len(_THINK_CLOSE) - 1  # a closing tag may be split across chunks
        emit, self._buffer = buffer[:-keep], buffer[-keep:]
        if emit:
            events.append(ReasoningDelta(0, emit))

    @property
    def finished(self) -> bool:
        """Whether a finish reason arrived (a stream cut short has none)."""
        return self._finish is not None

    def body(self) -> JSON:
        """The non-streamed ``chat.completion`` body equivalent to the chunks fed so far."""
        message: JSON = {"role": "assistant", "content": "".join(self._content) if self._content else None}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._extra is not None:
            message["extra_content"] = self._extra
        if self._annotations:
            message["annotations"] = self._annotations
        if self._audio:
            message["audio"] = self._audio
        if self._calls:
            calls: list[JSON] = []
            for index in sorted(self._calls):
                state = self._calls[index]
                call: JSON = {
                    "id": state.id or "",
                    "type": "function",
                    "function": {"name": state.name, "arguments": "".join(state.arguments)},
                }
                if state.extra is not None:
                    call["extra_content"] = state.extra
                calls.append(call)
            message["tool_calls"] = calls
        choice: JSON = {"index": 0, "finish_reason": self._finish, "message": message}
        return {"id": self._id, "model": self._model, "choices": [choice], "usage": self._usage}

    def result(self, *, report: ConversionReport | None = None) -> ModelResponse:
        """The response the equivalent non-streamed call would have produced (and its losses)."""
        return decode_response(self.body(), provider=self.provider, report=report)
