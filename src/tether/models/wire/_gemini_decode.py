"""Gemini decoding: ``contents`` transcripts and ``generateContent`` response bodies to tether
messages, and the streaming accumulator. The mapping is described in
:mod:`tether.models.wire.gemini` (the public module, which re-exports these names)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, cast

import msgspec

from tether.messages import Document, Image, Message, Part, Reasoning, Text, ToolCall, ToolResult, Usage
from tether.models._base import ModelResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from tether.models.wire._common import ConversionReport
from tether.models.wire._json import b64decode, fail, obj, seq, token_count

__all__ = [
    "PROVIDER",
    "StreamAccumulator",
    "decode_messages",
    "decode_response",
    "decode_usage",
    "normalize_stop_reason",
]

JSON = dict[str, Any]
PROVIDER: Final = "google"
"""The provider stamped on messages and reasoning decoded from the Gemini API."""

_STOP_REASONS: Final = MappingProxyType(
    {
        "STOP": "stop",
        "MAX_TOKENS": "length",
        "SAFETY": "content_filter",
        "RECITATION": "content_filter",
        "BLOCKLIST": "content_filter",
        "PROHIBITED_CONTENT": "content_filter",
        "SPII": "content_filter",
        "IMAGE_SAFETY": "content_filter",
    }
)
_URLSAFE: Final[Mapping[int, int]] = MappingProxyType({ord("-"): ord("+"), ord("_"): ord("/")})


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _str(obj: Mapping[str, Any], camel: str, snake: str, path: str) -> str:
    value = _get(obj, camel, snake)
    if not isinstance(value, str):
        raise fail(f"expected a string {camel!r}, got {type(value).__name__}", f"{path}.{camel}")
    return value


def _signature(part: Mapping[str, Any], path: str) -> str | None:
    value = _get(part, "thoughtSignature", "thought_signature")
    if value is not None and not isinstance(value, str):
        raise fail("thoughtSignature must be a base64 string", f"{path}.thoughtSignature")
    return value


def _media(raw: Mapping[str, Any], path: str, *, inline: bool) -> Image | Document:
    mime = _get(raw, "mimeType", "mime_type")
    if mime is not None and not isinstance(mime, str):
        raise fail("mimeType must be a string", f"{path}.mimeType")
    image = isinstance(mime, str) and mime.startswith("image/")
    if not inline:
        url = _str(raw, "fileUri", "file_uri", path)
        return Image(url=url, media_type=mime) if image else Document(url=url, media_type=mime)
    if mime is None:
        raise fail("inline data needs a mimeType", f"{path}.mimeType")
    text = _str(raw, "data", "data", path).translate(_URLSAFE)  # the SDK sends URL-safe base64
    data = b64decode(text, f"{path}.data")
    return Image(data=data, media_type=mime) if image else Document(data=data, media_type=mime)


def _call(raw: Mapping[str, Any], path: str, signature: str | None, fallback_id: str) -> ToolCall:
    name = _str(raw, "name", "name", path)
    args = raw.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise fail("functionCall args must be an object", f"{path}.args")
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise fail("functionCall id must be a string", f"{path}.id")
    return ToolCall(call_id or fallback_id, name, msgspec.json.encode(args).decode(), signature=signature)


def _response_text(response: object) -> tuple[str, bool]:
    """(text, failed) of a ``functionResponse.response`` object (the inverse of encoding)."""
    if isinstance(response, Mapping):
        obj = cast(Mapping[str, Any], response)
        if len(obj) == 1:
            key, value = next(iter(obj.items()))
            if key in ("output", "error") and isinstance(value, str):
                return value, key == "error"
            if key == "error":
                return msgspec.json.encode(value).decode(), True
    return msgspec.json.encode(response).decode(), False


def _carries_part(raw: Mapping[str, Any]) -> bool:
    """Whether a response part becomes a tether part (:func:`_decode_part` returns one): what the
    stream accumulator counts so delta indexes are part indexes of the final message. Server-side
    parts (code execution, file search results…) and the empty unsigned closing text do not."""
    signature = _get(raw, "thoughtSignature", "thought_signature")
    if "text" in raw:
        return raw.get("thought") is True or raw.get("text") != "" or signature is not None
    if any(_get(raw, camel, snake) is not None for camel, snake in _MEDIA_AND_CALLS):
        return True
    return signature is not None and len(raw) == 1


_MEDIA_AND_CALLS: Final = (
    ("functionCall", "function_call"),
    ("inlineData", "inline_data"),
    ("fileData", "file_data"),
)


def _decode_part(
    raw: Mapping[str, Any], path: str, role: str, fallback_id: str, mi: int, pi: int, report: ConversionReport
) -> Part | None:
    signature = _signature(raw, path)
    if "text" in raw:
        text = _str(raw, "text", "text", path)
        if raw.get("thought") is True:
            return Reasoning(text, signature=signature, provider=PROVIDER)
        if not text and signature is None and role == "model":
            return None  # an empty closing part carries nothing (reported by decode_messages)
        return Text(text, signature=signature)
    call = _get(raw, "functionCall", "function_call")
    if call is not None:
        return _call(obj(call, f"{path}.functionCall"), f"{path}.functionCall", signature, fallback_id)
    inline = _get(raw, "inlineData", "inline_data")
    if inline is not None:
        return _media(obj(inline, f"{path}.inlineData"), f"{path}.inlineData", inline=True)
    file = _get(raw, "fileData", "file_data")
    if file is not None:
        if _get(raw, "videoMetadata", "video_metadata") is not None:
            report.drop(mi, pi, "videoMetadata", "no tether equivalent")
        return _media(obj(file, f"{path}.fileData"), f"{path}.fileData", inline=False)
    if signature is not None and len(raw) == 1:
        return Text("", signature=signature)
    kinds = ", ".join(sorted(k for k in raw if k not in ("thoughtSignature", "thought_signature")))
    report.drop(mi, pi, f"{kinds or 'empty'} part", "no tether equivalent")
    return None


def decode_messages(items: object, *, path: str = "$") -> tuple[list[Message], ConversionReport]:
    """A Gemini ``contents`` list (a transcript) → tether messages.

    ``functionResponse`` parts become a tool message ahead of the turn's other parts. Calls
    without ids get ``gemini-call-<content>-<part>``; responses without ids pair with the earliest
    unanswered call of the same name. Malformed input raises :class:`~tether.DecodeError` with a
    JSON path such as ``$[3].parts[0].functionCall.name``, starting at ``path`` (where ``items``
    sits in a larger document, e.g. ``$.contents``).
    """
    report = ConversionReport()
    out: list[Message] = []
    pending: list[ToolCall] = []
    root = path
    for mi, raw in enumerate(seq(items, root)):
        path = f"{root}[{mi}]"
        entry = obj(raw, path)
        role = entry.get("role", "user")
        if role not in ("user", "model", "function"):
            raise fail(f"unknown role {role!r}", f"{path}.role")
        parts: list[Part] = []
        results: list[ToolResult] = []
        for pi, part in enumerate(seq(entry.get("parts", []), f"{path}.parts")):
            ppath = f"{path}.parts[{pi}]"
            part = obj(part, ppath)
            response = _get(part, "functionResponse", "function_response")
            if response is not None and role != "model":
                results.append(_decode_result(obj(response, f"{ppath}.functionResponse"), ppath, pending))
                continue
            decoded = _decode_part(part, ppath, role, f"gemini-call-{mi}-{pi}", mi, pi, report)
            if decoded is None:
                if "text" in part:  # the empty, unsigned text Gemini sometimes answers with
                    report.drop(mi, pi, "empty text", "an empty model text carries nothing")
                continue
            if role != "model" and type(decoded) not in (Text, Image, Document):
                report.drop(mi, pi, "part", f"a {type(decoded).__name__} cannot be in a user turn")
                continue
            if type(decoded) is ToolCall:
                pending.append(decoded)
            parts.append(decoded)
        if results:
            out.append(Message("tool", tuple(results)))
        if parts or not results:
            out.append(Message("assistant" if role == "model" else "user", tuple(parts)))
    return out, report


def _decode_result(raw: Mapping[str, Any], path: str, pending: list[ToolCall]) -> ToolResult:
    rpath = f"{path}.functionResponse"
    name = _str(raw, "name", "name", rpath)
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise fail("functionResponse id must be a string", f"{rpath}.id")
    match = next((c for c in pending if (c.id == call_id if call_id else c.name == name)), None)
    if match is not None:
        pending.remove(match)
        call_id = call_id or match.id
    if not call_id:
        raise fail(f"functionResponse {name!r} has no id and no unanswered call to pair with", rpath)
    text, failed = _response_text(raw.get("response", {}))
    return ToolResult(call_id, name, (Text(text),), failed=failed)


def normalize_stop_reason(finish_reason: object, *, has_tool_calls: bool) -> str:
    """Gemini ``finishReason`` → ``stop`` | ``tool_calls`` | ``length`` | ``content_filter``, or the
    provider value (``MALFORMED_FUNCTION_CALL``…) passed through."""
    if has_tool_calls and finish_reason in (None, "STOP"):
        return "tool_calls"
    if not isinstance(finish_reason, str):
        return "stop"
    return _STOP_REASONS.get(finish_reason, finish_reason)


def decode_usage(raw: object) -> Usage:
    """Gemini ``usageMetadata`` → :class:`~tether.Usage`. Output counts thoughts too (as OpenAI
    counts reasoning tokens); ``reasoning_tokens`` is the thought share."""
    if not isinstance(raw, Mapping):
        return Usage()
    usage = cast(Mapping[str, Any], raw)

    def count(camel: str, snake: str) -> int:
        return token_count(_get(usage, camel, snake))

    thoughts = count("thoughtsTokenCount", "thoughts_token_count")
    return Usage(
        input_tokens=token_count(
            count("promptTokenCount", "prompt_token_count")
            + count("toolUsePromptTokenCount", "tool_use_prompt_token_count")
        ),
        output_tokens=token_count(count("candidatesTokenCount", "candidates_token_count") + thoughts),
        cache_read_tokens=count("cachedContentTokenCount", "cached_content_token_count"),
        reasoning_tokens=thoughts,
    )


_TRANSPORT_KEYS: Final = frozenset({"sdkHttpResponse", "sdk_http_response"})
"""What the SDK adds to a dumped response about the HTTP exchange (headers such as ``date``):
not part of the body, so never part of a call id."""


def _response_key(body: Mapping[str, Any]) -> str:
    """``responseId``, or a hash of the response body (transport metadata left out) when the
    API gave none: the same body always gives the same key."""
    response_id = _get(body, "responseId", "response_id")
    if isinstance(response_id, str) and response_id:
        return response_id
    content = {k: v for k, v in body.items() if k not in _TRANSPORT_KEYS}
    return hashlib.sha256(msgspec.json.encode(content, order="sorted")).hexdigest()[:16]


_CANDIDATE_EXTRAS: Final = (
    ("groundingMetadata", "grounding_metadata"),
    ("citationMetadata", "citation_metadata"),
    ("urlContextMetadata", "url_context_metadata"),
    ("finishMessage", "finish_message"),
)
"""Candidate fields tether messages have no place for: reported as dropped when present
(``finishMessage`` only when the finish reason is not ``STOP``)."""


def decode_response(body: Mapping[str, Any], *, report: ConversionReport | None = None) -> ModelResponse:
    """A ``generateContent`` response body → :class:`~tether.models.ModelResponse` (first candidate).

    Calls without ids get ``gemini-<responseId>-<part>``: the same body always gives the same ids.
    A prompt blocked before any candidate gives an empty message with stop reason
    ``content_filter``. Server-side parts (``executableCode``, ``codeExecutionResult``…) and the
    candidate's ``groundingMetadata``, ``citationMetadata``, ``urlContextMetadata`` and
    ``finishMessage`` (explaining a stop other than ``STOP``) are left out and, given a ``report``,
    listed there (message 0, part = part index; ``None`` for a candidate field).
    """
    body = obj(body, "$")
    candidates = seq(body.get("candidates") or [], "$.candidates")
    parts: list[Part] = []
    finish: object = None
    report = ConversionReport() if report is None else report
    if candidates:
        candidate = obj(candidates[0], "$.candidates[0]")
        finish = _get(candidate, "finishReason", "finish_reason")
        for camel, snake in _CANDIDATE_EXTRAS:
            if camel == "finishMessage" and finish in (None, "STOP"):
                continue  # on a normal stop it only restates it ("Model generated function call(s).")
            if _get(candidate, camel, snake) not in (None, [], {}, ""):
                report.drop(0, None, camel, "a candidate field with no tether equivalent")
        content = obj(candidate.get("content") or {}, "$.candidates[0].content")
        key = _response_key(body)
        for pi, raw in enumerate(seq(content.get("parts") or [], "$.candidates[0].content.parts")):
            path = f"$.candidates[0].content.parts[{pi}]"
            part = _decode_part(obj(raw, path), path, "model", f"gemini-{key}-{pi}", 0, pi, report)
            if part is not None:
                parts.append(part)
    else:
        feedback = _get(body, "promptFeedback", "prompt_feedback")
        if isinstance(feedback, Mapping) and _get(
            cast(Mapping[str, Any], feedback), "blockReason", "block_reason"
        ):
            finish = "SAFETY"
    has_calls = any(type(p) is ToolCall for p in parts)
    stop_reason = normalize_stop_reason(finish, has_tool_calls=has_calls)
    usage = decode_usage(_get(body, "usageMetadata", "usage_metadata"))
    model = _get(body, "modelVersion", "model_version")
    response_id = _get(body, "responseId", "response_id")
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
class StreamAccumulator:
    """Feeds ``streamGenerateContent`` chunks (each a response body) as dicts. Text pieces of the
    same kind (answer or thought) are joined into one part; a signature that arrives on a later
    piece attaches to the part it belongs to. :meth:`body` is the equivalent non-streamed body and
    :meth:`result` its :func:`decode_response`. Delta indexes are final part indexes."""

    def __init__(self) -> None:
        self._parts: list[JSON] = []
        self._meta: JSON = {}
        self._finish: object = None
        self._extras: JSON = {}

    @property
    def finished(self) -> bool:
        """True once a chunk carried a ``finishReason`` (or the prompt was blocked)."""
        return self._finish is not None or "promptFeedback" in self._meta

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """Absorb one chunk; return the deltas it carries."""
        chunk = obj(chunk, "$")
        for key in ("responseId", "modelVersion", "usageMetadata", "promptFeedback"):
            value = chunk.get(key)
            if value is not None:
                self._meta[key] = value
        events: list[StreamEvent] = []
        candidates = seq(chunk.get("candidates") or [], "$.candidates")
        if not candidates:
            return events
        candidate = obj(candidates[0], "$.candidates[0]")
        finish = candidate.get("finishReason")
        if finish is not None:
            self._finish = finish
        for camel, _ in _CANDIDATE_EXTRAS:
            if candidate.get(camel) not in (None, [], {}, ""):  # chunks may repeat it empty
                self._extras[camel] = candidate[camel]
        content = obj(candidate.get("content") or {}, "$.candidates[0].content")
        for pi, raw in enumerate(seq(content.get("parts") or [], "$.candidates[0].content.parts")):
            self._absorb(obj(raw, f"$.candidates[0].content.parts[{pi}]"), events)
        return events

    def _index_of_last(self) -> int:
        """The final part index of the last assembled part: the parts before it that become tether
        parts (server-side parts such as code execution, and empty unsigned texts, do not)."""
        return sum(1 for p in self._parts[:-1] if _carries_part(p))

    def _absorb(self, raw: Mapping[str, Any], events: list[StreamEvent]) -> None:
        text = raw.get("text")
        signature = raw.get("thoughtSignature")
        last = self._parts[-1] if self._parts else None
        if isinstance(text, str) and set(raw) <= {"text", "thought", "thoughtSignature"}:
            thought = raw.get("thought") is True
            joinable = (
                last is not None
                and "text" in last
                and (last.get("thought") is True) == thought
                and not (signature is not None and "thoughtSignature" in last)
            )
            if joinable and last is not None:
                last["text"] = last["text"] + text
                if signature is not None:
                    last["thoughtSignature"] = signature
            else:
                self._parts.append(dict(raw))
            index = self._index_of_last()
            if text:
                events.append(ReasoningDelta(index, text) if thought else TextDelta(index, text))
            return
        self._parts.append(dict(raw))
        index = self._index_of_last()
        call = raw.get("functionCall")
        if isinstance(call, Mapping):
            call = cast(Mapping[str, Any], call)
            arguments = msgspec.json.encode(call.get("args") or {}).decode()
            events.append(ToolCallDelta(index, id=call.get("id"), name=call.get("name"), arguments=arguments))

    def body(self) -> JSON:
        """The non-streamed response body equivalent to the chunks fed so far. A prompt blocked
        before any candidate gives a body without candidates, as the non-streamed call does."""
        if not self._parts and self._finish is None:
            return {"candidates": [], **self._meta}
        candidate: JSON = {"content": {"role": "model", "parts": self._parts}, "index": 0, **self._extras}
        if self._finish is not None:
            candidate["finishReason"] = self._finish
        return {"candidates": [candidate], **self._meta}

    def result(self, *, report: ConversionReport | None = None) -> ModelResponse:
        """The response the equivalent non-streamed call would have produced (and its losses)."""
        return decode_response(self.body(), report=report)
