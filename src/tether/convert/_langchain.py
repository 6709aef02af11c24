"""LangChain message dicts (``messages_to_dict`` / ``messages_from_dict``) to and from tether.

Works on the dict shape only (no langchain import). One tool message becomes one ``ToolMessage``
per result (consecutive ``ToolMessage`` dicts import as one tool message). An ``AIMessage`` keeps
text, reasoning and media as content blocks, in order, followed by its ``tool_calls`` and then
its ``invalid_tool_calls`` (arguments that are not a JSON object, kept verbatim). Arguments travel
as parsed objects: exported and re-imported they read as compact JSON (reported when that
changes the text). tether's run/conversation stamps and the synthesized flag ride in
``response_metadata["tether"]``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, cast

import msgspec

from tether.convert._input import load_json
from tether.messages import (
    Document,
    Image,
    Message,
    Part,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
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

__all__ = ["from_langchain", "to_langchain"]

JSON = dict[str, Any]
_TYPES: dict[str, str] = {"system": "system", "user": "human", "assistant": "ai"}
_ROLES: dict[str, Role] = {
    "system": "system",
    "SystemMessageChunk": "system",
    "human": "user",
    "HumanMessageChunk": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
}


# -- export -------------------------------------------------------------------------------------


def to_langchain(messages: Sequence[Message]) -> tuple[list[JSON], ConversionReport]:
    """Messages → the list ``langchain_core.messages.messages_from_dict`` loads."""
    report = ConversionReport()
    out: list[JSON] = []
    for mi, message in enumerate(messages):
        if message.role == "tool":
            for pi, result in enumerate(message.tool_results):
                data: JSON = {
                    "type": "tool",
                    "content": _content(result.content, mi, report, pi),
                    "tool_call_id": result.call_id,
                    "name": result.name,
                    "status": "error" if result.failed else "success",
                }
                _stamp(data, message, synthesized=result.synthesized)
                out.append({"type": "tool", "data": data})
            continue
        kind = _TYPES[message.role]
        parts = [p for p in message.parts if type(p) is not ToolCall]
        data = {"type": kind, "content": _content(parts, mi, report)}
        if message.role == "assistant":
            _assistant(message, data, mi, report)
        _stamp(data, message)
        out.append({"type": kind, "data": data})
    return out, report


def _stamp(data: JSON, message: Message, *, synthesized: bool = False) -> None:
    stamps: JSON = {}
    if message.run_id is not None:
        stamps["run_id"] = message.run_id
    if message.conversation_id is not None:
        stamps["conversation_id"] = message.conversation_id
    if synthesized:
        stamps["synthesized"] = True
    if stamps:
        data.setdefault("response_metadata", {})["tether"] = stamps


def _content(
    parts: Sequence[Part], mi: int, report: ConversionReport, fixed: int | None = None
) -> str | list[JSON]:
    if len(parts) == 1 and type(parts[0]) is Text and parts[0].text and parts[0].signature is None:
        return parts[0].text
    if not parts:
        return ""
    blocks: list[JSON] = []
    for index, part in enumerate(parts):
        pi = index if fixed is None else fixed
        if type(part) is Text:
            block: JSON = {"type": "text", "text": part.text}
            if part.signature is not None:
                block["extras"] = {"signature": part.signature}
        elif type(part) is Reasoning:
            block = {"type": "reasoning", "reasoning": part.text}
            if part.provider_id is not None:
                block["id"] = part.provider_id
            extras = {
                k: v
                for k, v in (
                    ("signature", part.signature),
                    ("provider", part.provider),
                    ("redacted", part.redacted or None),
                )
                if v is not None
            }
            if extras:
                block["extras"] = extras
        elif type(part) is Image or type(part) is Document:
            block = {"type": "image" if type(part) is Image else "file"}
            if part.url is not None:
                block["url"] = part.url
            else:
                block["base64"] = base64.b64encode(part.data or b"").decode()
            if part.media_type is not None:
                block["mime_type"] = part.media_type
            if type(part) is Document and part.title is not None:
                block["extras"] = {"filename": part.title}
        else:
            report.drop(mi, pi, type(part).__name__.lower(), "not valid here")
            continue
        blocks.append(block)
    return blocks


def _assistant(message: Message, data: JSON, mi: int, report: ConversionReport) -> None:
    calls: list[JSON] = []
    invalid: list[JSON] = []
    seen_call = seen_invalid = reordered = False
    for pi, part in enumerate(message.parts):
        if type(part) is not ToolCall:
            reordered = reordered or seen_call or seen_invalid
            continue
        if part.signature is not None:
            report.drop(mi, pi, "tool call signature", "LangChain tool calls carry no signature")
        if part.provider_id is not None:
            report.drop(mi, pi, "tool call provider id", "LangChain tool calls carry no provider item id")
        if part.truncated:
            seen_invalid = True
            invalid.append(
                {
                    "type": "invalid_tool_call",
                    "name": part.name,
                    "args": part.arguments,
                    "id": part.id,
                    "error": None,
                }
            )
            continue
        reordered = reordered or seen_invalid
        seen_call = True
        args = part.args()
        if msgspec.json.encode(args).decode() != part.arguments:
            report.approximate(mi, pi, "tool call arguments", "sent as an object; re-read as compact JSON")
        calls.append({"type": "tool_call", "name": part.name, "args": args, "id": part.id})
    if reordered:
        report.approximate(mi, None, "part order", "LangChain lists tool calls after the content")
    data["tool_calls"] = calls
    data["invalid_tool_calls"] = invalid
    if message.response_id is not None:
        data["id"] = message.response_id
    metadata = given(
        model_name=message.model, model_provider=message.provider, finish_reason=message.stop_reason
    )
    if metadata:
        data["response_metadata"] = metadata
    if message.usage is not None:
        u = message.usage
        usage: JSON = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "total_tokens": u.total_tokens,
        }
        cache = {
            k: v
            for k, v in (("cache_read", u.cache_read_tokens), ("cache_creation", u.cache_write_tokens))
            if v
        }
        if cache:
            usage["input_token_details"] = cache
        if u.reasoning_tokens:
            usage["output_token_details"] = {"reasoning": u.reasoning_tokens}
        data["usage_metadata"] = usage


# -- import -------------------------------------------------------------------------------------


def from_langchain(data: object) -> tuple[list[Message], ConversionReport]:
    """``messages_to_dict`` output (or its JSON text) → messages. Report indices are the LangChain
    message index and content block index."""
    report = ConversionReport()
    out: list[Message] = []
    last_tool = False
    for mi, raw in enumerate(seq(load_json(data), "$")):
        path = f"$[{mi}]"
        entry = obj(raw, path)
        kind = string(entry, "type", path)
        body = obj(entry.get("data"), f"{path}.data")
        dpath = f"{path}.data"
        run_id, conversation_id = _stamps(body, dpath)
        if kind in ("tool", "ToolMessageChunk"):
            result = _tool_result(body, mi, dpath, report)
            if last_tool and (out[-1].run_id, out[-1].conversation_id) == (run_id, conversation_id):
                out[-1] = Message(
                    "tool", (*out[-1].parts, result), run_id=run_id, conversation_id=conversation_id
                )
            else:
                out.append(Message("tool", (result,), run_id=run_id, conversation_id=conversation_id))
            last_tool = True
            continue
        last_tool = False
        role = _ROLES.get(kind)
        if role is None and kind in ("chat", "ChatMessageChunk"):
            role = _ROLES.get(
                {"user": "human", "assistant": "ai"}.get(str(body.get("role")), str(body.get("role")))
            )
        if role is None:
            report.drop(mi, None, f"{kind} message", "no tether equivalent")
            continue
        parts: list[Part] = list(_blocks(body.get("content"), mi, f"{dpath}.content", report, role=role))
        if role == "assistant":
            out.append(_ai(body, parts, dpath, (run_id, conversation_id)))
            continue
        if role == "system" and any(type(p) is not Text for p in parts):
            raise fail("system content must be text", f"{dpath}.content")
        out.append(Message(role, tuple(parts), run_id=run_id, conversation_id=conversation_id))
    return out, report


def _stamps(body: Mapping[str, Any], path: str) -> tuple[str | None, str | None]:
    metadata = body.get("response_metadata")
    tether = cast(Mapping[str, Any], metadata).get("tether") if isinstance(metadata, Mapping) else None
    if not isinstance(tether, Mapping):
        return None, None
    stamps = cast(Mapping[str, Any], tether)
    mpath = f"{path}.response_metadata.tether"
    return opt_str(stamps, "run_id", mpath), opt_str(stamps, "conversation_id", mpath)


def _tool_result(body: Mapping[str, Any], mi: int, path: str, report: ConversionReport) -> ToolResult:
    content = _blocks(body.get("content"), mi, f"{path}.content", report, role="tool")
    synthesized = opt_obj(opt_obj(body.get("response_metadata")).get("tether")).get("synthesized") is True
    name = opt_str(body, "name", path)
    if name is None:
        report.approximate(mi, None, "tool name", "the ToolMessage has no name")
    return ToolResult(
        string(body, "tool_call_id", path),
        name or "",
        tuple(p for p in content if isinstance(p, Text | Image | Document)),
        failed=body.get("status") == "error",
        synthesized=synthesized,
    )


def _blocks(raw: object, mi: int, path: str, report: ConversionReport, *, role: str) -> list[Part]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [Text(raw)]
    out: list[Part] = []
    for bi, item in enumerate(seq(raw, path)):
        bpath = f"{path}[{bi}]"
        if isinstance(item, str):
            out.append(Text(item))
            continue
        block = obj(item, bpath)
        kind = string(block, "type", bpath)
        extras_raw = block.get("extras")
        extras = opt_obj(extras_raw)
        if kind == "text":
            out.append(
                Text(string(block, "text", bpath), signature=opt_str(extras, "signature", f"{bpath}.extras"))
            )
        elif kind in ("reasoning", "thinking", "redacted_thinking") and role == "assistant":
            out.append(_reasoning(block, kind, extras, bpath))
        elif kind in ("image", "file", "image_url") and role != "system":
            out.append(_media(block, kind, extras, bpath))
        elif kind in ("tool_call", "tool_use", "function_call") and role == "assistant":
            continue  # the same call is in tool_calls
        else:
            report.drop(mi, bi, f"{kind} block", f"no tether equivalent in a {role} message")
    return out


def _reasoning(block: Mapping[str, Any], kind: str, extras: Mapping[str, Any], path: str) -> Reasoning:
    if kind == "thinking":  # Anthropic-style block
        return Reasoning(
            string(block, "thinking", path), signature=opt_str(block, "signature", path), provider="anthropic"
        )
    if kind == "redacted_thinking":
        return Reasoning("", signature=string(block, "data", path), redacted=True, provider="anthropic")
    return Reasoning(
        str(block.get("reasoning") or ""),
        signature=opt_str(extras, "signature", f"{path}.extras"),
        redacted=extras.get("redacted") is True,
        provider=opt_str(extras, "provider", f"{path}.extras"),
        provider_id=opt_str(block, "id", path),
    )


def _media(block: Mapping[str, Any], kind: str, extras: Mapping[str, Any], path: str) -> Image | Document:
    if kind == "image_url":  # OpenAI-style legacy block
        image_url = block.get("image_url")
        url = cast(Mapping[str, Any], image_url).get("url") if isinstance(image_url, Mapping) else image_url
        if not isinstance(url, str):
            raise fail("'image_url' needs a url string", f"{path}.image_url")
        if url.startswith("data:"):
            head, _, payload = url.partition(",")
            return Image(
                data=b64decode_either(payload, f"{path}.image_url"),
                media_type=head[5:].removesuffix(";base64"),
            )
        return Image(url=url)
    cls = Image if kind == "image" else Document
    url = opt_str(block, "url", path)
    data = opt_str(block, "base64", path)
    media_type = opt_str(block, "mime_type", path)
    title = opt_str(extras, "filename", f"{path}.extras") if cls is Document else None
    if url is not None:
        return (
            Document(url=url, media_type=media_type, title=title)
            if cls is Document
            else Image(url=url, media_type=media_type)
        )
    if data is None:
        raise fail(f"{kind} block needs 'url' or 'base64' (file ids cannot be imported)", path)
    if media_type is None:
        raise fail(f"{kind} block with base64 data needs 'mime_type'", f"{path}.mime_type")
    raw = b64decode_either(data, f"{path}.base64")
    if cls is Document:
        return Document(data=raw, media_type=media_type, title=title)
    return Image(data=raw, media_type=media_type)


def _ai(
    body: Mapping[str, Any],
    parts: list[Part],
    path: str,
    stamps: tuple[str | None, str | None],
) -> Message:
    for ci, raw in enumerate(seq(body.get("tool_calls") or [], f"{path}.tool_calls")):
        cpath = f"{path}.tool_calls[{ci}]"
        call = obj(raw, cpath)
        args = obj(call.get("args", {}), f"{cpath}.args")
        parts.append(
            ToolCall(
                opt_str(call, "id", cpath), string(call, "name", cpath), msgspec.json.encode(args).decode()
            )
        )
    for ci, raw in enumerate(seq(body.get("invalid_tool_calls") or [], f"{path}.invalid_tool_calls")):
        cpath = f"{path}.invalid_tool_calls[{ci}]"
        call = obj(raw, cpath)
        parts.append(
            ToolCall(
                opt_str(call, "id", cpath),
                opt_str(call, "name", cpath) or "",
                opt_str(call, "args", cpath) or "",
            )
        )
    metadata_raw = body.get("response_metadata")
    metadata = opt_obj(metadata_raw)
    mpath = f"{path}.response_metadata"
    usage_raw = body.get("usage_metadata")
    return Message(
        "assistant",
        tuple(parts),
        run_id=stamps[0],
        conversation_id=stamps[1],
        provider=opt_str(metadata, "model_provider", mpath),
        model=opt_str(metadata, "model_name", mpath),
        stop_reason=opt_str(metadata, "finish_reason", mpath),
        usage=None if usage_raw is None else _usage(obj(usage_raw, f"{path}.usage_metadata")),
        response_id=opt_str(body, "id", path),
    )


def _usage(raw: Mapping[str, Any]) -> Usage:
    def count(source: object, key: str) -> int:
        return token_count(cast(Mapping[str, Any], source).get(key) if isinstance(source, Mapping) else None)

    inputs = raw.get("input_token_details")
    outputs = raw.get("output_token_details")
    return Usage(
        count(raw, "input_tokens"),
        count(raw, "output_tokens"),
        count(inputs, "cache_read"),
        count(inputs, "cache_creation"),
        count(outputs, "reasoning"),
    )
