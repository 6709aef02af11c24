"""pydantic-ai's stored message format (``ModelMessagesTypeAdapter`` JSON) to and from tether.

Works on the JSON shape only (no pydantic-ai import). A ``request`` holds system prompts, user
prompts and tool returns, so one request becomes several tether messages (consecutive tool
returns share one tool message); consecutive non-assistant tether messages with the same run and
conversation stamps share one request. A ``response`` is one assistant message.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, cast

import msgspec

from tether.convert._input import load_json
from tether.messages import Document, Image, Message, Part, Reasoning, Role, Text, ToolCall, ToolResult, Usage
from tether.models.wire import (
    ConversionReport,
    b64decode_either,
    fail,
    given,
    obj,
    opt_obj,
    opt_str,
    seq,
    string,
    token_count,
)

__all__ = ["from_pydantic_ai", "to_pydantic_ai"]

JSON = dict[str, Any]

_FINISH_TO_PAI = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "tool_call",
    "error": "error",
}
_FINISH_FROM_PAI = {v: k for k, v in _FINISH_TO_PAI.items()}


# -- export -------------------------------------------------------------------------------------


def to_pydantic_ai(messages: Sequence[Message]) -> tuple[list[JSON], ConversionReport]:
    """Messages → a list that ``ModelMessagesTypeAdapter.validate_python`` (or, as JSON text,
    ``validate_json``) loads."""
    report = ConversionReport()
    out: list[JSON] = []
    request: JSON | None = None
    for mi, message in enumerate(messages):
        if message.role == "assistant":
            request = None
            out.append(_response(message, mi, report))
            continue
        if message.role == "tool" and not message.parts:
            report.drop(mi, None, "empty tool message", "a pydantic-ai request needs a part")
            continue
        stamps = (message.run_id, message.conversation_id)
        if request is None or (request.get("run_id"), request.get("conversation_id")) != stamps:
            request = {"kind": "request", "parts": []}
            if message.run_id is not None:
                request["run_id"] = message.run_id
            if message.conversation_id is not None:
                request["conversation_id"] = message.conversation_id
            out.append(request)
        request["parts"].extend(_request_parts(message, mi, report))
    return out, report


def _request_parts(message: Message, mi: int, report: ConversionReport) -> list[JSON]:
    if message.role == "system":
        return [{"part_kind": "system-prompt", "content": _plain(message.parts, mi, report)}]
    if message.role == "user":
        return [{"part_kind": "user-prompt", "content": _user_content(message.parts, mi, report)}]
    parts: list[JSON] = []
    for pi, result in enumerate(message.tool_results):
        content: Any = _user_content(result.content, mi, report, pi) if result.content else []
        part: JSON = {
            "part_kind": "tool-return",
            "tool_name": result.name,
            "tool_call_id": result.call_id,
            "content": content,
            "outcome": "failed" if result.failed else "success",
        }
        if result.synthesized:
            part["metadata"] = {"tether_synthesized": True}
        parts.append(part)
    return parts


def _plain(parts: Sequence[Part], mi: int, report: ConversionReport) -> str:
    for pi, part in enumerate(parts):
        if type(part) is Text and part.signature is not None:
            report.drop(mi, pi, "text signature", "pydantic-ai prompts carry no signature")
    if len(parts) != 1:
        report.approximate(mi, None, "prompt parts", f"{len(parts)} parts sent as one prompt string")
    return "".join(p.text for p in parts if type(p) is Text)


def _user_content(
    parts: Sequence[Part], mi: int, report: ConversionReport, fixed: int | None = None
) -> str | list[Any]:
    if len(parts) == 1 and type(parts[0]) is Text:
        return _plain(parts, mi, report)
    content: list[Any] = []
    for index, part in enumerate(parts):
        pi = index if fixed is None else fixed
        if type(part) is Text:
            if part.signature is not None:
                report.drop(mi, pi, "text signature", "pydantic-ai prompts carry no signature")
            content.append(part.text)
        elif type(part) is Image or type(part) is Document:
            if type(part) is Document and part.title is not None:
                report.drop(mi, pi, "document title", "pydantic-ai files carry no title")
            if part.url is not None:
                item: JSON = {"kind": "image-url" if type(part) is Image else "document-url", "url": part.url}
                if part.media_type is not None:
                    item["media_type"] = part.media_type
            else:
                if (type(part) is Image) != (part.media_type or "").startswith("image/"):
                    report.approximate(mi, pi, "media kind", "binary data reads back by its media type")
                data = base64.urlsafe_b64encode(part.data or b"").decode()
                item = {"kind": "binary", "data": data, "media_type": part.media_type}
            content.append(item)
    return content


def _response(message: Message, mi: int, report: ConversionReport) -> JSON:
    parts: list[JSON] = []
    for pi, part in enumerate(message.parts):
        if type(part) is Text:
            entry: JSON = {"part_kind": "text", "content": part.text}
            if part.provider_id is not None:
                entry["id"] = part.provider_id
            if part.signature is not None:
                report.drop(mi, pi, "text signature", "pydantic-ai text parts carry no signature")
            parts.append(entry)
        elif type(part) is Reasoning:
            entry = {
                "part_kind": "thinking",
                "content": part.text,
                **given(signature=part.signature, provider_name=part.provider, id=part.provider_id),
            }
            if part.redacted:
                entry["provider_details"] = {"redacted": True}
            parts.append(entry)
        elif type(part) is ToolCall:
            if part.id is None:
                report.approximate(mi, pi, "tool call id", "pydantic-ai generates one on load")
            entry = {"part_kind": "tool-call", "tool_name": part.name, "args": part.arguments}
            if part.id is not None:
                entry["tool_call_id"] = part.id
            if part.provider_id is not None:
                entry["id"] = part.provider_id
            if part.signature is not None:
                report.drop(mi, pi, "tool call signature", "pydantic-ai tool calls carry no signature")
            parts.append(entry)
        else:
            kind = type(part).__name__.lower()
            report.drop(mi, pi, kind, f"a pydantic-ai response cannot hold a {kind}")
    response: JSON = {"kind": "response", "parts": parts}
    for key, value in (
        ("model_name", message.model),
        ("provider_name", message.provider),
        ("provider_response_id", message.response_id),
        ("run_id", message.run_id),
        ("conversation_id", message.conversation_id),
    ):
        if value is not None:
            response[key] = value
    if message.stop_reason is not None:
        finish = _FINISH_TO_PAI.get(message.stop_reason)
        if finish is None:
            report.drop(
                mi, None, "stop reason", f"{message.stop_reason!r} is not a pydantic-ai finish reason"
            )
        else:
            response["finish_reason"] = finish
    if message.usage is not None:
        u = message.usage
        response["usage"] = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "output_reasoning_tokens": u.reasoning_tokens,
        }
    return response


# -- import -------------------------------------------------------------------------------------


def from_pydantic_ai(data: object) -> tuple[list[Message], ConversionReport]:
    """pydantic-ai messages (the JSON list, or its text) → messages. Report indices are the
    pydantic-ai message index and part index."""
    report = ConversionReport()
    out: list[Message] = []
    for mi, raw in enumerate(seq(load_json(data), "$")):
        path = f"$[{mi}]"
        message = obj(raw, path)
        kind = string(message, "kind", path)
        if kind == "response":
            out.append(_import_response(message, mi, path, report))
        elif kind == "request":
            out.extend(_import_request(message, mi, path, report))
        else:
            raise fail(f"unknown message kind {kind!r}", f"{path}.kind")
    return out, report


def _import_request(
    request: Mapping[str, Any], mi: int, path: str, report: ConversionReport
) -> list[Message]:
    run_id = opt_str(request, "run_id", path)
    conversation_id = opt_str(request, "conversation_id", path)

    def new(role: Role, parts: tuple[Part, ...]) -> Message:
        return Message(role, parts, run_id=run_id, conversation_id=conversation_id)

    if request.get("instructions"):
        report.drop(mi, None, "instructions", "per-request agent instructions are not conversation history")
    out: list[Message] = []
    results: list[ToolResult] = []
    for pi, raw in enumerate(seq(request.get("parts"), f"{path}.parts")):
        ppath = f"{path}.parts[{pi}]"
        part = obj(raw, ppath)
        kind = string(part, "part_kind", ppath)
        if kind in ("tool-return", "retry-prompt") and part.get("tool_name") is not None:
            results.append(_import_result(part, kind, mi, pi, ppath, report))
            continue
        if results:
            out.append(new("tool", tuple(results)))
            results = []
        if kind == "system-prompt":
            out.append(new("system", (Text(string(part, "content", ppath)),)))
        elif kind == "user-prompt":
            content = _import_content(part.get("content"), mi, pi, f"{ppath}.content", report)
            out.append(new("user", tuple(content)))
        elif kind == "retry-prompt":
            report.approximate(mi, pi, "retry prompt", "imported as a user message")
            out.append(new("user", (Text(_json_text(part.get("content"))),)))
        else:
            report.drop(mi, pi, f"{kind} part", "no tether equivalent")
    if results:
        out.append(new("tool", tuple(results)))
    return out


def _import_result(
    part: Mapping[str, Any], kind: str, mi: int, pi: int, path: str, report: ConversionReport
) -> ToolResult:
    name = string(part, "tool_name", path)
    call_id = string(part, "tool_call_id", path)
    raw = part.get("content")
    if kind == "retry-prompt":
        return ToolResult(call_id, name, (Text(_json_text(raw)),), failed=True)
    if isinstance(raw, str):
        content: tuple[Text | Image | Document, ...] = (Text(raw),)
    elif isinstance(raw, list):
        content = tuple(_import_content(cast(list[Any], raw), mi, pi, f"{path}.content", report))
    else:
        report.approximate(mi, pi, "structured tool return", "imported as its JSON text")
        content = (Text(_json_text(raw)),)
    outcome = part.get("outcome", "success")
    metadata = part.get("metadata")
    synthesized = opt_obj(metadata).get("tether_synthesized") is True
    return ToolResult(call_id, name, content, failed=outcome != "success", synthesized=synthesized)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


def _import_content(
    raw: object, mi: int, pi: int, path: str, report: ConversionReport
) -> list[Text | Image | Document]:
    if isinstance(raw, str):
        return [Text(raw)]
    out: list[Text | Image | Document] = []
    for ci, item in enumerate(seq(raw, path)):
        ipath = f"{path}[{ci}]"
        if isinstance(item, str):
            out.append(Text(item))
            continue
        entry = obj(item, ipath)
        kind = string(entry, "kind", ipath)
        media_type = opt_str(entry, "media_type", ipath)
        if kind == "image-url":
            out.append(Image(url=string(entry, "url", ipath), media_type=media_type))
        elif kind == "document-url":
            out.append(Document(url=string(entry, "url", ipath), media_type=media_type))
        elif kind == "binary":
            data = b64decode_either(string(entry, "data", ipath), f"{ipath}.data")
            if media_type is None:
                raise fail("binary content needs a media_type", f"{ipath}.media_type")
            if media_type.startswith("image/"):
                out.append(Image(data=data, media_type=media_type))
            else:
                out.append(Document(data=data, media_type=media_type))
        elif kind == "text-content":
            out.append(Text(string(entry, "content", ipath)))
        else:
            report.drop(mi, pi, f"{kind} content", "tether has no audio/video parts")
    return out


def _import_response(response: Mapping[str, Any], mi: int, path: str, report: ConversionReport) -> Message:
    parts: list[Part] = []
    for pi, raw in enumerate(seq(response.get("parts"), f"{path}.parts")):
        ppath = f"{path}.parts[{pi}]"
        part = obj(raw, ppath)
        kind = string(part, "part_kind", ppath)
        if kind == "text":
            parts.append(Text(string(part, "content", ppath), provider_id=opt_str(part, "id", ppath)))
        elif kind == "thinking":
            details = part.get("provider_details")
            redacted = opt_obj(details).get("redacted") is True
            parts.append(
                Reasoning(
                    string(part, "content", ppath),
                    signature=opt_str(part, "signature", ppath),
                    redacted=redacted,
                    provider=opt_str(part, "provider_name", ppath),
                    provider_id=opt_str(part, "id", ppath),
                )
            )
        elif kind == "tool-call":
            args = part.get("args")
            arguments = "{}" if args is None else _json_text(args)
            parts.append(
                ToolCall(
                    opt_str(part, "tool_call_id", ppath),
                    string(part, "tool_name", ppath),
                    arguments,
                    provider_id=opt_str(part, "id", ppath),
                )
            )
        else:
            report.drop(mi, pi, f"{kind} part", "a provider-native part with no tether equivalent")
    finish = opt_str(response, "finish_reason", path)
    usage = response.get("usage")
    return Message(
        "assistant",
        tuple(parts),
        run_id=opt_str(response, "run_id", path),
        conversation_id=opt_str(response, "conversation_id", path),
        provider=opt_str(response, "provider_name", path),
        model=opt_str(response, "model_name", path),
        stop_reason=None if finish is None else _FINISH_FROM_PAI.get(finish, finish),
        usage=None if usage is None else _usage(obj(usage, f"{path}.usage")),
        response_id=opt_str(response, "provider_response_id", path),
    )


def _usage(raw: Mapping[str, Any]) -> Usage:
    def count(key: str) -> int:
        return token_count(raw.get(key))

    reasoning = count("output_reasoning_tokens")
    if not reasoning:
        reasoning = token_count(opt_obj(raw.get("details")).get("reasoning_tokens"))
    return Usage(
        count("input_tokens"),
        count("output_tokens"),
        count("cache_read_tokens"),
        count("cache_write_tokens"),
        reasoning,
    )
