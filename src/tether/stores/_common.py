"""What every store shares: argument checks, the row codec, and the values derived from a batch."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from tether.errors import ConflictError, CorruptRecord, EncryptionError, NotFound, StoreError, UserError
from tether.messages import Message, Text, ToolResult, dumps_message
from tether.stores._crypto import Keyring
from tether.stores._protocol import ExpireHook, OnCorrupt, Store, ToolEffect

__all__ = [
    "PREVIEW_CHARS",
    "BatchFacts",
    "RowCodec",
    "batch_facts",
    "check_append",
    "check_id",
    "check_load",
    "conflict",
    "make_effect",
    "not_found",
    "now",
    "purge_with_hook",
    "since_beyond",
    "to_datetime",
]

PREVIEW_CHARS = 200
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


def not_found(conversation_id: str) -> NotFound:
    """The one NotFound every store raises: identical for a missing and a foreign conversation."""
    return NotFound(f"no conversation {conversation_id!r}")


def conflict(conversation_id: str, expected: int, actual: int) -> ConflictError:
    return ConflictError(
        f"conversation {conversation_id!r} is at version {actual}, expected {expected}",
        expected=expected,
        actual=actual,
    )


def since_beyond(conversation_id: str, since: int, version: int) -> UserError:
    return UserError(f"since={since} is beyond conversation {conversation_id!r} version {version}")


@dataclass(frozen=True, slots=True)
class BatchFacts:
    """What the conversation row learns from a batch: preview, last model, answered tool calls."""

    preview: str | None
    last_model: str | None
    result_call_ids: tuple[str, ...]


def batch_facts(messages: Iterable[Message]) -> BatchFacts:
    preview: str | None = None
    last_model: str | None = None
    answered: list[str] = []
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
            answered.extend(p.call_id for p in message.parts if type(p) is ToolResult)
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


def _where(conversation_id: str, seq: int) -> str:
    return f"conversation {conversation_id}, seq {seq}"


def make_effect(conversation_id: str, row: Sequence[Any], arguments: str) -> ToolEffect:
    """Row order: run_id, call_id, tool_name, started_at, finished_at, failed."""
    run_id, call_id, tool_name, started_at, finished_at, failed = row[:6]
    return ToolEffect(
        conversation_id=conversation_id,
        run_id=str(run_id),
        call_id=str(call_id),
        tool_name=str(tool_name),
        arguments=arguments,
        started_at=to_datetime(float(started_at)),
        finished=finished_at is not None,
        failed=bool(failed),
    )


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
