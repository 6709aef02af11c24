"""Anthropic Messages wire mapping: tether messages to ``messages`` and back. Pure; no SDK import.

Mapping (docs/adr/0006-anthropic-gemini-wire.md):

* ``Text`` ↔ ``text`` block. Empty assistant text is dropped (the API rejects empty blocks).
* ``Image`` / ``Document`` ↔ ``image`` / ``document`` block with a ``base64`` or ``url`` source;
  a ``text/plain`` document travels as a ``text`` source (its bytes decoded as UTF-8).
* ``Reasoning`` ↔ ``thinking`` (text + ``signature``) or ``redacted_thinking`` (``data`` kept in
  ``signature``, ``redacted=True``), replayed unchanged where the profile allows it.
* ``ToolCall`` ↔ ``tool_use`` (``input`` is the parsed arguments; arguments that are not a JSON
  object are sent as ``{"truncated_args": "<verbatim>"}``).
* ``ToolResult`` ↔ ``tool_result`` (``is_error`` = ``failed``). One text becomes a string
  ``content``; several parts or media become a block list. Tool messages and a user message
  right after them are merged into one user turn, results first, as the API requires.
* ``system`` messages are not part of ``messages``: dropped and reported (the driver sends the
  run's instructions as the ``system`` field).

Encoding is cached per message and profile, so building the request at each step of a run costs
O(new messages). Returned dicts are shared with that cache: treat them as read-only.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from tether.messages import (
    Document,
    Image,
    Message,
    Part,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
)
from tether.models._base import Profile
from tether.models.wire._anthropic_decode import (
    PROVIDER,
    StreamAccumulator,
    decode_messages,
    decode_response,
    decode_usage,
    normalize_stop_reason,
)
from tether.models.wire._common import (
    SYNTHESIZED_RESULT,
    TRUNCATED_ARGUMENTS,
    ConversionReport,
    LossRecord,
    best_profile,
    fallback_id,
    merged_turns,
    reasoning_refused,
    replays_reasoning,
    wire_arguments,
)
from tether.models.wire._memo import PerMessageCache

__all__ = [
    "PROFILES",
    "PROVIDER",
    "StreamAccumulator",
    "decode_messages",
    "decode_response",
    "decode_usage",
    "encode_messages",
    "encode_per_message",
    "normalize_stop_reason",
    "profile_for",
]

JSON = dict[str, Any]

_DOCUMENT_TYPES = ("application/pdf", "text/*")  # text/* travels as a text/plain source

_BASE = Profile(
    provider=PROVIDER,
    family="claude",
    images=True,
    image_urls=True,
    documents=True,
    document_urls=True,
    document_types=_DOCUMENT_TYPES,
    tool_result_media=True,
    reasoning_replay="same-family",
)
PROFILES: Final[tuple[Profile, ...]] = (
    Profile(provider=PROVIDER, family="claude-3-opus", tool_result_media=True),
    Profile(provider=PROVIDER, family="claude-3-sonnet", tool_result_media=True),
    Profile(provider=PROVIDER, family="claude-3-haiku", tool_result_media=True),
    Profile(
        provider=PROVIDER,
        family="claude-3-5",
        documents=True,
        document_urls=True,
        document_types=_DOCUMENT_TYPES,
        tool_result_media=True,
    ),
    *(
        dataclasses.replace(_BASE, family=family)
        for family in ("claude-3-7-sonnet", "claude-sonnet-4", "claude-opus-4", "claude-haiku-4")
    ),
    _BASE,
)
"""Capability profiles per model family (longest matching prefix wins). Claude 3 models take no
documents and no thinking; 3.5 takes documents; 3.7, 4 and later replay signed thinking from their
own family only (``same-family``). A later model not listed gets the ``claude`` profile with its
own family, the name up to its major version (``claude-opus-5-1`` → ``claude-opus-5``)."""
_FAMILY = re.compile(r"claude-[a-z]+-\d+")

_TEXT_DOCUMENT: Final = "text/plain"
_ID_OK = re.compile(r"^[A-Za-z0-9_-]+$")
_ID_BAD = re.compile(r"[^A-Za-z0-9_-]")
_json_object = msgspec.json.Decoder(dict[str, Any])

Encoded = tuple[str, tuple[JSON, ...], tuple[LossRecord, ...]]  # (role, blocks, losses)


def profile_for(model: str) -> Profile:
    """The capability profile of an Anthropic model name (longest family prefix wins)."""
    best = best_profile(PROFILES, model, _BASE)
    if best is _BASE and (family := _FAMILY.match(model)) is not None:
        return dataclasses.replace(_BASE, family=family[0])
    return best


# -- encoding ------------------------------------------------------------------------------------
def encode_messages(
    messages: Sequence[Message],
    *,
    profile: Profile | None = None,
    cache: PerMessageCache[Encoded] | None = None,
) -> tuple[list[JSON], ConversionReport]:
    """Tether messages → the request's ``messages`` list, plus what could not be carried.

    ``profile`` decides reasoning replay; ``None`` means the default Claude profile (signed
    thinking from Anthropic is replayed), the right choice for exporting a transcript.
    ``cache`` (a driver's own) memoizes each message's encoding per profile: the returned dicts
    are then shared with it and read-only; without one every call returns fresh dicts.
    """
    return merged_turns(
        messages, encode_per_message(messages, profile=profile, cache=cache), key="content", api="Anthropic"
    )


def encode_per_message(
    messages: Sequence[Message],
    *,
    profile: Profile | None = None,
    cache: PerMessageCache[Encoded] | None = None,
) -> list[Encoded]:
    """``(role, content, losses)`` for each message, before turns are merged (what
    :func:`encode_messages` merges; a driver that converts the content further caches per message)."""
    target = profile or _BASE
    if cache is None:
        return [_encode_message(message, target) for message in messages]
    return cache.encode(messages, target, _encode_message)


def _encode_message(message: Message, profile: Profile) -> Encoded:
    losses: list[LossRecord] = []
    if message.role == "system":
        losses.append((None, "dropped", "system message", "Anthropic takes instructions as `system`"))
        return "system", (), tuple(losses)
    if message.role == "tool":
        blocks = tuple(_encode_result(pi, r, losses) for pi, r in enumerate(message.tool_results))
        return "user", blocks, tuple(losses)
    out: list[JSON] = []
    assistant = message.role == "assistant"
    for pi, part in enumerate(message.parts):
        block = _encode_part(pi, part, message, profile, losses, assistant=assistant)
        if block is not None:
            out.append(block)
    return message.role, tuple(out), tuple(losses)


def _encode_part(
    pi: int, part: Part, message: Message, profile: Profile, losses: list[LossRecord], *, assistant: bool
) -> JSON | None:
    if type(part) is Text:
        if part.signature is not None:
            losses.append((pi, "approximated", "text signature", "Anthropic text blocks carry no signature"))
        if assistant and not part.text:
            losses.append((pi, "dropped", "empty text", "Anthropic rejects empty text blocks"))
            return None
        return {"type": "text", "text": part.text}
    if type(part) is Reasoning:
        return _encode_reasoning(pi, part, message, profile, losses)
    if type(part) is ToolCall:
        return _encode_call(pi, part, losses)
    if type(part) is Image or type(part) is Document:
        if assistant:
            losses.append(
                (pi, "dropped", type(part).__name__.lower(), "Anthropic assistant turns hold no media")
            )
            return None
        return _encode_media(pi, part, losses)
    losses.append((pi, "dropped", type(part).__name__, "no Anthropic equivalent"))  # pragma: no cover
    return None  # pragma: no cover


def _encode_reasoning(
    pi: int, part: Reasoning, message: Message, profile: Profile, losses: list[LossRecord]
) -> JSON | None:
    if not replays_reasoning(part, message, profile):
        losses.append((pi, "dropped", "reasoning", reasoning_refused(part, profile)))
        return None
    if part.signature is None:
        losses.append((pi, "dropped", "reasoning", "unsigned thinking is rejected by Anthropic"))
        return None
    if part.redacted:
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def wire_id(call_id: str) -> str:
    """A call id in the alphabet Anthropic accepts (``[A-Za-z0-9_-]``); others are rewritten
    deterministically (bad characters to ``_`` plus a short hash) so calls and results agree."""
    if _ID_OK.match(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:8]
    return f"{_ID_BAD.sub('_', call_id)}_{digest}"


def _encode_call(pi: int, call: ToolCall, losses: list[LossRecord]) -> JSON:
    if call.id is None:
        call_id = fallback_id(pi, call.name, call.arguments, prefix="toolu_tether_")
        losses.append((pi, "approximated", "tool call id", "missing; a deterministic id was made"))
    else:
        call_id = wire_id(call.id)
        if call_id != call.id:
            losses.append((pi, "approximated", "tool call id", "rewritten to Anthropic's id alphabet"))
    if call.truncated:
        losses.append((pi, "approximated", "tool call arguments", TRUNCATED_ARGUMENTS))
    if call.signature is not None:
        losses.append((pi, "dropped", "tool call signature", "Anthropic tool_use carries no signature"))
    return {
        "type": "tool_use",
        "id": call_id,
        "name": call.name,
        "input": _json_object.decode(wire_arguments(call)),
    }


def _encode_result(pi: int, result: ToolResult, losses: list[LossRecord]) -> JSON:
    call_id = wire_id(result.call_id)
    block: JSON = {"type": "tool_result", "tool_use_id": call_id}
    content = result.content
    if len(content) == 1 and type(content[0]) is Text and content[0].signature is None:
        block["content"] = content[0].text
    elif content:
        items = [
            {"type": "text", "text": item.text} if isinstance(item, Text) else _encode_media(pi, item, losses)
            for item in content
        ]
        block["content"] = [item for item in items if item is not None]
    block["is_error"] = result.failed
    if result.synthesized:
        losses.append((pi, "approximated", "synthesized flag", SYNTHESIZED_RESULT))
    return block


def _encode_media(pi: int, part: Image | Document, losses: list[LossRecord]) -> JSON | None:
    kind = "image" if type(part) is Image else "document"
    if part.url is not None:
        if part.media_type is not None:
            losses.append((pi, "approximated", "media type", "Anthropic URL sources carry no media type"))
        block: JSON = {"type": kind, "source": {"type": "url", "url": part.url}}
    else:
        data = part.data or b""
        media_type = part.media_type or ""
        if kind == "document" and media_type.startswith("text/"):
            try:
                text = data.decode()
            except UnicodeDecodeError:
                losses.append((pi, "dropped", "document", f"{media_type} data is not UTF-8 text"))
                return None
            if media_type != _TEXT_DOCUMENT:
                losses.append((pi, "approximated", "document", f"{media_type} sent as text/plain"))
            block = {"type": kind, "source": {"type": "text", "media_type": _TEXT_DOCUMENT, "data": text}}
        else:
            encoded = base64.b64encode(data).decode()
            block = {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": encoded}}
    if type(part) is Document and part.title is not None:
        block["title"] = part.title
    return block
