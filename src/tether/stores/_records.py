"""``CompactionRecord``: a compaction, stored next to a conversation's log (ADR 0010).

A record never changes the log. It says: the messages with ``seq <= boundary`` are stood for by
``summary``. A run over a stored conversation sends the latest record's summary, then the
messages after its boundary; deleting the record restores the full view. Records are values
with a JSON shape of their own (``dumps_record``/``loads_record``), so every store keeps them
the same way, encrypted like messages when encryption at rest is on.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, cast

import msgspec

from tether.errors import DecodeError, NotFound, UserError
from tether.messages import Usage

__all__ = [
    "RECORD_VERSION",
    "CompactionRecord",
    "boundary_error",
    "check_record",
    "dumps_record",
    "duplicate_record",
    "loads_record",
    "record_not_found",
]

RECORD_VERSION = 1
"""The version of the record's JSON shape (it only ever gains optional fields)."""


class CompactionRecord(msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag="compaction"):
    """One compaction of a conversation.

    - ``id``: the record's id (a UUIDv7 string); ``conversation_id``: the conversation it belongs to.
    - ``boundary``: the seq of the last message the summary stands for (seq counts from 1, so it
      is also how many messages it covers); the view sends the messages with ``seq > boundary``.
    - ``previous_boundary``: the boundary of the record this one extends (0 for the first): the
      summarizer read that record's summary plus the messages ``previous_boundary < seq <= boundary``.
    - ``summary``: the summary text, exactly as the summarizer wrote it.
    - ``model``: the summarizer (``provider:model`` or the model's name); ``usage``: what
      summarizing cost (all calls of this compaction).
    - ``tokens_before`` / ``tokens_after``: the counted tokens of the messages of the request
      view before and after this compaction.
    - ``created_at``: when it was made (timezone-aware, UTC in JSON).
    """

    id: str
    conversation_id: str
    boundary: int
    summary: str
    model: str | None = None
    usage: Usage = Usage()
    tokens_before: int = 0
    tokens_after: int = 0
    previous_boundary: int = 0
    created_at: datetime
    version: int = RECORD_VERSION

    def __post_init__(self) -> None:
        for name in ("id", "conversation_id"):
            value: object = getattr(self, name)
            if not isinstance(value, str) or not value or len(value) > 512:
                raise UserError(f"CompactionRecord.{name} must be a non-empty string of <= 512 characters")
        for name in ("boundary", "previous_boundary", "tokens_before", "tokens_after"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise UserError(f"CompactionRecord.{name} must be an int >= 0, not {value!r}")
        if self.boundary < 1:
            raise UserError(f"CompactionRecord.boundary must be >= 1 (a seq), not {self.boundary}")
        if self.previous_boundary >= self.boundary:
            raise UserError(
                f"CompactionRecord.previous_boundary ({self.previous_boundary}) must be below "
                f"boundary ({self.boundary})"
            )
        summary = cast(object, self.summary)
        if not isinstance(summary, str) or not summary.strip():
            raise UserError("CompactionRecord.summary must be a non-empty string")
        created = cast(object, self.created_at)
        if not isinstance(created, datetime) or created.tzinfo is None:
            raise UserError("CompactionRecord.created_at must be a timezone-aware datetime")

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON object as a dict."""
        return msgspec.to_builtins(self)

    @staticmethod
    def now() -> datetime:
        """The current time as records store it."""
        return datetime.now(UTC)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(CompactionRecord)
_PATH = re.compile(r" - at `(\$[^`]*)`$")


def dumps_record(record: CompactionRecord) -> bytes:
    """The record as JSON (one object; ``"type": "compaction"``, camelCase keys)."""
    if type(record) is not CompactionRecord:  # pyright: ignore[reportUnnecessaryComparison]
        raise UserError(f"dumps_record takes a CompactionRecord, not {type(record).__name__}")
    try:
        return _encoder.encode(record)
    except UnicodeEncodeError as exc:
        raise UserError(f"the record holds text that is not valid Unicode ({exc.reason})") from None


def loads_record(data: bytes | bytearray | memoryview | str) -> CompactionRecord:
    """A record from its JSON; anything else raises ``DecodeError`` with a JSON path."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _PATH.search(text)
        path = match.group(1) if match else "$"
        if match:
            text = text[: match.start()]
        raise DecodeError(f"not a compaction record: {text} at {path}", path=path) from None
    except msgspec.DecodeError as exc:
        raise DecodeError(f"not valid JSON: {exc} at $", path="$") from None
    except UserError as exc:
        raise DecodeError(f"not a compaction record: {exc} at $", path="$") from None
    except (RecursionError, TypeError) as exc:
        raise DecodeError(f"cannot decode a compaction record: {exc}", path="$") from None


def check_record(value: object) -> CompactionRecord:
    """A ``CompactionRecord`` argument (``append_record``), else ``UserError``."""
    if type(value) is not CompactionRecord:
        raise UserError(f"record must be a CompactionRecord, not a {type(value).__name__}")
    return value


def boundary_error(record: CompactionRecord, version: int) -> UserError:
    """The error of a record whose boundary passes its conversation's version."""
    return UserError(
        f"the record's boundary (seq {record.boundary}) passes conversation "
        f"{record.conversation_id!r}, which holds {version} messages: append the messages first"
    )


def record_not_found(conversation_id: str, record_id: str) -> NotFound:
    """No such record in the conversation (or no such conversation for this owner)."""
    return NotFound(f"no compaction record {record_id!r} in conversation {conversation_id!r}")


def duplicate_record(record: CompactionRecord) -> UserError:
    """A record id the conversation already has (a record is appended once)."""
    return UserError(f"conversation {record.conversation_id!r} already has a compaction record {record.id!r}")
