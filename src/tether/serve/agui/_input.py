"""AG-UI's ``RunAgentInput`` as the service decodes it, and the client's messages converted to
tether messages, with everything they could not carry reported.

The shapes follow the AG-UI 1.0 schema (camelCase on the wire; unknown fields are ignored, as
AG-UI asks). Every message a client sends is untrusted: converted here, then sanitized by the
route (``sanitize_history``) before anything is stored. Report indexes are positions in the
client's ``messages`` list (``part``: the index in a message's content list).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal, TypeAlias, cast

import msgspec

from tether.agent import Tool
from tether.errors import DecodeError, UserError
from tether.messages import Document, Image, Message, Part, Text, ToolCall, ToolResult
from tether.models.wire import ConversionReport

from .._boundary import Origin, client_positions
from .._client_tools import FrontendTool
from .._errors import ApiError
from .._schemas import ID_PATTERN

__all__ = [
    "AguiMessage",
    "FrontendTool",
    "Origin",
    "ResumeEntry",
    "RunAgentInput",
    "client_positions",
    "frontend_tools",
    "to_tether",
]

MAX_CLIENT_TOOLS = 64
_ID = Annotated[str, msgspec.Meta(pattern=ID_PATTERN)]


class _Wire(msgspec.Struct, frozen=True, rename="camel"):
    pass


# -- content parts ----------------------------------------------------------------------------------
class DataSource(_Wire, frozen=True, tag="data", tag_field="type"):
    value: str
    mime_type: str


class UrlSource(_Wire, frozen=True, tag="url", tag_field="type"):
    value: str
    mime_type: str | None = None


class FileSource(_Wire, frozen=True, tag="file", tag_field="type"):
    value: str
    provider: str | None = None
    mime_type: str | None = None


Source: TypeAlias = DataSource | UrlSource | FileSource


class TextPart(_Wire, frozen=True, tag="text", tag_field="type"):
    text: str


class ImagePart(_Wire, frozen=True, tag="image", tag_field="type"):
    source: Source


class DocumentPart(_Wire, frozen=True, tag="document", tag_field="type"):
    source: Source


class AudioPart(_Wire, frozen=True, tag="audio", tag_field="type"):
    source: Source


class VideoPart(_Wire, frozen=True, tag="video", tag_field="type"):
    source: Source


class BinaryPart(_Wire, frozen=True, tag="binary", tag_field="type"):
    """The pre-1.0 input content (``mimeType`` with ``data``, ``url`` or ``id``)."""

    mime_type: str
    data: str | None = None
    url: str | None = None
    id: str | None = None
    filename: str | None = None


ContentPart: TypeAlias = TextPart | ImagePart | DocumentPart | AudioPart | VideoPart | BinaryPart
Content: TypeAlias = str | list[ContentPart]


# -- messages -----------------------------------------------------------------------------------------
class _Message(_Wire, frozen=True, tag_field="role"):
    id: str


class DeveloperMessage(_Message, frozen=True, tag="developer"):
    content: str
    name: str | None = None
    metadata: Any = None


class SystemMessage(_Message, frozen=True, tag="system"):
    content: str
    name: str | None = None
    metadata: Any = None


class FunctionCall(_Wire, frozen=True):
    name: str
    arguments: str


class AguiToolCall(_Wire, frozen=True):
    id: str
    function: FunctionCall
    type: Literal["function"] = "function"
    encrypted_value: str | None = None


class AssistantMessage(_Message, frozen=True, tag="assistant"):
    content: str | None = None
    tool_calls: list[AguiToolCall] | None = None
    name: str | None = None
    encrypted_value: str | None = None
    metadata: Any = None


class UserMessage(_Message, frozen=True, tag="user"):
    content: Content
    name: str | None = None
    metadata: Any = None


class ToolMessage(_Message, frozen=True, tag="tool"):
    content: Content
    tool_call_id: str
    error: str | None = None
    encrypted_value: str | None = None


class ActivityMessage(_Message, frozen=True, tag="activity"):
    activity_type: str
    content: dict[str, Any]


class ReasoningMessage(_Message, frozen=True, tag="reasoning"):
    content: str
    encrypted_value: str | None = None


AguiMessage: TypeAlias = (
    DeveloperMessage
    | SystemMessage
    | AssistantMessage
    | UserMessage
    | ToolMessage
    | ActivityMessage
    | ReasoningMessage
)


# -- the request ----------------------------------------------------------------------------------------
class AguiTool(_Wire, frozen=True):
    name: str
    description: str = ""
    parameters: Any = None


class AguiContext(_Wire, frozen=True):
    description: str
    value: str


class ResumeEntry(_Wire, frozen=True):
    """An answer to one interrupt of the run that paused."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class RunAgentInput(_Wire, frozen=True):
    """``POST /v1/agui``: AG-UI's run request. ``threadId`` names a conversation of the caller
    (created when it does not exist); ``messages`` are the client's (untrusted); ``tools`` are
    tools the client runs itself; ``resume`` answers the interrupts of a paused run."""

    thread_id: _ID
    run_id: str
    messages: list[AguiMessage]
    protocol_version: str | None = None
    parent_run_id: str | None = None
    state: Any = None
    tools: list[AguiTool] | None = None
    context: list[AguiContext] | None = None
    forwarded_props: Any = None
    resume: list[ResumeEntry] | None = None


# -- conversion -------------------------------------------------------------------------------------------
def _b64(value: str, path: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError(f"{path}: not base64 data", path=path) from None


def _media(kind: str, source: Source, path: str) -> Image | Document | str:
    """The tether part for a media source, or why it cannot be carried."""
    cls = Image if kind == "image" else Document
    if isinstance(source, FileSource):
        return "a provider file handle: only that provider can read it"
    try:
        if isinstance(source, DataSource):
            return cls(data=_b64(source.value, f"{path}.source.value"), media_type=source.mime_type)
        return cls(url=source.value, media_type=source.mime_type)
    except UserError as exc:
        raise DecodeError(f"{path}: {exc}", path=path) from None


def _content(
    content: Content, mi: int, where: str, report: ConversionReport, *, media: bool
) -> list[tuple[Text | Image | Document, int | None]]:
    """The tether parts of a client ``content``, each with its index in the client's list
    (``None`` for a string content)."""
    if isinstance(content, str):
        return [(Text(content), None)]
    out: list[tuple[Text | Image | Document, int | None]] = []
    for pi, part in enumerate(content):
        path = f"{where}.content[{pi}]"
        if isinstance(part, TextPart):
            out.append((Text(part.text), pi))
            continue
        if isinstance(part, AudioPart | VideoPart):
            report.drop(
                mi, pi, f"{type(part).__name__[:-4].lower()} part", "tether messages carry no audio or video"
            )
            continue
        if isinstance(part, BinaryPart):
            kind = "image" if part.mime_type.startswith("image/") else "document"
            if part.data is not None:
                source: Source = DataSource(part.data, part.mime_type)
            elif part.url is not None:
                source = UrlSource(part.url, part.mime_type)
            else:
                report.drop(mi, pi, "binary part", "no data or url (a file id only its uploader can read)")
                continue
        else:
            kind = "image" if isinstance(part, ImagePart) else "document"
            source = part.source
        made = _media(kind, source, path)
        if isinstance(made, str):
            report.drop(mi, pi, f"{kind} part", made)
        elif not media:
            report.drop(mi, pi, f"{kind} part", "this message carries text only here")
        else:
            out.append((made, pi))
    return out


def _dropped_fields(msg: AguiMessage, mi: int, report: ConversionReport) -> None:
    if getattr(msg, "name", None) is not None:
        report.drop(mi, None, "participant name", "tether messages carry no name")
    if getattr(msg, "encrypted_value", None) is not None:
        report.drop(mi, None, "encryptedValue", "a provider artefact from a client is not trusted")
    if getattr(msg, "metadata", None) is not None:
        report.drop(mi, None, "metadata", "tether messages carry no metadata")


def to_tether(
    messages: list[AguiMessage], *, first: int = 0, media: bool = True, origins: list[Origin] | None = None
) -> tuple[list[Message], ConversionReport]:
    """AG-UI messages → tether messages (``first``: the index of ``messages[0]`` in the
    request, for the report and error paths; ``media=False``: text only, media reported as
    dropped; ``origins``: filled with one ``Origin`` per message returned). Consecutive tool
    messages become one."""
    out: list[Message] = []
    found: list[Origin] = []
    report = ConversionReport()
    names: dict[str, str] = {}
    for offset, msg in enumerate(messages):
        mi = first + offset
        where = f"$.messages[{mi}]"
        _dropped_fields(msg, mi, report)
        if isinstance(msg, SystemMessage | DeveloperMessage):
            if isinstance(msg, DeveloperMessage):
                report.approximate(mi, None, "developer role", "imported as a system message")
            out.append(Message("system", (Text(msg.content),)))
            found.append(Origin(mi, ((mi, None),)))
        elif isinstance(msg, UserMessage):
            content = _content(msg.content, mi, where, report, media=media)
            out.append(Message("user", tuple(p for p, _ in content)))
            found.append(Origin(mi, tuple((mi, pi) for _, pi in content)))
        elif isinstance(msg, AssistantMessage):
            parts: list[Part] = [Text(msg.content)] if msg.content else []
            for ci, call in enumerate(msg.tool_calls or []):
                if call.encrypted_value is not None:
                    report.drop(
                        mi,
                        None,
                        f"toolCalls[{ci}].encryptedValue",
                        "a provider artefact from a client is not trusted",
                    )
                names[call.id] = call.function.name
                parts.append(ToolCall(call.id, call.function.name, call.function.arguments))
            out.append(Message("assistant", tuple(parts)))
            found.append(Origin(mi, tuple((mi, None) for _ in parts)))
        elif isinstance(msg, ToolMessage):
            content = _content(msg.content, mi, where, report, media=media)
            if [p for p, _ in content] == [Text("")]:
                content = []
            if msg.error is not None:
                content.append((Text(msg.error), None))
            if msg.tool_call_id not in names:
                report.approximate(mi, None, "tool name", f"no earlier call has id {msg.tool_call_id!r}")
            result = ToolResult(
                msg.tool_call_id,
                names.get(msg.tool_call_id, ""),
                tuple(p for p, _ in content),
                failed=msg.error is not None,
            )
            items = tuple(pi for _, pi in content)
            if (
                out
                and out[-1].role == "tool"
                and offset > 0
                and isinstance(messages[offset - 1], ToolMessage)
            ):
                out[-1] = Message("tool", (*out[-1].parts, result))
                merged = found[-1]
                found[-1] = Origin(merged.message, (*merged.parts, (mi, None)), (*merged.results, items))
            else:
                out.append(Message("tool", (result,)))
                found.append(Origin(mi, ((mi, None),), (items,)))
        elif isinstance(msg, ReasoningMessage):
            report.drop(mi, None, "reasoning message", "unsigned reasoning from a client is not replayed")
        else:
            report.drop(mi, None, "activity message", "tether messages carry no activity")
    if origins is not None:
        origins.extend(found)
    return out, report


# -- the client's tools ----------------------------------------------------------------------------------
def frontend_tools(given: list[AguiTool] | None, server: set[str]) -> list[Tool[Any]]:
    """The client's tools as external tools; 422 naming the tool for a bad name, a name of the
    server's own tools, a repeated name or a schema that is not a JSON object."""
    if not given:
        return []
    if len(given) > MAX_CLIENT_TOOLS:
        raise ApiError(422, f"$.tools: at most {MAX_CLIENT_TOOLS} tools, not {len(given)}")
    out: list[Tool[Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(given):
        where = f"$.tools[{i}]"
        if not tool.name:
            raise ApiError(422, f"{where}.name: a tool needs a name")
        if tool.name in server:
            raise ApiError(
                422, f"{where}.name: {tool.name!r} is a tool of the server; a client cannot replace it"
            )
        if tool.name in seen:
            raise ApiError(422, f"{where}.name: {tool.name!r} is given twice")
        seen.add(tool.name)
        given_schema: object = tool.parameters
        if given_schema is None:
            given_schema = {"type": "object", "properties": {}}
        if not isinstance(given_schema, dict):
            raise ApiError(422, f"{where}.parameters: a JSON Schema object is needed")
        parameters = cast(dict[str, Any], given_schema)
        try:
            out.append(FrontendTool(tool.name, tool.description, parameters))
        except UserError as exc:
            raise ApiError(422, f"{where}.name: {exc}") from None
    return out
