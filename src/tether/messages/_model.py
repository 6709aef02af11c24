"""The provider-neutral, immutable message model.

Every value is a frozen ``msgspec.Struct``: parts and messages can be shared between runs,
threads and stores without copying. Sequences are tuples; constructors accept lists and store
tuples. The JSON shape is the durable contract described in docs/adr/0001-message-contract.md.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, cast

import msgspec
from msgspec.structs import force_setattr

from tether.errors import DecodeError, UserError

__all__ = [
    "ROLES",
    "Document",
    "Image",
    "Message",
    "Part",
    "Reasoning",
    "ResultPart",
    "Role",
    "Text",
    "ToolCall",
    "ToolResult",
    "Usage",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")

_json_object_decoder = msgspec.json.Decoder(dict[str, Any])


class _Part(msgspec.Struct, frozen=True, tag_field="type", rename="camel", omit_defaults=True):
    """Base of every part. ``type`` is the JSON discriminator."""


class Text(_Part, frozen=True, tag="text"):
    """Plain text. ``signature`` is an opaque provider token attached to the text (Gemini);
    ``provider_id`` the provider's item id (OpenAI Responses ``msg_…``), replayed where needed."""

    text: str
    signature: str | None = None
    provider_id: str | None = None


def _check_media(kind: str, part: Image | Document) -> None:
    if (part.data is None) == (part.url is None):
        raise UserError(f"{kind} needs exactly one of data or url")
    if part.data is not None and not part.media_type:
        raise UserError(f"{kind} with inline data needs a media_type")


class Image(_Part, frozen=True, tag="image"):
    """An image given inline (``data``) or by ``url`` — exactly one of them."""

    data: bytes | None = None
    url: str | None = None
    media_type: str | None = None

    def __post_init__(self) -> None:
        _check_media("Image", self)


class Document(_Part, frozen=True, tag="document"):
    """A document (e.g. ``application/pdf``) given inline or by ``url`` — exactly one of them."""

    data: bytes | None = None
    url: str | None = None
    media_type: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        _check_media("Document", self)


class ToolCall(_Part, frozen=True, tag="tool-call"):
    """A model's request to run a tool.

    ``arguments`` is the raw JSON text exactly as the model produced it — kept verbatim even when
    it is not valid JSON (a stream that died mid-arguments). ``id`` may be ``None`` for providers
    or transcripts that did not give one; such calls cannot be paired. ``signature`` is an opaque
    provider token (Gemini thought signatures); ``provider_id`` the provider's own item id
    (OpenAI Responses ``fc_…``), replayed where the provider wants it.
    """

    id: str | None
    name: str
    arguments: str = "{}"
    signature: str | None = None
    provider_id: str | None = None

    @property
    def truncated(self) -> bool:
        """True when ``arguments`` is not a JSON object whose every value tether holds: text cut
        short, another JSON value, a lone surrogate (no JSON encoding carries it), or a number
        no encoder can write back as it came (``1e999``, an integer of 4,300 digits and more).
        Such arguments travel as ``{"truncated_args": "<verbatim text>"}`` (ADR 0005, 0021)."""
        try:
            _json_object_decoder.decode(self.arguments)
        except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
            return True
        return False

    def args(self) -> dict[str, Any]:
        """The arguments parsed as a JSON object; ``DecodeError`` names the call when they are
        not one (exactly when ``truncated`` is true)."""
        try:
            return _json_object_decoder.decode(self.arguments)
        except (msgspec.DecodeError, RecursionError) as exc:
            problem = str(exc)
        except UnicodeEncodeError as exc:
            problem = f"a lone surrogate at character {exc.start} is not valid Unicode"
        raise DecodeError(
            f"arguments of tool call {self.id!r} ({self.name}) are not a JSON object: {problem}"
        )


ResultPart: TypeAlias = Text | Image | Document


class ToolResult(_Part, frozen=True, tag="tool-result"):
    """The outcome of one tool call. ``failed`` marks a definitive failure; ``synthesized`` marks
    a result tether wrote because the real one is missing (repair, cancellation, step limits)."""

    call_id: str
    name: str
    content: tuple[ResultPart, ...] = ()
    failed: bool = False
    synthesized: bool = False

    def __post_init__(self) -> None:
        given: Any = self.content
        if type(given) is tuple:
            for item in cast(tuple[object, ...], given):  # decode path: msgspec built typed parts
                if type(item) not in _RESULT_PART_TYPES:
                    break
            else:
                return
        if isinstance(given, str):
            given = (given,)
        content = tuple(Text(c) if isinstance(c, str) else c for c in cast("tuple[object, ...]", given))
        for item in content:
            if type(item) not in _RESULT_PART_TYPES:
                raise UserError(
                    f"tool result content takes Text, Image or Document, not {type(item).__name__}"
                )
        force_setattr(self, "content", content)

    @property
    def text(self) -> str:
        """The text parts of the content, joined by newlines."""
        return "\n".join(p.text for p in self.content if isinstance(p, Text))


class Reasoning(_Part, frozen=True, tag="reasoning"):
    """Model reasoning. ``signature`` (or a redacted/encrypted payload) is opaque and survives
    every round trip byte for byte; ``provider`` says who can verify it; ``provider_id`` is the
    provider's item id (OpenAI Responses ``rs_…``)."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    provider: str | None = None
    provider_id: str | None = None


Part: TypeAlias = Text | Image | Document | ToolCall | ToolResult | Reasoning
_RESULT_PART_TYPES: frozenset[type] = frozenset({Text, Image, Document})


class Usage(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """Token usage. Adds up with ``+``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


_ALLOWED: dict[str, frozenset[type]] = {
    "system": frozenset({Text}),
    "user": frozenset({Text, Image, Document}),
    "assistant": frozenset({Text, Image, Document, ToolCall, Reasoning}),
    "tool": frozenset({ToolResult}),
}


class Message(
    msgspec.Struct,
    frozen=True,
    rename="camel",
    omit_defaults=True,
    weakref=True,
    cache_hash=True,
):
    """One message of a conversation.

    ``run_id`` / ``conversation_id`` are identity stamps added by the run that produced the
    message. ``provider``, ``model``, ``stop_reason``, ``usage`` and ``response_id`` describe the
    response an assistant message came from. There are no timestamps: repair synthesizes
    messages deterministically.
    """

    role: Role
    parts: tuple[Part, ...] = ()
    run_id: str | None = None
    conversation_id: str | None = None
    provider: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None
    response_id: str | None = None

    def __post_init__(self) -> None:
        parts: tuple[object, ...] = self.parts
        allowed = _ALLOWED.get(self.role)
        if type(parts) is tuple and allowed is not None:
            for part in parts:  # the decode path: one type check per part
                if type(part) not in allowed:
                    break
            else:
                return
        if type(parts) is not tuple:
            given: Any = parts
            if isinstance(given, str | bytes):
                raise UserError("Message parts must be a sequence of parts, not a string")
            parts = tuple[object, ...](given)
            force_setattr(self, "parts", parts)
        if allowed is None:
            raise UserError(f"unknown role {self.role!r}; expected one of {', '.join(ROLES)}")
        for index, part in enumerate(parts):
            if type(part) not in allowed:
                raise UserError(f"part {index} ({_kind(part)}) is not allowed in a {self.role} message")

    # -- convenient views ---------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The text parts joined (no separator): what a person reads as the message."""
        return "".join(p.text for p in self.parts if type(p) is Text)

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if type(p) is ToolCall)

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(p for p in self.parts if type(p) is ToolResult)


def _kind(part: object) -> str:
    tag = getattr(type(part), "__struct_config__", None)
    if tag is not None and isinstance(tag.tag, str):
        return tag.tag
    return type(part).__name__
