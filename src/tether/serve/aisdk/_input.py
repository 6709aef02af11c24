"""The request ``DefaultChatTransport`` sends (``id``, ``messages``, ``trigger``, ``messageId``)
and its UI messages converted to tether messages, with everything they could not carry reported.

Every message a client sends is untrusted: converted here, sanitized by the route before anything
is stored. Report positions are indexes in the client's ``messages`` and in a message's ``parts``.
One assistant UI message holds every step of a turn: each step (``step-start`` separates them)
becomes an assistant message, followed by a tool message with the outputs its calls have.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, cast
from urllib.parse import unquote_to_bytes

import msgspec

from tether.errors import UserError
from tether.messages import Document, Image, Message, Part, Text, ToolCall, ToolResult
from tether.models.wire import ConversionReport

from .._boundary import Origin
from .._errors import ApiError
from .._schemas import ID_PATTERN

__all__ = ["ChatRequest", "ToolAnswer", "UIMessageIn", "prompt_of", "to_tether", "tool_answers"]

_encoder = msgspec.json.Encoder()
Json = dict[str, Any]


class UIMessageIn(msgspec.Struct, frozen=True):
    """A UI message as the client holds it (its parts are read one by one: ``tool-<name>`` and
    ``data-<name>`` types are open-ended)."""

    id: str
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]]
    metadata: Any = None


class ChatRequest(msgspec.Struct, frozen=True, rename="camel"):
    """``POST /v1/aisdk/chat``: what ``DefaultChatTransport.sendMessages`` sends. ``id`` is the
    chat, one of the caller's conversations (created when new); other fields of the body (the
    transport's ``body`` option) are ignored."""

    id: Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]
    messages: list[UIMessageIn]
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = None


def _str(part: Json, key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise ApiError(422, f"{where}.{key}: a string is needed")
    return value


def _file(part: Json, where: str) -> Image | Document | str:
    """The tether part for a ``file`` part, or why it cannot be carried."""
    media = _str(part, "mediaType", where)
    url = _str(part, "url", where)
    cls = Image if media.startswith("image/") or media == "image" else Document
    if part.get("providerReference") is not None and not url:
        return "a provider file reference: only that provider can read it"
    try:
        if url.startswith("data:"):
            head, sep, payload = url[5:].partition(",")
            if not sep:
                raise ApiError(422, f"{where}.url: a data URL needs a comma before its data")
            if head.endswith(";base64"):
                data = base64.b64decode(payload, validate=True)
            else:
                data = unquote_to_bytes(payload)
            return cls(data=data, media_type=media)
        return cls(url=url, media_type=media)
    except UserError as exc:
        raise ApiError(422, f"{where}: {exc}") from None
    except (binascii.Error, ValueError):
        raise ApiError(422, f"{where}.url: the data URL is not base64 data") from None


def _output_text(value: Any) -> str:
    return value if isinstance(value, str) else _encoder.encode(value).decode()


def tool_name(part: Json) -> str | None:
    """The tool of a tool part (``tool-<name>`` or ``dynamic-tool``), else ``None``."""
    kind = part.get("type")
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else ""
    if isinstance(kind, str) and kind.startswith("tool-"):
        return kind[5:]
    return None


@dataclass
class _Step:
    parts: list[Part] = field(default_factory=lambda: [])
    where: list[tuple[int, int | None]] = field(default_factory=lambda: [])
    results: list[ToolResult] = field(default_factory=lambda: [])
    result_where: list[tuple[int, int | None]] = field(default_factory=lambda: [])


def _call(part: Json, name: str, where: str) -> tuple[ToolCall, ToolResult | None]:
    call_id = _str(part, "toolCallId", where)
    if not name or not call_id:
        raise ApiError(422, f"{where}: a tool part needs a tool name and a toolCallId")
    arguments = _output_text(part.get("input", {}))
    state = part.get("state")
    result: ToolResult | None = None
    if state == "output-available":
        result = ToolResult(call_id, name, (Text(_output_text(part.get("output"))),))
    elif state == "output-error":
        result = ToolResult(call_id, name, (Text(str(part.get("errorText") or "failed")),), failed=True)
    elif state == "output-denied":
        result = ToolResult(call_id, name, (Text("the user denied this tool call"),), failed=True)
    return ToolCall(call_id, name, arguments), result


def _assistant(msg: UIMessageIn, mi: int, report: ConversionReport) -> list[tuple[Message, Origin]]:
    steps: list[_Step] = [_Step()]
    for pi, part in enumerate(msg.parts):
        where = f"$.messages[{mi}].parts[{pi}]"
        kind = part.get("type")
        name = tool_name(part)
        if kind == "step-start":
            steps.append(_Step())
        elif kind == "text":
            steps[-1].parts.append(Text(_str(part, "text", where)))
            steps[-1].where.append((mi, pi))
        elif name is not None:
            call, result = _call(part, name, where)
            steps[-1].parts.append(call)
            steps[-1].where.append((mi, pi))
            if result is not None:
                steps[-1].results.append(result)
                steps[-1].result_where.append((mi, pi))
        elif kind == "reasoning":
            report.drop(mi, pi, "reasoning part", "unsigned reasoning from a client is not replayed")
        else:
            report.drop(
                mi, pi, f"{str(kind)[:40]} part", "tether's assistant messages carry text and tool calls"
            )
    out: list[tuple[Message, Origin]] = []
    for step in steps:
        if step.parts:
            out.append((Message("assistant", tuple(step.parts)), Origin(mi, tuple(step.where))))
        if step.results:
            items = tuple((None,) for _ in step.results)
            out.append((Message("tool", tuple(step.results)), Origin(mi, tuple(step.result_where), items)))
    return out


def _user(msg: UIMessageIn, mi: int, report: ConversionReport, *, media: bool) -> tuple[Message, Origin]:
    parts: list[Part] = []
    where_of: list[tuple[int, int | None]] = []
    for pi, part in enumerate(msg.parts):
        where = f"$.messages[{mi}].parts[{pi}]"
        kind = part.get("type")
        if kind == "text":
            parts.append(Text(_str(part, "text", where)))
            where_of.append((mi, pi))
        elif kind == "file":
            made = _file(part, where)
            if isinstance(made, str):
                report.drop(mi, pi, "file part", made)
            elif not media:
                report.drop(mi, pi, "file part", "the prompt carries text only here")
            else:
                parts.append(made)
                where_of.append((mi, pi))
        else:
            report.drop(mi, pi, f"{str(kind)[:40]} part", "tether's user messages carry text and files")
    return Message(msg.role, tuple(parts)), Origin(mi, tuple(where_of))


def to_tether(
    messages: list[UIMessageIn], *, first: int = 0, media: bool = True, origins: list[Origin] | None = None
) -> tuple[list[Message], ConversionReport]:
    """UI messages → tether messages (``first``: the index of ``messages[0]`` in the request;
    ``media=False``: text only; ``origins``: filled with one ``Origin`` per message returned)."""
    report = ConversionReport()
    out: list[tuple[Message, Origin]] = []
    for offset, msg in enumerate(messages):
        mi = first + offset
        if msg.metadata is not None:
            report.drop(mi, None, "metadata", "tether messages carry no metadata")
        if msg.role == "assistant":
            out.extend(_assistant(msg, mi, report))
        else:
            out.append(_user(msg, mi, report, media=media and msg.role == "user"))
    if origins is not None:
        origins.extend(o for _, o in out)
    return [m for m, _ in out], report


def prompt_of(message: UIMessageIn, index: int) -> tuple[str, ConversionReport]:
    """The prompt of the request's last message (a user message): its text parts, joined."""
    converted, report = to_tether([message], first=index, media=False)
    return "\n".join(p.text for p in converted[0].parts if isinstance(p, Text)), report


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What the client's copy of the paused turn says about one call: an approval answer
    (``approval_id``, ``approved``, ``reason``) or the output of a call it ran itself."""

    where: str
    approval_id: str | None = None
    approved: bool | None = None
    reason: str | None = None
    output: Any = None
    failed: bool = False
    has_output: bool = False


def _answer(part: Json, where: str) -> ToolAnswer | None:
    state = part.get("state")
    if state == "approval-responded":
        approval = part.get("approval")
        if not isinstance(approval, dict):
            raise ApiError(422, f"{where}.approval: an object with id and approved is needed")
        answer = cast(Json, approval)
        aid, approved, reason = answer.get("id"), answer.get("approved"), answer.get("reason")
        if not isinstance(aid, str) or not isinstance(approved, bool):
            raise ApiError(
                422, f"{where}.approval: an object with id (string) and approved (boolean) is needed"
            )
        if reason is not None and not isinstance(reason, str):
            raise ApiError(422, f"{where}.approval.reason: a string is needed")
        return ToolAnswer(where, aid, approved, reason)
    if state == "output-available":
        return ToolAnswer(where, output=part.get("output"), has_output=True)
    if state == "output-error":
        return ToolAnswer(where, output=str(part.get("errorText") or "failed"), failed=True, has_output=True)
    return None


def tool_answers(message: UIMessageIn, index: int) -> dict[str, ToolAnswer]:
    """The answers the client's copy of a paused turn (an assistant message) holds, by call id."""
    out: dict[str, ToolAnswer] = {}
    for pi, part in enumerate(message.parts):
        where = f"$.messages[{index}].parts[{pi}]"
        if tool_name(part) is None:
            continue
        call_id = _str(part, "toolCallId", where)
        answer = _answer(part, where)
        if answer is not None:
            out[call_id] = answer
    return out
