"""Google Gemini (``generateContent``) wire mapping: tether messages to ``contents`` and back.
Pure; no SDK import. JSON field names are the REST API's camelCase.

Mapping (docs/adr/0006-anthropic-gemini-wire.md):

* ``Text`` ↔ ``{"text"}``; ``Text.signature`` ↔ the part's ``thoughtSignature``.
* ``Reasoning`` ↔ ``{"text", "thought": true}`` (+ ``thoughtSignature``), ``provider="google"``.
* ``ToolCall`` ↔ ``functionCall`` (``args`` = parsed arguments) with its ``thoughtSignature``
  replayed byte for byte. Gemini often sends calls without ids: decoding makes deterministic ids
  (from the response id and part index, or the transcript position) and sending always includes
  ``id`` on calls and responses, so pairing survives the round trip.
* ``ToolResult`` ↔ ``functionResponse`` in a ``user`` turn: ``response`` is ``{"output": text}``
  (``{"error": text}`` when failed), or the text itself when it is a JSON object. Results with no
  id are paired with the earliest unanswered call of the same name.
* ``Image`` / ``Document`` ↔ ``inlineData`` (base64) or ``fileData`` (``fileUri``).
* Signatures travel as the base64 text they arrived in; the SDK decodes either alphabet to the
  same bytes. Signatures go back under the policy reasoning follows
  (:func:`~tether.models.wire.replays_reasoning`): only to Google (a text or call signature whose
  message names no provider is taken as Google's), for ``same-family`` profiles only to the family
  that made them, and never for a ``never`` profile.

Encoding is cached per message and profile (O(new messages) per step); returned dicts are shared
with that cache: treat them as read-only.
"""

from __future__ import annotations

import base64
import dataclasses
import mimetypes
import re
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

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
from tether.models.wire._common import (
    SYNTHESIZED_RESULT,
    TRUNCATED_ARGUMENTS,
    ConversionReport,
    LossRecord,
    best_profile,
    merged_turns,
    reasoning_refused,
    replays_from,
    replays_reasoning,
    wire_arguments,
)
from tether.models.wire._gemini_decode import (
    PROVIDER,
    StreamAccumulator,
    decode_messages,
    decode_response,
    decode_usage,
    normalize_stop_reason,
)
from tether.models.wire._memo import PerMessageCache

__all__ = [
    "FOREIGN_CALL_SIGNATURE",
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
FOREIGN_CALL_SIGNATURE: Final = base64.b64encode(b"context_engineering_is_the_way_to_go").decode()
"""The signature Google documents for function calls that no Gemini model produced (e.g. history
from another provider); thinking models reject a call turn whose first call carries none."""

_BASE = Profile(
    provider=PROVIDER,
    family="gemini",
    images=True,
    image_urls=True,
    documents=True,
    document_urls=True,
    tool_result_media=False,
    reasoning_replay="same-family",
)
PROFILES: Final[tuple[Profile, ...]] = (
    Profile(provider=PROVIDER, family="gemini-1.5", documents=True, document_urls=True),
    Profile(provider=PROVIDER, family="gemini-2.0", documents=True, document_urls=True),
    dataclasses.replace(_BASE, family="gemini-2.5"),
    dataclasses.replace(_BASE, family="gemini-3"),
    _BASE,
)
"""Capability profiles per model family (longest matching prefix wins). The thinking models
(2.5, 3 and later) replay thoughts and signatures from their own family only (``same-family``); a
later model not listed gets the ``gemini`` profile with its own family, ``gemini-<major>``.
Media in function responses is not sent."""
_FAMILY = re.compile(r"gemini-\d+")

_json_object = msgspec.json.Decoder(dict[str, Any])
_UNSIGNED: Final = "the profile does not take signatures from this message's provider or family"

Encoded = tuple[str, tuple[JSON, ...], tuple[LossRecord, ...]]  # (role, parts, losses)


def profile_for(model: str) -> Profile:
    """The capability profile of a Gemini model name (longest family prefix wins)."""
    name = model.removeprefix("models/")
    best = best_profile(PROFILES, name, _BASE)
    if best is _BASE and (family := _FAMILY.match(name)) is not None:
        return dataclasses.replace(_BASE, family=family[0])
    return best


# -- encoding ------------------------------------------------------------------------------------
def encode_messages(
    messages: Sequence[Message],
    *,
    profile: Profile | None = None,
    cache: PerMessageCache[Encoded] | None = None,
) -> tuple[list[JSON], ConversionReport]:
    """Tether messages → the request's ``contents``, plus what could not be carried.

    ``profile`` decides reasoning replay; ``None`` means the default Gemini profile (thoughts from
    Google are replayed), the right choice for exporting a transcript. Tool messages and a user
    message right after them share one ``user`` turn, function responses first.
    ``cache`` (a driver's own) memoizes each message's encoding per profile: the returned dicts
    are then shared with it and read-only; without one every call returns fresh dicts.
    """
    return merged_turns(
        messages, encode_per_message(messages, profile=profile, cache=cache), key="parts", api="Gemini"
    )


def encode_per_message(
    messages: Sequence[Message],
    *,
    profile: Profile | None = None,
    cache: PerMessageCache[Encoded] | None = None,
) -> list[Encoded]:
    """``(role, parts, losses)`` for each message, before turns are merged (what
    :func:`encode_messages` merges; a driver that converts the parts further caches per message)."""
    target = profile or _BASE
    if cache is None:
        return [_encode_message(message, target) for message in messages]
    return cache.encode(messages, target, _encode_message)


def _encode_message(message: Message, profile: Profile) -> Encoded:
    losses: list[LossRecord] = []
    if message.role == "system":
        losses.append((None, "dropped", "system message", "Gemini takes instructions as systemInstruction"))
        return "system", (), tuple(losses)
    if message.role == "tool":
        parts = tuple(_encode_result(pi, r, losses) for pi, r in enumerate(message.tool_results))
        return "user", parts, tuple(losses)
    # Text and call signatures exist only in Gemini's format (and Gemini through OpenAI-compatible
    # servers), so one whose message names no provider (an imported transcript) is taken as
    # Google's; the replay policy is the one reasoning follows, ``never`` included.
    signed = replays_from(message.provider or PROVIDER, message, profile)
    out: list[JSON] = []
    placeholder = not signed and profile.reasoning_replay != "never"
    for pi, part in enumerate(message.parts):
        encoded = _encode_part(pi, part, message, profile, signed, losses)
        if encoded is None:
            continue
        if placeholder and "functionCall" in encoded:
            # Thinking Gemini models reject a call turn whose first call has no signature; for
            # calls another provider made, Google documents this placeholder signature.
            encoded = {**encoded, "thoughtSignature": FOREIGN_CALL_SIGNATURE}
            losses.append(
                (pi, "approximated", "signature", "placeholder for a call from another provider or family")
            )
            placeholder = False
        out.append(encoded)
    return ("model" if message.role == "assistant" else "user"), tuple(out), tuple(losses)


def _sign(pi: int, entry: JSON, signature: str | None, signed: bool, losses: list[LossRecord]) -> JSON:
    if signature is not None:
        if signed:
            entry["thoughtSignature"] = signature
        else:
            losses.append((pi, "dropped", "signature", _UNSIGNED))
    return entry


def _encode_part(
    pi: int, part: Part, message: Message, profile: Profile, signed: bool, losses: list[LossRecord]
) -> JSON | None:
    if type(part) is Text:
        return _sign(pi, {"text": part.text}, part.signature, signed, losses)
    if type(part) is Reasoning:
        if not replays_reasoning(part, message, profile):
            losses.append((pi, "dropped", "reasoning", reasoning_refused(part, profile)))
            return None
        if part.redacted:
            losses.append((pi, "dropped", "reasoning", "Gemini has no redacted thoughts"))
            return None
        # replays_reasoning passed: the thought's own signature goes with it
        return _sign(pi, {"text": part.text, "thought": True}, part.signature, True, losses)
    if type(part) is ToolCall:
        call: JSON = {"name": part.name, "args": _json_object.decode(wire_arguments(part))}
        if part.id is not None:
            call["id"] = part.id
        else:
            losses.append((pi, "approximated", "tool call id", "none: an import gives it a positional id"))
        if part.truncated:
            losses.append((pi, "approximated", "tool call arguments", TRUNCATED_ARGUMENTS))
        return _sign(pi, {"functionCall": call}, part.signature, signed, losses)
    if type(part) is Image or type(part) is Document:
        return _encode_media(pi, part, losses)
    losses.append((pi, "dropped", type(part).__name__, "no Gemini equivalent"))  # pragma: no cover
    return None  # pragma: no cover


def _encode_media(pi: int, part: Image | Document, losses: list[LossRecord]) -> JSON:
    if type(part) is Document and part.title is not None:
        losses.append((pi, "dropped", "document title", "Gemini parts carry no title"))
    if type(part) is Document and (part.media_type or "").startswith("image/"):
        losses.append((pi, "approximated", "document", "Gemini reads image/* data back as an image"))
    if type(part) is Image and part.media_type and not part.media_type.startswith("image/"):
        losses.append((pi, "approximated", "image", f"Gemini reads {part.media_type} back as a document"))
    if part.url is not None:
        file: JSON = {"fileUri": part.url}
        media_type = part.media_type
        if not media_type:  # Gemini wants a MIME type for file URIs: guess it from the path
            media_type = mimetypes.guess_type(urlsplit(part.url).path)[0]
            reason = f"guessed as {media_type}" if media_type else "unknown; sent without one"
            losses.append((pi, "approximated", "media type", reason))
        if media_type:
            file["mimeType"] = media_type
        return {"fileData": file}
    data = base64.b64encode(part.data or b"").decode()
    return {"inlineData": {"data": data, "mimeType": part.media_type}}


def _encode_result(pi: int, result: ToolResult, losses: list[LossRecord]) -> JSON:
    for item in result.content:
        if not isinstance(item, Text):
            kind = type(item).__name__.lower()
            losses.append((pi, "dropped", f"{kind} in tool result", "Gemini function responses take JSON"))
    if result.synthesized:
        losses.append((pi, "approximated", "synthesized flag", SYNTHESIZED_RESULT))
    if sum(1 for item in result.content if isinstance(item, Text)) > 1:
        losses.append((pi, "approximated", "text parts", "joined into one text by newlines"))
    if any(isinstance(item, Text) and item.signature is not None for item in result.content):
        losses.append((pi, "dropped", "text signature", "Gemini function responses carry no signatures"))
    text = result.text
    response: JSON
    if result.failed:
        response = {"error": text}
    else:
        try:
            response = _json_object.decode(text)
        except (msgspec.DecodeError, RecursionError):  # not an object, or nested past the decoder
            response = {"output": text}
    function_response: JSON = {"name": result.name, "response": response}
    if result.call_id:
        function_response["id"] = result.call_id
    return {"functionResponse": function_response}
