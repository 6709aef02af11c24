"""What every store shares: argument checks, the values derived from a batch, and the loops of
``purge`` and ``reencrypt``. Every store checks its arguments here, before it touches any data,
so a bad argument is the same ``UserError`` on every store."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

from tether.errors import ConflictError, DecodeError, EncryptionError, NotFound, StoreError, UserError
from tether.messages import Message, Text, ToolResult, dumps_message, loads_message, new_id
from tether.stores._protocol import ExpireHook, OnCorrupt, Store

__all__ = [
    "CONVERSATION_COLUMNS",
    "DELETED",
    "GUARD_PURGE_BATCH",
    "MAX_COUNT",
    "MAX_ID_CHARS",
    "MIGRATION_FAMILIES",
    "PREVIEW_CHARS",
    "UNDELETE",
    "BatchFacts",
    "batch_facts",
    "check_append",
    "check_batch",
    "check_call",
    "check_claim",
    "check_count",
    "check_failed",
    "check_id",
    "check_ids",
    "check_load",
    "check_optional_count",
    "check_paging",
    "check_purge",
    "check_tool_call",
    "check_version",
    "conflict",
    "deleted",
    "encode_batch",
    "exists",
    "fork_point",
    "id_or_new",
    "idle_filter",
    "load_offset",
    "not_found",
    "now",
    "pending_migrations",
    "purge_cutoff",
    "purge_with_hook",
    "reencrypt_batches",
    "show",
    "to_datetime",
    "unknown_call",
]

PREVIEW_CHARS = 200
MIGRATION_FAMILIES = ("serve_",)
"""Prefixes of migration names kept in ``tether_migrations`` by other lists than the store's."""
MAX_ID_CHARS = 512
MAX_COUNT = (1 << 63) - 1
"""The largest paging or version argument: a signed 64-bit integer, what both databases hold."""
GUARD_PURGE_BATCH = 64
"""How many expired replay-guard rows one ``claim_token`` call deletes at most."""
CONVERSATION_COLUMNS = (
    "pk, id, version, created_at, updated_at, preview_key, preview, last_model, forked_from, forked_at"
)
"""The conversation row as ``RowCodec.info`` reads it (the SQL stores select exactly these)."""
_DIGEST = re.compile(r"[0-9a-f]{64}")


def now() -> float:
    """Seconds since the epoch (the store clock's default)."""
    return time.time()


def to_datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def show(value: object) -> str:
    """A short description of a bad argument for an error message: never the repr of a huge
    value, never a call into an arbitrary object's ``__repr__``."""
    if type(value) is int:
        bits = value.bit_length()
        return repr(value) if bits <= 128 else f"an int of {bits} bits"
    if value is None or type(value) is bool or type(value) is float:
        return repr(value)
    if isinstance(value, str):
        text = str.__repr__(value)
        return text if len(text) <= 80 else f"{text[:60]}... ({len(value)} characters)"
    return f"a {type(value).__name__}"


# -- ids -----------------------------------------------------------------------------------------
def check_id(value: object, what: str) -> str:
    """An id argument (owner, conversation, run, call, tool name, schema): a non-empty string of at
    most 512 characters that every store keeps as it is — valid Unicode (no lone surrogate, which
    UTF-8 cannot carry) and no NUL character (PostgreSQL text cannot hold one)."""
    if not isinstance(value, str) or not value:
        raise UserError(f"{what} must be a non-empty string, not {show(value)}")
    if len(value) > MAX_ID_CHARS:
        raise UserError(f"{what} is longer than {MAX_ID_CHARS} characters ({len(value)})")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise UserError(f"{what} is not valid Unicode: a lone surrogate at index {exc.start}") from None
    if "\x00" in value:
        raise UserError(f"{what} must not contain a NUL character (index {value.index(chr(0))})")
    return value if type(value) is str else str.__str__(value)  # a str subclass as the plain str


def id_or_new(value: str | None, what: str) -> str:
    """A caller's id, checked, or a new UUIDv7 when it is ``None``."""
    return new_id() if value is None else check_id(value, what)


def check_ids(owner: object, conversation_id: object) -> tuple[str, str]:
    """``(owner, conversation_id)``, checked, as plain strings."""
    return check_id(owner, "owner"), check_id(conversation_id, "conversation_id")


def check_call(run_id: object, call_id: object) -> tuple[str, str]:
    """The ledger key of ``record_tool_finished`` (and of ``record_tool_started``)."""
    return check_id(run_id, "run_id"), check_id(call_id, "call_id")


def check_tool_call(
    run_id: object, call_id: object, tool_name: object, arguments: object
) -> tuple[str, str, str, str]:
    """The arguments of ``record_tool_started`` beyond owner and conversation id, checked."""
    run, call = check_call(run_id, call_id)
    name = check_id(tool_name, "tool_name")
    if not isinstance(arguments, str):
        raise UserError(f"arguments must be the raw JSON text (str), not {type(arguments).__name__}")
    if not arguments.isascii():
        try:
            arguments.encode()
        except UnicodeEncodeError as exc:
            raise UserError(
                f"arguments are not valid Unicode: a lone surrogate at index {exc.start}"
            ) from None
    return run, call, name, str.__str__(arguments)


def check_failed(failed: object) -> bool:
    if type(failed) is not bool:
        raise UserError(f"failed must be True or False, not {show(failed)}")
    return failed


def check_claim(digest: object, expires_at: object) -> tuple[str, float]:
    """``claim_token``'s arguments: a hex SHA-256 (64 lowercase hex characters) and a finite
    expiry in seconds since the epoch (>= 0)."""
    if type(digest) is not str or _DIGEST.fullmatch(digest) is None:
        raise UserError(f"digest must be a hex SHA-256 (64 lowercase hex characters), not {show(digest)}")
    if type(expires_at) is int:
        if not 0 <= expires_at <= MAX_COUNT:
            raise UserError(f"expires_at must be seconds since the epoch (>= 0), not {show(expires_at)}")
        return digest, float(expires_at)
    if not isinstance(expires_at, float) or not math.isfinite(expires_at) or expires_at < 0:
        raise UserError(f"expires_at must be seconds since the epoch (>= 0), not {show(expires_at)}")
    return digest, float(expires_at)


# -- counts: paging, versions, batch sizes -----------------------------------------------------------
def check_count(value: object, what: str) -> int:
    """A paging or version argument: an ``int`` (not a bool) from 0 to 2**63 - 1 — the range both
    databases hold — else ``UserError`` naming it. The one check every store uses."""
    if type(value) is not int:
        raise UserError(f"{what} must be an int >= 0, not {show(value)}")
    if not 0 <= value <= MAX_COUNT:
        raise UserError(f"{what} must be an int from 0 to 2**63 - 1, not {show(value)}")
    return value


def check_optional_count(value: object, what: str) -> int | None:
    return None if value is None else check_count(value, what)


def check_paging(limit: object, offset: object) -> tuple[int | None, int]:
    """``conversations``' ``limit`` (``None``: no limit) and ``offset``."""
    return check_optional_count(limit, "limit"), check_count(offset, "offset")


def check_batch(batch: object) -> int:
    """``reencrypt``'s batch size: at least 1."""
    size = check_count(batch, "batch")
    if size < 1:
        raise UserError("batch must be at least 1")
    return size


def encode_batch(messages: Sequence[Message]) -> list[bytes]:
    """The tether JSON of each message of an append (done before any lock is taken); a message
    the contract cannot carry is a ``UserError`` naming its index in the batch.

    Each encoding is read back as every store's reader reads it: a message built with a value
    of the wrong type (``Usage(input_tokens=True)``, ``Text(5)``: constructors do not check
    types) encodes, but its row would answer ``CorruptRecord`` forever. No store writes a row
    its own reader refuses."""
    encoded: list[bytes] = []
    for index, message in enumerate(messages):
        try:
            data = dumps_message(message)
            loads_message(data)
        except DecodeError as exc:
            raise UserError(
                f"append: item {index} would be stored as a record no reader accepts: {exc}"
            ) from None
        except UserError as exc:
            raise UserError(f"append: item {index}: {exc}") from None
        encoded.append(data)
    return encoded


def check_append(messages: Sequence[Message], expected_version: int | None) -> None:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"append takes a sequence of messages, not {type(messages).__name__}")
    for index, message in enumerate(messages):
        if type(message) is not Message:
            raise UserError(f"append: item {index} is a {type(message).__name__}, not a Message")
    check_optional_count(expected_version, "expected_version")


def check_load(tail: int | None, since: int | None, on_corrupt: OnCorrupt) -> None:
    check_optional_count(tail, "tail")
    check_optional_count(since, "since")
    if tail is not None and since is not None:
        raise UserError("load takes tail or since, not both")
    if on_corrupt not in ("raise", "skip"):
        raise UserError(f"on_corrupt must be 'raise' or 'skip', not {show(on_corrupt)}")


def check_purge(older_than: object, owner: object, on_expire: object) -> None:
    if not isinstance(older_than, timedelta):
        raise UserError(f"older_than must be a timedelta, not {show(older_than)}")
    if older_than < timedelta(0):
        raise UserError(f"older_than must not be negative, not {older_than}")
    if owner is not None:
        check_id(owner, "owner")
    if on_expire is not None and not callable(on_expire):
        raise UserError(f"on_expire must be an async function, not {show(on_expire)}")


def load_offset(conversation_id: str, version: int, tail: int | None, since: int | None) -> int:
    """How many messages ``load`` skips (arguments already passed ``check_load``)."""
    if tail is not None:
        return max(0, version - tail)
    if since is not None:
        if since > version:
            raise UserError(f"since={since} is beyond conversation {conversation_id!r} version {version}")
        return since
    return 0


def fork_point(at_version: int | None, version: int) -> int:
    """The version ``fork`` copies up to: ``at_version`` checked against the source, default all."""
    if at_version is None:
        return version
    if not at_version <= version:
        raise UserError(f"at_version must be between 0 and {version}, not {show(at_version)}")
    return at_version


def check_version(conversation_id: str, expected_version: int | None, version: int) -> None:
    if expected_version is not None and expected_version != version:
        raise conflict(conversation_id, expected_version, version)


def purge_cutoff(now: float, older_than: timedelta) -> float:
    """The ``updated_at`` before which ``purge`` deletes (arguments already passed ``check_purge``)."""
    return now - older_than.total_seconds()


def idle_filter(
    cutoff: float, owner: str | None, mark: LiteralString
) -> tuple[LiteralString, tuple[Any, ...]]:
    """SQL ``WHERE`` clause and parameters for the idle conversations; ``mark`` is the placeholder."""
    if owner is None:
        return f"updated_at < {mark}", (cutoff,)
    return f"updated_at < {mark} AND owner = {mark}", (cutoff, owner)


def unknown_call(call_id: str, run_id: str) -> NotFound:
    return NotFound(f"no started tool call {call_id!r} of run {run_id!r}")


def not_found(conversation_id: str) -> NotFound:
    """The one NotFound every store raises: identical for a missing and a foreign conversation."""
    return NotFound(f"no conversation {conversation_id!r}")


DELETED = "SELECT 1 FROM tether_deleted WHERE owner = ? AND id = ?"
"""Whether ``(owner, id)`` names a deleted conversation (``?`` placeholders)."""
UNDELETE = "DELETE FROM tether_deleted WHERE owner = ? AND id = ?"
"""An explicit ``create`` of a deleted conversation's id: a new conversation, no longer deleted."""


def deleted(conversation_id: str) -> ConflictError:
    """The error of ``create(..., exist_ok=True)`` (a run's lazy creation) on the id of a deleted
    conversation: a deleted conversation stays deleted; only an explicit ``create`` of the id
    makes a new one."""
    return ConflictError(
        f"conversation {conversation_id!r} was deleted: it is not created again implicitly "
        "(create it explicitly to start a new one under that id)",
        expected=0,
        actual=0,
    )


def exists(conversation_id: str, version: int) -> ConflictError:
    """The error for creating (or forking into) an id that is taken: ``expected`` 0 messages,
    ``actual`` the existing conversation's version."""
    return ConflictError(
        f"conversation {conversation_id!r} already exists (with {version} messages)",
        expected=0,
        actual=version,
    )


def conflict(conversation_id: str, expected: int, actual: int) -> ConflictError:
    return ConflictError(
        f"conversation {conversation_id!r} is at version {actual}, expected {expected}",
        expected=expected,
        actual=actual,
    )


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What the conversation row learns from a batch: preview, last model, answered tool calls.

    ``results`` holds ``(run_id, call_id)`` per tool result, the run id being the tool message's
    (``None`` when unstamped): a result closes the open ledger entry of that call in that run, or
    of that call in any run when the message carries no run id (a ledger closure or a repair).
    ``last_model`` is a listing column: a NUL in it (which PostgreSQL text cannot hold) is shown
    as U+FFFD on every store.
    """

    preview: str | None
    last_model: str | None
    results: tuple[tuple[str | None, str], ...]


def batch_facts(messages: Iterable[Message]) -> BatchFacts:
    preview: str | None = None
    last_model: str | None = None
    answered: list[tuple[str | None, str]] = []
    for message in messages:
        role = message.role
        if role == "user":
            if preview is None:
                texts = [p.text for p in message.parts if type(p) is Text]
                if texts:
                    preview = " ".join(texts)[:PREVIEW_CHARS]
        elif role == "assistant":
            if message.model:
                last_model = message.model
        elif role == "tool":
            run_id = message.run_id
            answered.extend((run_id, p.call_id) for p in message.parts if type(p) is ToolResult)
    if last_model is not None and "\x00" in last_model:
        last_model = last_model.replace("\x00", "\ufffd")
    return BatchFacts(preview, last_model, tuple(answered))


async def purge_with_hook(
    store: Store,
    idle: Sequence[tuple[str, str]],
    on_expire: ExpireHook,
    delete_if_unchanged: Callable[[str, str, int], Awaitable[bool]],
) -> int:
    """Shared ``purge(on_expire=...)`` loop: show each idle conversation to the hook outside any
    transaction, then delete it only if it is still at the version the hook saw."""
    deleted = 0
    for owner, conversation_id in idle:
        try:
            info = await store.info(owner, conversation_id)
            loaded = await store.load(owner, conversation_id)
        except NotFound:  # deleted meanwhile
            continue
        if await on_expire(info, loaded.messages) and await delete_if_unchanged(
            owner, conversation_id, info.version
        ):
            deleted += 1
    return deleted


async def reencrypt_batches(current: str | None, one_batch: Callable[[str], Awaitable[int]]) -> int:
    """The ``reencrypt`` loop: run ``one_batch(current_key_id)`` (one transaction each) until it
    rewrites nothing; return how many rows were rewritten in all. ``current`` is the keyring's
    current key id (``None``: the store has no keyring)."""
    if current is None:
        raise EncryptionError("reencrypt needs a store opened with a keyring")
    total = 0
    while done := await one_batch(current):
        total += done
    return total


def pending_migrations(
    applied: AbstractSet[str], migrations: Sequence[tuple[str, tuple[str, ...]]], *, family: str = ""
) -> list[tuple[str, tuple[str, ...]]]:
    """The named migrations not applied yet, in order; ``StoreError`` if the database has one this
    tether does not know (it was migrated by a newer release). ``tether_migrations`` is shared by
    families of lists: ``family`` is the name prefix of ``migrations`` (``"serve_"``), and the
    store's own list (``""``) ignores every name of the other ``MIGRATION_FAMILIES``."""
    if family:
        mine = {n for n in applied if n.startswith(family)}
    else:
        mine = {n for n in applied if not n.startswith(MIGRATION_FAMILIES)}
    unknown = mine - {name for name, _ in migrations}
    if unknown:
        raise StoreError(f"database schema is newer than this tether (unknown migrations {sorted(unknown)})")
    return [(name, statements) for name, statements in migrations if name not in applied]
