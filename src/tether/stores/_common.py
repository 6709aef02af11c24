"""What every store shares: argument checks, the row codec, and the values derived from a batch."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import msgspec

from tether.errors import ConflictError, CorruptRecord, EncryptionError, NotFound, StoreError, UserError
from tether.messages import Message, Text, ToolResult, dumps_message, new_id
from tether.stores._crypto import Keyring
from tether.stores._protocol import ConversationInfo, ExpireHook, OnCorrupt, Store, ToolEffect

__all__ = [
    "CONVERSATION_COLUMNS",
    "MIGRATION_FAMILIES",
    "PREVIEW_CHARS",
    "BatchFacts",
    "RowCodec",
    "batch_facts",
    "check_append",
    "check_id",
    "check_ids",
    "check_limit",
    "check_load",
    "check_tool_call",
    "check_version",
    "conflict",
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
    "to_datetime",
    "unknown_call",
]

PREVIEW_CHARS = 200
MIGRATION_FAMILIES = ("serve_",)
"""Prefixes of migration names kept in ``tether_migrations`` by other lists than the store's."""
CONVERSATION_COLUMNS = (
    "pk, id, version, created_at, updated_at, preview_key, preview, last_model, forked_from, forked_at"
)
"""The conversation row as ``RowCodec.info`` reads it (the SQL stores select exactly these)."""
_message_decoder = msgspec.json.Decoder(Message)


def now() -> float:
    """Seconds since the epoch (the store clock's default)."""
    return time.time()


def to_datetime(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def check_id(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"{what} must be a non-empty string, not {value!r}")
    if len(value) > 512:
        raise UserError(f"{what} is longer than 512 characters")
    return value


def id_or_new(value: str | None, what: str) -> str:
    """A caller's id, checked, or a new UUIDv7 when it is ``None``."""
    return new_id() if value is None else check_id(value, what)


def check_ids(owner: object, conversation_id: object) -> None:
    check_id(owner, "owner")
    check_id(conversation_id, "conversation_id")


def check_limit(limit: int | None) -> None:
    if limit is not None and (type(limit) is not int or limit < 0):
        raise UserError(f"limit must be an int >= 0, not {limit!r}")


def check_tool_call(run_id: str, call_id: str, tool_name: str, arguments: str) -> None:
    """The arguments of ``record_tool_started`` beyond owner and conversation id."""
    for value, what in ((run_id, "run_id"), (call_id, "call_id"), (tool_name, "tool_name")):
        check_id(value, what)
    if not isinstance(arguments, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"arguments must be the raw JSON text (str), not {type(arguments).__name__}")


def check_append(messages: Sequence[Message], expected_version: int | None) -> None:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(f"append takes a sequence of messages, not {type(messages).__name__}")
    for index, message in enumerate(messages):
        if type(message) is not Message:
            raise UserError(f"append: item {index} is a {type(message).__name__}, not a Message")
    if expected_version is not None and (
        type(expected_version) is not int or expected_version < 0  # pyright: ignore[reportUnnecessaryComparison]
    ):
        raise UserError(f"expected_version must be an int >= 0, not {expected_version!r}")


def check_load(tail: int | None, since: int | None, on_corrupt: OnCorrupt) -> None:
    if tail is not None and since is not None:
        raise UserError("load takes tail or since, not both")
    for name, value in (("tail", tail), ("since", since)):
        if value is not None and (type(value) is not int or value < 0):
            raise UserError(f"{name} must be an int >= 0, not {value!r}")
    if on_corrupt not in ("raise", "skip"):
        raise UserError(f"on_corrupt must be 'raise' or 'skip', not {on_corrupt!r}")


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
    at = version if at_version is None else at_version
    if type(at) is not int or not 0 <= at <= version:
        raise UserError(f"at_version must be between 0 and {version}, not {at_version!r}")
    return at


def check_version(conversation_id: str, expected_version: int | None, version: int) -> None:
    if expected_version is not None and expected_version != version:
        raise conflict(conversation_id, expected_version, version)


def purge_cutoff(now: float, older_than: timedelta, owner: str | None) -> float:
    """The ``updated_at`` before which ``purge`` deletes (checks ``owner`` when given)."""
    if owner is not None:
        check_id(owner, "owner")
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
    return BatchFacts(preview, last_model, tuple(answered))


def _aad(owner: str, conversation_id: str, kind: str, where: int | str) -> bytes:
    return msgspec.json.encode(["tether-v1", owner, conversation_id, kind, where])


class RowCodec:
    """Turns messages into stored rows and back, encrypting when a keyring is set.

    A row is ``(key_id, data)``: ``key_id`` is ``None`` for plaintext (``data`` is the message's
    tether JSON) or names the key that sealed ``data`` (nonce + AES-GCM ciphertext), with owner,
    conversation id, kind and sequence number as associated data.
    """

    __slots__ = ("keyring",)

    def __init__(self, keyring: Keyring | None) -> None:
        self.keyring = keyring

    # -- messages ---------------------------------------------------------------------------
    @staticmethod
    def encode(messages: Sequence[Message]) -> list[bytes]:
        """The tether JSON of each message (done before any lock is taken)."""
        return [dumps_message(m) for m in messages]

    def seal(
        self, owner: str, conversation_id: str, first_seq: int, encoded: Sequence[bytes]
    ) -> list[tuple[int, str | None, bytes]]:
        """Rows ``(seq, key_id, data)`` for encoded messages numbered from ``first_seq``."""
        keyring = self.keyring
        if keyring is None:
            return [(first_seq + i, None, data) for i, data in enumerate(encoded)]
        rows: list[tuple[int, str | None, bytes]] = []
        for index, data in enumerate(encoded):
            seq = first_seq + index
            key_id, sealed = keyring.encrypt(data, _aad(owner, conversation_id, "msg", seq))
            rows.append((seq, key_id, sealed))
        return rows

    def open_row(self, owner: str, conversation_id: str, seq: int, key_id: str | None, data: bytes) -> bytes:
        """The plaintext JSON of one stored message row."""
        if key_id is None:
            return data
        if self.keyring is None:
            raise EncryptionError(
                f"row is encrypted with key {key_id!r} but the store has no keyring "
                f"(conversation {conversation_id}, seq {seq})"
            )
        return self.keyring.decrypt(
            key_id, data, _aad(owner, conversation_id, "msg", seq), where=_where(conversation_id, seq)
        )

    def decode_rows(
        self,
        owner: str,
        conversation_id: str,
        rows: Sequence[tuple[int, str | None, bytes]],
        first_seq: int,
        last_seq: int,
        on_corrupt: OnCorrupt,
    ) -> tuple[list[Message], list[CorruptRecord]]:
        """Decode rows ``first_seq..last_seq`` (distinct, ascending) in order. A bad or missing row
        raises, or with ``on_corrupt="skip"`` is reported and left out."""
        if len(rows) == last_seq - first_seq + 1:  # all there: try the fast path first
            decode = _message_decoder.decode
            try:
                if self.keyring is None:
                    return [decode(data) for _, _, data in rows], []
                return [
                    decode(self.open_row(owner, conversation_id, seq, key_id, data))
                    for seq, key_id, data in rows
                ], []
            except (StoreError, msgspec.DecodeError, RecursionError, TypeError, ValueError):
                pass  # find and name the bad row below
        return self._decode_slowly(owner, conversation_id, rows, first_seq, last_seq, on_corrupt)

    @staticmethod
    def decode_plain(datas: Sequence[tuple[bytes]]) -> list[Message] | None:
        """Decode plaintext rows ``(data,)`` in one pass; ``None`` if any fails (then call
        ``decode_rows`` with full rows to name it)."""
        decode = _message_decoder.decode
        try:
            return [decode(data) for (data,) in datas]
        except (msgspec.DecodeError, RecursionError, TypeError, ValueError):
            return None

    def _decode_slowly(
        self,
        owner: str,
        conversation_id: str,
        rows: Sequence[tuple[int, str | None, bytes]],
        first_seq: int,
        last_seq: int,
        on_corrupt: OnCorrupt,
    ) -> tuple[list[Message], list[CorruptRecord]]:
        out: list[Message] = []
        bad: list[CorruptRecord] = []
        decode = _message_decoder.decode
        expected = first_seq
        for seq, key_id, data in rows:
            if seq != expected:
                missing = CorruptRecord(
                    f"message rows {expected}..{seq - 1} are missing",
                    conversation_id=conversation_id,
                    seq=expected,
                )
                if on_corrupt == "raise":
                    raise missing
                bad.append(missing)
            expected = seq + 1
            try:
                text = data if key_id is None else self.open_row(owner, conversation_id, seq, key_id, data)
                out.append(decode(text))
            except EncryptionError as exc:
                if on_corrupt == "raise":
                    raise
                bad.append(
                    CorruptRecord(f"row does not decrypt: {exc}", conversation_id=conversation_id, seq=seq)
                )
            except (msgspec.DecodeError, RecursionError, TypeError, ValueError) as exc:
                error = CorruptRecord(
                    f"stored message is not valid tether JSON: {exc}",
                    conversation_id=conversation_id,
                    seq=seq,
                )
                if on_corrupt == "raise":
                    raise error from None
                bad.append(error)
        if expected <= last_seq:
            missing = CorruptRecord(
                f"message rows {expected}..{last_seq} are missing",
                conversation_id=conversation_id,
                seq=expected,
            )
            if on_corrupt == "raise":
                raise missing
            bad.append(missing)
        return out, bad

    # -- small encrypted fields (preview, tool arguments) --------------------------------------
    def seal_field(
        self, owner: str, conversation_id: str, kind: str, where: int | str, text: str
    ) -> tuple[str | None, bytes]:
        data = text.encode()
        if self.keyring is None:
            return None, data
        return self.keyring.encrypt(data, _aad(owner, conversation_id, kind, where))

    def open_field(
        self, owner: str, conversation_id: str, kind: str, where: int | str, key_id: str | None, data: bytes
    ) -> str:
        if key_id is not None:
            if self.keyring is None:
                raise EncryptionError(
                    f"{kind} of conversation {conversation_id} is encrypted with key {key_id!r} "
                    "but the store has no keyring"
                )
            data = self.keyring.decrypt(
                key_id, data, _aad(owner, conversation_id, kind, where), where=f"{kind} of {conversation_id}"
            )
        try:
            return bytes(data).decode()
        except UnicodeDecodeError:
            raise StoreError(f"{kind} of conversation {conversation_id} is not UTF-8") from None

    def needs_reseal(self, key_id: str | None) -> bool:
        """True when a row is not sealed with the keyring's current key."""
        return self.keyring is not None and key_id != self.keyring.current

    # -- row work shared by the SQL stores -------------------------------------------------------
    def info(self, owner: str, row: Sequence[Any]) -> ConversationInfo:
        """A conversation row (the ``CONVERSATION_COLUMNS``) as its summary line."""
        _, cid, version, created, updated, preview_key, preview, last_model, forked_from, forked_at = row
        return ConversationInfo(
            conversation_id=cid,
            version=version,
            created_at=to_datetime(created),
            updated_at=to_datetime(updated),
            preview=None
            if preview is None
            else self.open_field(owner, cid, "preview", 0, preview_key, preview),
            last_model=last_model,
            forked_from=None if forked_from is None else (forked_from, forked_at),
        )

    def seal_preview(
        self, owner: str, conversation_id: str, preview: str | None
    ) -> tuple[str | None, bytes | None]:
        """``(preview_key, preview)`` column values; ``(None, None)`` when there is no preview."""
        if preview is None:
            return None, None
        return self.seal_field(owner, conversation_id, "preview", 0, preview)

    def copy_rows(
        self, owner: str, source_id: str, target_id: str, rows: Sequence[tuple[int, str | None, bytes]]
    ) -> list[tuple[int, str | None, bytes]]:
        """Rows ``(seq, key_id, data)`` of ``source_id`` for its fork ``target_id``: sealed rows are
        bound to their conversation, so they are re-sealed; plaintext rows are kept as they are."""
        copied: list[tuple[int, str | None, bytes]] = []
        for seq, key_id, data in rows:
            if key_id is None:
                copied.append((seq, None, data))
            else:
                plain = self.open_row(owner, source_id, seq, key_id, data)
                copied.extend(self.seal(owner, target_id, seq, [plain]))
        return copied

    def reseal_row(
        self, owner: str, conversation_id: str, seq: int, key_id: str | None, data: bytes
    ) -> tuple[str | None, bytes]:
        """One message row sealed again with the current key: ``(key_id, data)``."""
        _, new_key, sealed = self.seal(
            owner, conversation_id, seq, [self.open_row(owner, conversation_id, seq, key_id, data)]
        )[0]
        return new_key, sealed

    def reseal_field(
        self, owner: str, conversation_id: str, kind: str, where: int | str, key_id: str | None, data: bytes
    ) -> tuple[str | None, bytes]:
        """One small field (preview, tool arguments) sealed again with the current key."""
        text = self.open_field(owner, conversation_id, kind, where, key_id, data)
        return self.seal_field(owner, conversation_id, kind, where, text)

    def effects(self, owner: str, conversation_id: str, rows: Iterable[Sequence[Any]]) -> list[ToolEffect]:
        """Ledger rows ``(run_id, call_id, tool_name, started_at, finished_at, failed, arguments_key,
        arguments)`` as ``ToolEffect`` values, the arguments opened."""
        return [
            ToolEffect(
                conversation_id=conversation_id,
                run_id=str(run_id),
                call_id=str(call_id),
                tool_name=str(tool_name),
                arguments=self.open_field(owner, conversation_id, "tool", call_id, arguments_key, arguments),
                started_at=to_datetime(float(started_at)),
                finished=finished_at is not None,
                failed=bool(failed),
            )
            for run_id, call_id, tool_name, started_at, finished_at, failed, arguments_key, arguments in rows
        ]


def _where(conversation_id: str, seq: int) -> str:
    return f"conversation {conversation_id}, seq {seq}"


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


async def reencrypt_batches(codec: RowCodec, one_batch: Callable[[str], Awaitable[int]]) -> int:
    """The ``reencrypt`` loop: run ``one_batch(current_key_id)`` (one transaction each) until it
    rewrites nothing; return how many rows were rewritten in all."""
    if codec.keyring is None:
        raise EncryptionError("reencrypt needs a store opened with a keyring")
    current = codec.keyring.current
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
