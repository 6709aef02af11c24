"""What an MCP tool becomes in tether: its guarantees (from annotations, overridable) and its
results (MCP content blocks as tether result parts, with a report of what could not be carried)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as mt
from jsonschema import exceptions as schema_errors
from jsonschema import validators as schema_validators

from tether.errors import UserError
from tether.messages import Document, Image, ResultPart, Text, ToolResult
from tether.models.wire import ConversionReport

__all__ = ["ApprovalPolicy", "ToolPolicy", "policy_for", "tether_name", "to_result"]

log = logging.getLogger("tether.integrations.mcp")

ApprovalPolicy = Literal["destructive", "all", "none"]
"""Which tools of a server pause the run for approval: those that may be destructive (the
default), every tool, or none."""

_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How tether treats one MCP tool; ``None`` keeps what the server's annotations say.

    ``idempotent=False`` puts its calls under the tool-effect ledger (a resumed run never calls it
    blindly twice); ``requires_approval=True`` pauses the run for a signed approval first;
    ``enabled=False`` hides the tool from the model.
    """

    idempotent: bool | None = None
    requires_approval: bool | None = None
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class Guarantees:
    idempotent: bool
    requires_approval: bool


def policy_for(tool: mt.Tool, approval: ApprovalPolicy, override: ToolPolicy | None) -> Guarantees:
    """The annotations read as the MCP specification defines their defaults: a tool is read-only
    only when it says so; a tool that is not read-only may be destructive unless it says
    ``destructiveHint: false``. Read-only or idempotent tools are idempotent; the others are side
    effects under the ledger; possibly destructive ones need approval (``approval="destructive"``)."""
    notes = tool.annotations
    read_only = bool(notes and notes.read_only_hint)
    idempotent = read_only or bool(notes and notes.idempotent_hint)
    destructive = not read_only and (notes is None or notes.destructive_hint is not False)
    if approval == "all":
        needs = True
    elif approval == "none":
        needs = False
    else:
        needs = destructive
    if override is not None:
        if override.idempotent is not None:
            idempotent = override.idempotent
        if override.requires_approval is not None:
            needs = override.requires_approval
    return Guarantees(idempotent=idempotent, requires_approval=needs)


def tether_name(prefix: str | None, name: str) -> str:
    """The name the model sees: ``prefix_name`` with characters providers refuse replaced by
    ``_`` (MCP allows ``.`` and ``/``; OpenAI-style APIs do not), at most 64 characters."""
    full = f"{prefix}_{name}" if prefix else name
    cleaned = "".join(ch if ch in _NAME_OK else "_" for ch in full)
    if not cleaned:
        raise UserError(f"the MCP tool name {name!r} has no usable character")
    return cleaned[:64]


def _decoded(data: str, what: str, report: ConversionReport, index: int) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        report.drop(0, index, what, "its data is not valid base64")
        return None


def _block(block: Any, index: int, report: ConversionReport) -> ResultPart | None:
    if isinstance(block, mt.TextContent):
        return Text(block.text)
    if isinstance(block, mt.ImageContent):
        data = _decoded(block.data, "image", report, index)
        return None if data is None else Image(data=data, media_type=block.mime_type)
    if isinstance(block, mt.AudioContent):
        report.drop(0, index, f"audio ({block.mime_type})", "tether's results carry no audio")
        return None
    if isinstance(block, mt.ResourceLink):
        report.approximate(0, index, "resource link", "shown as its URI; the resource is not fetched")
        title = f" ({block.name})" if block.name else ""
        return Text(f"[resource {block.uri}{title}]")
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        if isinstance(res, mt.TextResourceContents):
            return Text(res.text)
        mime = res.mime_type or "application/octet-stream"
        data = _decoded(res.blob, f"resource {res.uri}", report, index)
        if data is None:
            return None
        if mime.startswith("image/"):
            return Image(data=data, media_type=mime)
        if mime == "application/pdf":
            return Document(data=data, media_type=mime, title=str(res.uri))
        report.drop(0, index, f"resource {res.uri} ({mime})", "binary content other than images and PDF")
        return None
    report.drop(0, index, f"content of type {getattr(block, 'type', '?')!r}", "unknown to tether")
    return None


def to_result(
    server: str, tool: str, result: mt.CallToolResult, *, call_id: str = "", name: str = ""
) -> ToolResult:
    """``result`` as a tether ``ToolResult`` (``isError`` → ``failed``). Structured content is
    shown as JSON text when no text block carries it. What could not be carried is logged and
    said in the result, so the model knows something was left out."""
    report = ConversionReport()
    parts: list[ResultPart] = []
    for index, block in enumerate(result.content):
        part = _block(block, index, report)
        if part is not None:
            parts.append(part)
    if result.structured_content is not None and not any(type(p) is Text for p in parts):
        parts.append(Text(json.dumps(result.structured_content, ensure_ascii=False)))
    if not report.lossless:
        lost = "; ".join(f"{loss.what}: {loss.reason}" for loss in report.losses)
        log.warning("MCP server %s, tool %s: result not fully carried: %s", server, tool, lost)
        parts.append(Text(f"[tether could not carry part of this result: {lost}]"))
    return ToolResult(call_id, name or tool, tuple(parts), failed=result.is_error)


def check_against(schema: Mapping[str, Any]) -> Callable[[dict[str, Any]], str | None] | None:
    """A check of decoded arguments against ``schema`` (JSON Schema, as the MCP SDK validates);
    an unusable schema checks nothing (the server validates)."""
    try:
        validator_class = schema_validators.validator_for(schema)  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        validator: Any = validator_class(schema)
    except Exception:  # an invalid schema: the server is the judge
        return None

    def check(arguments: dict[str, Any]) -> str | None:
        best: Any = schema_errors.best_match  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        error: Any = best(validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path) or "(the object)"
        return f"at {where}: {error.message}"

    return check
