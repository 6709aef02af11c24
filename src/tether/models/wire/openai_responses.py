"""OpenAI Responses API wire mapping: tether messages to ``input`` items and back.

Stateless mode: every request carries the whole conversation. Reasoning items come back with
``encrypted_content`` (requested with ``include=["reasoning.encrypted_content"]``) and are replayed
item by item, byte for byte, together with the ``fc_…`` / ``msg_…`` ids of the items that followed
them (the API rejects a reasoning item without its following item).

Mapping (one tether assistant message may span several items):

* ``Text`` (user/system) ↔ ``input_text``; a lone text is sent as a plain string ``content``.
* ``Text`` (assistant) ↔ ``output_text`` inside a ``message`` item. The item id (``msg_…``) is
  kept in ``Text.provider_id`` of the first text of that item; consecutive texts without an id share
  one item.
* ``Reasoning`` ↔ ``reasoning`` item: one part per ``summary`` entry, all with
  ``provider_id`` = the ``rs_…`` id; the first carries ``encrypted_content`` as ``signature``.
* ``ToolCall`` ↔ ``function_call`` (``id`` → ``call_id``, ``provider_id`` → ``id``).
* ``ToolResult`` ↔ ``function_call_output``; the tool name is recovered from the paired call.
* ``Image``/``Document`` ↔ ``input_image``/``input_file`` (URL or base64 data URL).

Indices in a ``ConversionReport``: on export they are tether message/part indices; on import
they are the source item index and its content index.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from tether.messages import Document, Image, Message, Part, Reasoning, Text, ToolCall, ToolResult
from tether.models._base import (
    Profile,
    ToolDefinition,
)
from tether.models.wire._common import (
    SYNTHESIZED_RESULT,
    TRUNCATED_ARGUMENTS,
    ConversionReport,
    LossRecord,
    replays_reasoning,
    wire_arguments,
)
from tether.models.wire._memo import PerMessageCache
from tether.models.wire._openai_responses_decode import PROVIDER, decode_messages, decode_response
from tether.models.wire._openai_responses_stream import StreamAccumulator

__all__ = [
    "PROVIDER",
    "REASONING_FAMILIES",
    "StreamAccumulator",
    "decode_messages",
    "decode_response",
    "default_profile",
    "encode_messages",
    "encode_tools",
]

REASONING_FAMILIES = ("o1", "o3", "o4", "gpt-5", "codex")

Item = dict[str, Any]


def default_profile(model: str = "") -> Profile:
    """The capability profile for a Responses model name. Reasoning models replay reasoning from
    their own family (``o3``, ``gpt-5``…: ``same-family``); other models never receive reasoning
    items."""
    reasoning = model.startswith(REASONING_FAMILIES)
    family = next((f for f in REASONING_FAMILIES if model.startswith(f)), model.split("-", 1)[0])
    return Profile(
        provider=PROVIDER,
        family=family,
        images=True,
        image_urls=True,
        documents=True,
        document_urls=True,
        tool_result_media=True,
        reasoning_replay="same-family" if reasoning else "never",
        parallel_tool_calls=True,
        streaming=True,
    )


_CONVERT_PROFILE = Profile(
    provider=PROVIDER,
    documents=True,
    document_urls=True,
    tool_result_media=True,
    reasoning_replay="same-provider",
)


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------


Encoded = tuple[tuple[Item, ...], tuple[LossRecord, ...]]
"""One message's items and the losses recorded while encoding it (what a driver's cache holds)."""


def encode_messages(
    messages: Sequence[Message],
    *,
    profile: Profile | None = None,
    cache: PerMessageCache[Encoded] | None = None,
) -> tuple[list[Item], ConversionReport]:
    """Messages → Responses ``input`` items.

    With a ``profile`` (what the driver passes) the items are a stateless ``store=false``
    request: reasoning is replayed as the profile allows and only with its ``encrypted_content``,
    and item ids (``msg_…``, ``fc_…``) are sent only on the items paired with a replayed reasoning
    item — the API resolves no other id when nothing is stored. ``cache`` memoizes each message's
    items (shared with it: read-only). ``profile=None`` is a format conversion: every OpenAI
    reasoning part with an ``rs_…`` id and every item id is kept, in fresh dicts."""
    report = ConversionReport()
    items: list[Item] = []
    if profile is None:
        for mi, message in enumerate(messages):
            _encode_one(message, mi, None, items, report)
        return items, report
    encoded = (
        [_encode_alone(message, profile) for message in messages]
        if cache is None
        else cache.encode(messages, profile, _encode_alone)
    )
    for mi, (message_items, losses) in enumerate(encoded):
        items.extend(message_items)
        if losses:
            report.extend(mi, losses)
    return items, report


def _encode_alone(message: Message, profile: Profile) -> Encoded:
    report = ConversionReport()
    items: list[Item] = []
    _encode_one(message, 0, profile, items, report)
    return tuple(items), tuple((loss.part, loss.kind, loss.what, loss.reason) for loss in report.losses)


def _encode_one(
    message: Message, mi: int, profile: Profile | None, items: list[Item], report: ConversionReport
) -> None:
    if message.role == "assistant":
        _encode_assistant(message, mi, profile, items, report)
    elif message.role == "tool":
        _encode_tool(message, mi, items, report)
    else:
        items.append({"role": message.role, "content": _encode_input_content(message.parts, mi, report)})


_UNPAIRED = "its reasoning item is not replayed"


class _Ids:
    """Which item ids an assistant message sends.

    A format conversion keeps every id unless OpenAI reasoning of the message is left out (the
    API rejects an item whose reasoning item is missing). A stateless request sends an id only on
    the items that follow a replayed reasoning item: with ``store=false`` the API resolves no
    other id ("Item with id … not found"), and the items a reasoning item is paired with are the
    ones after it in the same response."""

    def __init__(self, message: Message, replayed: list[bool], *, stateless: bool) -> None:
        self.stateless = stateless
        self.refused = any(
            type(p) is Reasoning and not ok and (p.provider or message.provider) == PROVIDER
            for p, ok in zip(message.parts, replayed, strict=True)
        )
        self.paired = False  # stateless: the last reasoning item of this message was replayed
        self.after_refused = False  # stateless: ... or was left out

    def reasoning(self, replayed: bool) -> None:
        self.paired = replayed
        self.after_refused = not replayed

    def keep(self) -> bool:
        return self.paired if self.stateless else not self.refused

    def reported(self) -> bool:
        """Whether leaving an id out is a loss worth reporting (its reasoning was left out)."""
        return self.after_refused if self.stateless else self.refused


def _replayed_parts(message: Message, profile: Profile | None) -> list[bool]:
    """Per part: whether it is a reasoning part that goes on the wire. Stateless requests need
    the item's ``encrypted_content`` (carried by the item's first part)."""
    target = profile or _CONVERT_PROFILE
    out: list[bool] = []
    item: str | None = None
    item_ok = False
    for part in message.parts:
        if type(part) is not Reasoning:
            item = None
            out.append(False)
            continue
        ok = bool(part.provider_id) and replays_reasoning(part, message, target)
        starts = item is None or part.provider_id != item or part.signature is not None
        if starts:
            item = part.provider_id
            item_ok = ok and (profile is None or part.signature is not None)
        out.append(ok and item_ok)
    return out


def _encode_assistant(
    message: Message, mi: int, profile: Profile | None, items: list[Item], report: ConversionReport
) -> None:
    replayed = _replayed_parts(message, profile)
    ids = _Ids(message, replayed, stateless=profile is not None)
    start = len(items)
    text_item: Item | None = None
    reasoning_item: Item | None = None
    for pi, part in enumerate(message.parts):
        if type(part) is not Text:
            text_item = None
        if type(part) is not Reasoning:
            reasoning_item = None
        if type(part) is Text:
            if part.signature is not None:
                report.drop(mi, pi, "text signature", "OpenAI Responses has no place for a text signature")
            # a text with an id starts a new message item, sent with its id or not
            if text_item is None or part.provider_id is not None:
                text_item = {"type": "message", "role": "assistant", "content": []}
                if part.provider_id is not None:
                    if ids.keep():
                        text_item["id"] = part.provider_id
                        text_item["status"] = "completed"
                    elif ids.reported():
                        report.approximate(mi, pi, "message item id", _UNPAIRED)
                items.append(text_item)
            text_item["content"].append({"type": "output_text", "text": part.text, "annotations": []})
        elif type(part) is Reasoning:
            if not replayed[pi]:
                if reasoning_item is None or reasoning_item.get("id") != part.provider_id:
                    ids.reasoning(False)
                report.drop(mi, pi, "reasoning", _refusal(part, message, profile))
                reasoning_item = {"id": part.provider_id}  # a left-out item: its later parts follow it
                continue
            if (
                reasoning_item is not None
                and reasoning_item["id"] == part.provider_id
                and "summary" in reasoning_item
                and part.signature is None
            ):
                reasoning_item["summary"].append({"type": "summary_text", "text": part.text})
                continue
            ids.reasoning(True)
            reasoning_item = {"type": "reasoning", "id": part.provider_id, "summary": []}
            reasoning_item["summary"].append({"type": "summary_text", "text": part.text})
            if part.signature is not None:
                reasoning_item["encrypted_content"] = part.signature
            items.append(reasoning_item)
        elif type(part) is ToolCall:
            _encode_call(part, mi, pi, ids, items, report)
        else:
            kind = type(part).__name__.lower()
            report.drop(mi, pi, kind, f"OpenAI Responses assistant messages cannot carry a {kind}")
    for index in range(start, len(items)):
        item = items[index]
        if item["type"] == "reasoning" and item["summary"] == [{"type": "summary_text", "text": ""}]:
            item["summary"] = []  # a reasoning item without summary text is one empty part
        elif item["type"] == "message" and "id" not in item and len(item["content"]) == 1:
            items[index] = {"role": "assistant", "content": item["content"][0]["text"]}  # the short form


def _refusal(part: Reasoning, message: Message, profile: Profile | None) -> str:
    """Why a reasoning part is not sent."""
    if not part.provider_id:
        return "reasoning without an item id (rs_…) cannot be sent"
    source = part.provider or message.provider or "an unknown provider"
    target = profile or _CONVERT_PROFILE
    if replays_reasoning(part, message, target):  # only the encrypted content is missing
        return "reasoning without encrypted_content cannot be resolved when store=false"
    return f"reasoning from {source} is not replayed to this {target.provider} model"


def _encode_call(
    part: ToolCall, mi: int, pi: int, ids: _Ids, items: list[Item], report: ConversionReport
) -> None:
    if part.id is None:
        report.drop(mi, pi, "tool call", "a function_call needs a call_id; this call has no id")
        return
    item: Item = {"type": "function_call", "call_id": part.id, "name": part.name}
    item["arguments"] = wire_arguments(part)
    if part.truncated:
        report.approximate(mi, pi, "tool call arguments", TRUNCATED_ARGUMENTS)
    if part.provider_id is not None:
        if not part.provider_id.startswith("fc"):
            report.drop(mi, pi, "tool call provider id", "not an OpenAI Responses function_call id")
        elif ids.keep():
            item["id"] = part.provider_id
        elif ids.reported():
            report.approximate(mi, pi, "function_call id", _UNPAIRED)
    if part.signature is not None:
        report.drop(mi, pi, "tool call signature", "OpenAI Responses has no place for a call signature")
    items.append(item)


def _encode_tool(message: Message, mi: int, items: list[Item], report: ConversionReport) -> None:
    for pi, part in enumerate(message.parts):
        assert type(part) is ToolResult
        content = part.content
        output: str | list[Item]
        if not content:
            output = ""
        elif len(content) == 1 and type(content[0]) is Text:
            if content[0].signature is not None:
                report.drop(mi, pi, "text signature", "OpenAI Responses has no place for a text signature")
            output = content[0].text
        else:
            output = _encode_input_parts(content, mi, report, pi)
        if part.failed:
            report.approximate(mi, pi, "failed flag", "sent as an ordinary result (no error field)")
        if part.synthesized:
            report.approximate(mi, pi, "synthesized flag", SYNTHESIZED_RESULT)
        items.append({"type": "function_call_output", "call_id": part.call_id, "output": output})


def _encode_input_content(parts: Sequence[Part], mi: int, report: ConversionReport) -> str | list[Item]:
    if len(parts) == 1 and type(parts[0]) is Text:
        if parts[0].signature is not None:
            report.drop(mi, 0, "text signature", "OpenAI Responses has no place for a text signature")
        return parts[0].text
    return _encode_input_parts(parts, mi, report)


def _encode_input_parts(
    parts: Sequence[Part], mi: int, report: ConversionReport, fixed_part: int | None = None
) -> list[Item]:
    out: list[Item] = []
    for index, part in enumerate(parts):
        pi = index if fixed_part is None else fixed_part
        if type(part) is Text:
            if part.signature is not None:
                report.drop(mi, pi, "text signature", "OpenAI Responses has no place for a text signature")
            out.append({"type": "input_text", "text": part.text})
        elif type(part) is Image:
            if part.url is not None:
                if part.media_type is not None:
                    report.drop(mi, pi, "image media type", "image URLs carry no media type")
                url = part.url
            else:
                url = _data_url(part.media_type or "", part.data or b"")
            out.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif type(part) is Document:
            if part.url is not None:
                item: Item = {"type": "input_file", "file_url": part.url}
                if part.title is not None:
                    item["filename"] = part.title
                if part.media_type is not None:
                    report.drop(mi, pi, "document media type", "file URLs carry no media type")
            else:
                filename = part.title
                if filename is None:
                    filename = "document"
                    report.approximate(mi, pi, "document filename", "inline files need one; sent 'document'")
                item = {
                    "type": "input_file",
                    "filename": filename,
                    "file_data": _data_url(part.media_type or "", part.data or b""),
                }
            out.append(item)
        else:  # a part the role cannot hold is rejected by Message itself
            report.drop(mi, pi, type(part).__name__.lower(), "not valid in this message")
    return out


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def encode_tools(tools: Sequence[ToolDefinition]) -> list[Item]:
    """Tool definitions → Responses ``function`` tools. ``strict`` defaults to ``False`` (the API
    would otherwise assume strict schemas)."""
    out: list[Item] = []
    for tool in tools:
        item: Item = {"type": "function", "name": tool.name, "parameters": tool.parameters}
        if tool.description:
            item["description"] = tool.description
        item["strict"] = bool(tool.strict)
        out.append(item)
    return out
