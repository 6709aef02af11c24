"""The JSON bodies of the API as msgspec structs: decoded and validated at the boundary, and
the source of the OpenAPI document's schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from tether.messages import Message

__all__ = [
    "ID_PATTERN",
    "CancelOut",
    "CompactionList",
    "CompactionOut",
    "ConversationCreate",
    "ConversationCreated",
    "ConversationList",
    "ConversationOut",
    "ConversationSummary",
    "Decision",
    "DecisionsIn",
    "ErrorBody",
    "ErrorOut",
    "ExportOut",
    "ForkIn",
    "ImportIn",
    "ImportOut",
    "LossOut",
    "Me",
    "PauseOut",
    "PendingCallOut",
    "RunIn",
    "RunList",
    "RunOut",
]


ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(?!\n)$"
"""A conversation id a client chooses. ``(?!\n)`` because Python's ``$`` also matches before a
final newline (msgspec checks patterns with ``re.search``); JSON Schema reads it the same way."""


class ErrorBody(msgspec.Struct, frozen=True):
    type: str
    message: str


class ErrorOut(msgspec.Struct, frozen=True):
    error: ErrorBody


class Me(msgspec.Struct, frozen=True):
    user: str
    auth: bool


class ConversationCreate(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/conversations``: an optional id of your own (a new UUIDv7 otherwise)."""

    id: Annotated[str, msgspec.Meta(pattern=ID_PATTERN)] | None = None


class ConversationCreated(msgspec.Struct, frozen=True):
    id: str


class ConversationSummary(msgspec.Struct, frozen=True):
    id: str
    messages: int
    created_at: str
    updated_at: str
    preview: str | None = None
    last_model: str | None = None
    forked_from: str | None = None
    forked_at: int | None = None


class ConversationList(msgspec.Struct, frozen=True):
    conversations: list[ConversationSummary]
    next_offset: int | None


class ConversationOut(msgspec.Struct, frozen=True):
    """A conversation and one page of its messages (``messages[i]`` is message ``offset + i``)."""

    id: str
    version: int
    offset: int
    messages: list[Message]
    next_offset: int | None


class CompactionOut(msgspec.Struct, frozen=True):
    """One compaction record: the model's view of the conversation starts with ``summary`` (for
    messages 1..``boundary``) followed by the messages after ``boundary``; the log keeps them all.
    ``previous_boundary``: where the record it extends ended (0 for the first)."""

    id: str
    boundary: int
    previous_boundary: int
    summary: str
    model: str | None
    tokens_before: int
    tokens_after: int
    created_at: str


class CompactionList(msgspec.Struct, frozen=True):
    """A conversation's compaction records, oldest first (the last is the one runs start from)."""

    compactions: list[CompactionOut]


class ForkIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    at_version: int | None = None


class LossOut(msgspec.Struct, frozen=True):
    message: int
    part: int | None
    kind: str
    what: str
    reason: str


class ExportOut(msgspec.Struct, frozen=True):
    format: str
    data: Any
    losses: list[LossOut]


class ImportIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/conversations/import``: a client-held history in any ``tether.convert`` format."""

    data: Any
    format: str = "tether"


class ImportOut(msgspec.Struct, frozen=True):
    id: str
    messages: int
    sanitize: dict[str, Any]
    losses: list[LossOut]


class RunIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/conversations/{id}/runs``: the user's prompt."""

    prompt: str


class PendingCallOut(msgspec.Struct, frozen=True):
    call_id: str
    name: str
    arguments: str
    kind: Literal["approval", "external"]


class PauseOut(msgspec.Struct, frozen=True):
    """What a paused run waits for. Decide with ``POST /v1/runs/{id}/decisions``."""

    pause_id: str
    calls: list[PendingCallOut]
    expires_at: float


class RunOut(msgspec.Struct, frozen=True):
    id: str
    conversation_id: str
    status: str
    created_at: str
    updated_at: str
    last_seq: int
    events_url: str
    pause: PauseOut | None = None


class RunList(msgspec.Struct, frozen=True):
    runs: list[RunOut]


class CancelOut(msgspec.Struct, frozen=True):
    id: str
    status: str


class Decision(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One pending call's decision: ``approve`` or ``deny`` (with a ``reason`` the model sees),
    or ``result`` (the ``value`` of an external call the client executed)."""

    call_id: str
    decision: Literal["approve", "deny", "result"]
    reason: str | None = None
    value: Any = None
    failed: bool = False


class DecisionsIn(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``POST /v1/runs/{id}/decisions``: one decision per pending call of the pause ``pause_id``."""

    pause_id: str
    decisions: list[Decision]
