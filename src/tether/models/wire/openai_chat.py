"""OpenAI Chat Completions wire mapping (also every OpenAI-compatible server: Ollama, vLLM,
llama.cpp's server, Groq). Pure functions over JSON-shaped dicts; no SDK import.

- :func:`encode_messages` — tether messages → the request's ``messages`` list. With a ``cache``
  (a driver's own :class:`~tether.models.wire._memo.PerMessageCache`) conversion is memoized per
  message, so building the request at each step of a run converts only new messages; those dicts
  are shared with the cache: read-only. Without one every call returns fresh dicts.
- :func:`decode_messages` — a Chat Completions ``messages`` list (a transcript) → tether messages.
- :func:`decode_response` — a ``chat.completion`` body → :class:`~tether.models.ModelResponse`.
- :class:`StreamAccumulator` — ``chat.completion.chunk`` dicts → deltas, then exactly the response
  :func:`decode_response` gives for the equivalent non-streamed body.

Rules shared by every wire are in docs/adr/0005-wire-mapping.md.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

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
)
from tether.models._base import Profile, StreamEvent
from tether.models.wire._common import (
    SYNTHESIZED_RESULT,
    TRUNCATED_ARGUMENTS,
    ConversionReport,
    LossRecord,
    fallback_id,
    replays_reasoning,
    wire_arguments,
)
from tether.models.wire._json import fail, obj, seq, string
from tether.models.wire._memo import PerMessageCache
from tether.models.wire._openai_chat_response import (
    JSON,
    StreamAccumulator,
    decode_call,
    decode_response,
    decode_usage,
    normalize_stop_reason,
)

__all__ = [
    "StreamAccumulator",
    "decode_messages",
    "decode_response",
    "decode_usage",
    "encode_messages",
    "iter_events",
    "normalize_stop_reason",
]

_Encoded = tuple[tuple[JSON, ...], tuple[LossRecord, ...]]

_TEXT_DOCUMENT_TYPES: Final = (
    "application/json",
    "application/yaml",
    "application/x-yaml",
    "application/xml",
)

# Servers whose request schema rejects ``"content": null`` next to tool calls (llama-cpp-python's
# server validates content as a string; OpenAI's own null is the default elsewhere).
_STRING_CONTENT_ONLY: Final = frozenset({"llama-cpp"})


# -- encoding ------------------------------------------------------------------------------------
def encode_messages(
    messages: Sequence[Message],
    *,
    profile: Profile | None = None,
    cache: PerMessageCache[_Encoded] | None = None,
) -> tuple[list[JSON], ConversionReport]:
    """Tether messages → Chat Completions request ``messages``, plus what could not be carried.

    ``system`` messages become ``{"role": "system"}`` entries in place; a driver sends its
    ``instructions`` as one leading system message (they are not part of the history). A tool
    message becomes one ``{"role": "tool"}`` entry per result. ``profile`` (a
    :class:`~tether.models.Profile`) decides reasoning replay; with ``None`` reasoning is dropped.
    Content the wire cannot hold is dropped and reported; drivers reject it earlier with
    ``check_content``. ``cache`` (with a ``profile``) memoizes each message's encoding: the
    returned dicts are then shared with it and read-only.
    """
    if profile is None or cache is None:
        encoded = [_encode_message(message, profile) for message in messages]
    else:
        encoded = cache.encode(messages, profile, _encode_message)
    out: list[JSON] = []
    report = ConversionReport()
    for index, (items, losses) in enumerate(encoded):
        out.extend(items)
        if losses:
            report.extend(index, losses)
    return out, report


def _encode_message(message: Message, profile: Profile | None) -> _Encoded:
    losses: list[LossRecord] = []
    role = message.role
    if role == "tool":
        return tuple(_encode_result(pi, r, losses) for pi, r in enumerate(message.tool_results)), tuple(
            losses
        )
    if role == "assistant":
        return (_encode_assistant(message, profile, losses),), tuple(losses)
    content: list[JSON] = []
    for pi, part in enumerate(message.parts):
        item = _encode_content_part(pi, part, losses)
        if item is not None:
            content.append(item)
    entry: JSON = {"role": role, "content": _collapse(content)}
    return (entry,), tuple(losses)


def _collapse(content: list[JSON]) -> str | list[JSON]:
    """A single plain text part is sent as a string (the shape every server accepts)."""
    if len(content) == 1 and content[0]["type"] == "text":
        text: str = content[0]["text"]
        return text
    return content


def _data_uri(media_type: str | None, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def _encode_content_part(pi: int, part: Part | ResultPart, losses: list[LossRecord]) -> JSON | None:
    if type(part) is Text:
        if part.signature is not None:
            losses.append((pi, "dropped", "text signature", "OpenAI Chat has no field for signatures"))
        return {"type": "text", "text": part.text}
    if type(part) is Image:
        if part.url is None:
            return {"type": "image_url", "image_url": {"url": _data_uri(part.media_type, part.data or b"")}}
        if part.media_type is not None:
            losses.append((pi, "dropped", "image media type", "an image URL carries no media type"))
        return {"type": "image_url", "image_url": {"url": part.url}}
    if type(part) is Document:
        if part.data is None:
            losses.append((pi, "dropped", "document URL", "OpenAI Chat takes documents only inline"))
            return None
        media_type = part.media_type or ""
        if media_type == "application/pdf":
            filename = part.title
            if filename is None:
                filename = "document.pdf"
                losses.append(
                    (pi, "approximated", "document title", "files need a name: sent as document.pdf")
                )
            return {
                "type": "file",
                "file": {"filename": filename, "file_data": _data_uri(media_type, part.data)},
            }
        if media_type.startswith("text/") or media_type in _TEXT_DOCUMENT_TYPES:
            losses.append(
                (pi, "approximated", "text document", "sent as a text part (OpenAI Chat files are PDF)")
            )
            title = f' title="{part.title}"' if part.title else ""
            body = part.data.decode("utf-8", errors="replace")
            return {"type": "text", "text": f'<document type="{media_type}"{title}>\n{body}\n</document>'}
        losses.append((pi, "dropped", f"document ({media_type})", "OpenAI Chat takes PDF files only"))
        return None
    losses.append((pi, "dropped", type(part).__name__, "not valid in this message role on OpenAI Chat"))
    return None


def _encode_assistant(message: Message, profile: Profile | None, losses: list[LossRecord]) -> JSON:
    texts: list[str] = []
    calls: list[JSON] = []
    reasoning: list[str] = []
    for pi, part in enumerate(message.parts):
        if type(part) is Text:
            if part.signature is not None:
                losses.append((pi, "dropped", "text signature", "OpenAI Chat has no field for signatures"))
            texts.append(part.text)
        elif type(part) is ToolCall:
            calls.append(_encode_call(pi, part, losses))
        elif type(part) is Reasoning:
            if profile is not None and replays_reasoning(part, message, profile) and part.text:
                reasoning.append(part.text)
            else:
                losses.append(
                    (pi, "dropped", "reasoning", "OpenAI Chat does not replay reasoning (ADR 0005)")
                )
        else:
            losses.append((pi, "dropped", type(part).__name__, "OpenAI Chat assistant content is text only"))
    content: str | list[JSON] | None
    if len(texts) > 1:
        content = [{"type": "text", "text": t} for t in texts]
    elif texts:
        content = texts[0]
    elif calls and (profile is None or profile.provider not in _STRING_CONTENT_ONLY):
        content = None
    else:
        content = ""
    entry: JSON = {"role": "assistant", "content": content}
    if reasoning:
        entry["reasoning_content"] = "".join(reasoning)
    if calls:
        entry["tool_calls"] = calls
    return entry


def _encode_call(pi: int, call: ToolCall, losses: list[LossRecord]) -> JSON:
    call_id = call.id
    if not call_id:
        call_id = fallback_id(pi, call.name, call.arguments)
        losses.append((pi, "approximated", "tool call id", f"missing id sent as {call_id}"))
    arguments = wire_arguments(call)
    if arguments is not call.arguments:
        losses.append((pi, "approximated", "tool call arguments", TRUNCATED_ARGUMENTS))
    if call.signature is not None:
        losses.append((pi, "dropped", "tool call signature", "OpenAI Chat has no field for signatures"))
    if call.provider_id is not None:
        losses.append((pi, "dropped", "tool call provider id", "OpenAI Chat has no item ids"))
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def _encode_result(pi: int, result: ToolResult, losses: list[LossRecord]) -> JSON:
    texts: list[str] = []
    for item in result.content:
        if type(item) is Text:
            texts.append(item.text)
        else:
            losses.append(
                (
                    pi,
                    "dropped",
                    f"{type(item).__name__.lower()} in tool result",
                    "tool messages are text only",
                )
            )
    if result.failed:
        losses.append((pi, "approximated", "failed flag", "OpenAI Chat tool messages carry no error flag"))
    if result.synthesized:
        losses.append((pi, "approximated", "synthesized flag", SYNTHESIZED_RESULT))
    content: str | list[JSON] = (
        texts[0] if len(texts) == 1 else "" if not texts else [{"type": "text", "text": t} for t in texts]
    )
    return {"role": "tool", "tool_call_id": result.call_id, "content": content}


# -- decoding a transcript -----------------------------------------------------------------------
def _parse_data_uri(uri: str, path: str) -> tuple[str, bytes]:
    head, sep, payload = uri.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise fail("expected a base64 data: URI", path)
    try:
        return head[5:-7], base64.b64decode(payload, validate=True)
    except binascii.Error as exc:
        raise fail(f"invalid base64 ({exc})", path) from None


def _decode_part(raw: object, path: str, mi: int, pi: int, report: ConversionReport) -> Part | None:
    item = obj(raw, path)
    kind = item.get("type")
    if kind == "text":
        return Text(string(item, "text", path))
    if kind == "image_url":
        spec = obj(item.get("image_url"), f"{path}.image_url")
        url = string(spec, "url", f"{path}.image_url")
        if spec.get("detail") not in (None, "auto"):
            report.drop(mi, pi, "image detail", "tether images carry no detail level")
        if url.startswith("data:"):
            media_type, data = _parse_data_uri(url, f"{path}.image_url.url")
            return Image(data=data, media_type=media_type)
        return Image(url=url)
    if kind == "file":
        spec = obj(item.get("file"), f"{path}.file")
        if "file_data" not in spec:
            report.drop(mi, pi, "file reference", "an uploaded file id has no tether equivalent")
            return None
        data_uri = string(spec, "file_data", f"{path}.file")
        media_type, data = _parse_data_uri(data_uri, f"{path}.file.file_data")
        title = spec.get("filename")
        return Document(data=data, media_type=media_type, title=title if isinstance(title, str) else None)
    if kind == "refusal":
        report.approximate(mi, pi, "refusal", "imported as text")
        return Text(string(item, "refusal", path))
    if isinstance(kind, str):
        report.drop(mi, pi, f"{kind} content", "no tether equivalent")
        return None
    raise fail("content part without a type", f"{path}.type")


def _decode_content(
    value: object, path: str, mi: int, report: ConversionReport, *, assistant: bool
) -> list[Part]:
    if value is None:
        return []
    if isinstance(value, str):
        return [] if assistant and not value else [Text(value)]
    items = seq(value, path)
    parts: list[Part] = []
    for pi, raw in enumerate(items):
        part = _decode_part(raw, f"{path}[{pi}]", mi, pi, report)
        if part is not None:
            parts.append(part)
    return parts


_KNOWN_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "reasoning_content", "reasoning"}
)


def _reasoning_field(entry: Mapping[str, Any], mi: int, report: ConversionReport) -> str | None:
    """The reasoning text of an assistant entry: ``reasoning_content`` (vLLM, DeepSeek, llama.cpp)
    or ``reasoning`` (Ollama, Groq, OpenRouter, newer vLLM). A second, different text or a value
    that is not text is reported, never dropped silently."""
    found: str | None = None
    for key in ("reasoning_content", "reasoning"):
        value = entry.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            report.drop(mi, None, f"{key} field", f"{type(value).__name__} reasoning has no tether form")
        elif found is None:
            found = value
        elif value != found:
            report.drop(mi, None, f"{key} field", "a second, different reasoning text; the first one is kept")
    return found


def decode_messages(items: object, *, path: str = "$") -> tuple[list[Message], ConversionReport]:
    """A Chat Completions ``messages`` list → tether messages, plus what could not be carried.

    ``developer`` entries become system messages; consecutive ``tool`` entries become one tether
    tool message (the names come from the matching calls). Report indices are source positions:
    ``message`` is the index in ``items`` and ``part`` the index in that entry's ``content`` list
    (``None`` for a field of the entry, named in ``what``). Malformed input raises
    :class:`~tether.DecodeError` whose ``path`` points at the element
    (``$[3].tool_calls[0].function``), starting at ``path`` (where ``items`` sits in a larger
    document, e.g. ``$.messages``).
    """
    root = path
    entries = seq(items, root)
    out: list[Message] = []
    report = ConversionReport()
    names: dict[str, str] = {}
    previous_role: object = None
    for mi, raw in enumerate(entries):
        path = f"{root}[{mi}]"
        entry = obj(raw, path)
        role = entry.get("role")
        if role in ("system", "developer", "user", "tool") and "content" not in entry:
            raise fail(f"a {role} message needs 'content'", f"{path}.content")
        for key, value in entry.items():
            if key not in _KNOWN_KEYS and value is not None:
                report.drop(mi, None, f"field {key!r}", "not part of a Chat Completions message")
        if role == "tool":
            merge = bool(out) and out[-1].role == "tool" and previous_role == "tool"
            call_id = string(entry, "tool_call_id", path)
            content = _decode_content(entry.get("content"), f"{path}.content", mi, report, assistant=False)
            if call_id not in names:
                report.approximate(mi, None, "tool name", f"no earlier call has id {call_id!r}")
            if len(content) == 1 and content[0] == Text(""):
                content = []  # an empty string is how an empty result travels
            results: tuple[ResultPart, ...] = tuple(
                p for p in content if isinstance(p, Text | Image | Document)
            )
            result = ToolResult(call_id, names.get(call_id, ""), results)
            if merge:
                out[-1] = Message("tool", (*out[-1].parts, result))
            else:
                out.append(Message("tool", (result,)))
        elif role in ("system", "developer", "user"):
            if role == "developer":
                report.approximate(mi, None, "developer role", "imported as a system message")
            parts = _decode_content(entry.get("content"), f"{path}.content", mi, report, assistant=False)
            if role != "user" and any(type(p) is not Text for p in parts):
                raise fail("system content must be text", f"{path}.content")
            out.append(Message("user" if role == "user" else "system", tuple(parts)))
        elif role == "assistant":
            parts = _decode_content(entry.get("content"), f"{path}.content", mi, report, assistant=True)
            reasoning = _reasoning_field(entry, mi, report)
            if reasoning is not None:
                parts.insert(0, Reasoning(reasoning))
            refusal = entry.get("refusal")
            if isinstance(refusal, str) and refusal:
                report.approximate(mi, None, "refusal", "imported as text")
                parts.append(Text(refusal))
            calls = entry.get("tool_calls")
            for ci, raw_call in enumerate(seq(calls, f"{path}.tool_calls") if calls is not None else []):
                call = decode_call(raw_call, f"{path}.tool_calls[{ci}]")
                if call.id is None:
                    report.approximate(mi, None, "tool call id", f"tool_calls[{ci}] has none")
                else:
                    names[call.id] = call.name
                parts.append(call)
            out.append(Message("assistant", tuple(parts)))
        else:
            raise fail(f"unknown role {role!r}", f"{path}.role")
        if entry.get("name") is not None:
            report.drop(mi, None, "participant name", "tether messages carry no name")
        previous_role = role
    return out, report


def iter_events(chunks: Iterable[JSON], *, provider: str = "openai") -> list[StreamEvent]:
    """All deltas of a recorded chunk sequence followed by the final response (for tests and replays)."""
    accumulator = StreamAccumulator(provider=provider)
    events: list[StreamEvent] = []
    for chunk in chunks:
        events.extend(accumulator.feed(chunk))
    events.append(accumulator.result())
    return events
