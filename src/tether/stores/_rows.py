"""The stored row format of the SQL stores: messages and small fields, plaintext or sealed.

A row is ``(key_id, data)``: ``key_id`` is ``None`` for plaintext (``data`` is the message's
tether JSON) or names the key that sealed ``data`` (nonce + AES-GCM ciphertext), with owner,
conversation id, kind and position as associated data. Whether an unsealed row is refused is the
store's ``require_encryption`` mode (docs/adr/0003-store-schema.md, "Strict encryption").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from msgspec.structs import replace

from tether.errors import CorruptRecord, DecodeError, EncryptionError, StoreError, UserError
from tether.messages import Message
from tether.stores._common import to_datetime
from tether.stores._crypto import Keyring, stored_bytes
from tether.stores._protocol import ConversationInfo, OnCorrupt, ToolEffect
from tether.stores._records import CompactionRecord, dumps_record, loads_record

__all__ = ["ENCRYPTION_FLAG", "SEALED", "RowCodec"]

ENCRYPTION_FLAG = "encryption"
"""The ``tether_meta`` row that records that every row of the database is sealed."""
SEALED = "sealed"

_message_decoder = msgspec.json.Decoder(Message)
_BAD_JSON = (msgspec.DecodeError, RecursionError, TypeError, ValueError)


def _aad(owner: str, conversation_id: str, kind: str, where: int | str) -> bytes:
    return msgspec.json.encode(["tether-v1", owner, conversation_id, kind, where])


def _where(conversation_id: str, seq: int) -> str:
    return f"conversation {conversation_id}, seq {seq}"


class RowCodec:
    """Turns messages into stored rows and back, encrypting when a keyring is set.

    ``require`` is the caller's ``require_encryption`` (``None``: follow the database);
    ``strict`` is the mode in force: unsealed rows are refused with ``CorruptRecord``.
    ``sealed_db`` is what the database records (``settle``): a store without a keyring refuses
    to write plaintext into a database recorded as sealed.
    """

    __slots__ = ("keyring", "require", "sealed_db", "strict")

    def __init__(self, keyring: Keyring | None, require_encryption: bool | None = None) -> None:
        if keyring is not None and not isinstance(keyring, Keyring):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"keyring must be a Keyring, not a {type(keyring).__name__}")
        if require_encryption is not None and type(require_encryption) is not bool:
            raise UserError(f"require_encryption must be True, False or None, not {require_encryption!r}")
        if require_encryption and keyring is None:
            raise UserError("require_encryption=True needs a keyring")
        self.keyring = keyring
        self.require = require_encryption
        self.strict = bool(require_encryption)
        self.sealed_db = False

    @property
    def current(self) -> str | None:
        """The key id new rows are sealed with (``None``: no keyring)."""
        return None if self.keyring is None else self.keyring.current

    def settle(self, sealed: bool) -> None:
        """Apply what the database records: strict by default once it is sealed."""
        self.sealed_db = sealed
        if self.require is None:
            self.strict = sealed and self.keyring is not None

    def check_writable(self) -> None:
        """Refuse to write plaintext content into a database recorded as sealed."""
        if self.sealed_db and self.keyring is None:
            raise EncryptionError(
                "this database is encrypted (its rows were sealed with a keyring) but the store has "
                "no keyring: writing would store plaintext"
            )

    # -- messages ---------------------------------------------------------------------------
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

    def open_row(self, owner: str, conversation_id: str, seq: int, key_id: Any, data: Any) -> Any:
        """The plaintext JSON of one stored message row; ``EncryptionError`` when a sealed row does
        not open, ``CorruptRecord`` for an unsealed row in strict mode."""
        if key_id is None:
            if self.strict:
                raise CorruptRecord(
                    "message row is not encrypted, and this store requires encryption: refused",
                    conversation_id=conversation_id,
                    seq=seq,
                )
            return data
        if self.keyring is None:
            raise EncryptionError(
                f"row is encrypted with key {key_id!r} but the store has no keyring "
                f"({_where(conversation_id, seq)})"
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
            except (StoreError, *_BAD_JSON):
                pass  # find and name the bad row below
        return self._decode_slowly(owner, conversation_id, rows, first_seq, last_seq, on_corrupt)

    @staticmethod
    def decode_plain(datas: Sequence[tuple[bytes]]) -> list[Message] | None:
        """Decode plaintext rows ``(data,)`` in one pass; ``None`` if any fails (then call
        ``decode_rows`` with full rows to name it)."""
        decode = _message_decoder.decode
        try:
            return [decode(data) for (data,) in datas]
        except _BAD_JSON:
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

        def report(error: CorruptRecord) -> None:
            if on_corrupt == "raise":
                raise error
            bad.append(error)

        expected = first_seq
        for seq, key_id, data in rows:
            if seq != expected:
                report(
                    CorruptRecord(
                        f"message rows {expected}..{seq - 1} are missing",
                        conversation_id=conversation_id,
                        seq=expected,
                    )
                )
            expected = seq + 1
            try:
                text = self.open_row(owner, conversation_id, seq, key_id, data)
            except CorruptRecord as exc:
                report(exc)
                continue
            except EncryptionError as exc:
                if on_corrupt == "raise":
                    raise
                bad.append(
                    CorruptRecord(f"row does not decrypt: {exc}", conversation_id=conversation_id, seq=seq)
                )
                continue
            try:
                out.append(decode(text))
            except _BAD_JSON as exc:
                what = "stored message" if key_id is None else "decrypted message"
                report(
                    CorruptRecord(
                        f"{what} is not valid tether JSON: {exc}", conversation_id=conversation_id, seq=seq
                    )
                )
        if expected <= last_seq:
            report(
                CorruptRecord(
                    f"message rows {expected}..{last_seq} are missing",
                    conversation_id=conversation_id,
                    seq=expected,
                )
            )
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
        self, owner: str, conversation_id: str, kind: str, where: int | str, key_id: Any, data: Any
    ) -> str:
        """A preview (``kind`` ``preview``) or ledger arguments (``tool``, where = call id).
        ``CorruptRecord`` (seq 0: not a message row) when unsealed in strict mode or not UTF-8."""
        name = _field_name(conversation_id, kind, where)
        if key_id is None:
            if self.strict:
                raise CorruptRecord(
                    f"{name} is not encrypted, and this store requires encryption: refused",
                    conversation_id=conversation_id,
                    seq=0,
                )
            if isinstance(data, str):
                return data
        else:
            if self.keyring is None:
                raise EncryptionError(f"{name} is encrypted with key {key_id!r} but the store has no keyring")
            data = self.keyring.decrypt(key_id, data, _aad(owner, conversation_id, kind, where), where=name)
        raw = stored_bytes(data)
        if raw is None:
            raise CorruptRecord(
                f"{name} is stored as {type(data).__name__}, not bytes",
                conversation_id=conversation_id,
                seq=0,
            )
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise CorruptRecord(f"{name} is not UTF-8", conversation_id=conversation_id, seq=0) from None

    # -- compaction records -------------------------------------------------------------------
    def seal_record(self, owner: str, record: CompactionRecord) -> tuple[str | None, bytes]:
        """``(key_id, data)`` of a record row: its JSON, sealed with kind ``compaction`` and the
        record id as associated data when encryption is on."""
        data = dumps_record(record)
        if self.keyring is None:
            return None, data
        return self.keyring.encrypt(data, _aad(owner, record.conversation_id, "compaction", record.id))

    def open_record(
        self, owner: str, conversation_id: str, record_id: str, key_id: Any, data: Any
    ) -> CompactionRecord:
        """A stored record row as its value. ``EncryptionError`` when a sealed row does not open;
        ``CorruptRecord`` (seq 0) when it is unsealed in strict mode, does not decode, or names
        another conversation or id than the row it is in."""
        text = self.open_field(owner, conversation_id, "compaction", record_id, key_id, data)
        try:
            record = loads_record(text)
        except DecodeError as exc:
            raise CorruptRecord(
                f"compaction record {record_id!r} is not a valid record: {exc}",
                conversation_id=conversation_id,
                seq=0,
            ) from None
        if record.id != record_id or record.conversation_id != conversation_id:
            raise CorruptRecord(
                f"compaction record {record_id!r} holds record {record.id!r} of conversation "
                f"{record.conversation_id!r}: refused",
                conversation_id=conversation_id,
                seq=0,
            )
        return record

    def copy_record(
        self, owner: str, source_id: str, target_id: str, record_id: str, key_id: Any, data: Any
    ) -> tuple[CompactionRecord, str | None, bytes]:
        """A record of ``source_id`` for its fork ``target_id``: the value re-stamped with the new
        conversation and its row sealed for it; ``(record, key_id, data)``."""
        record = replace(
            self.open_record(owner, source_id, record_id, key_id, data), conversation_id=target_id
        )
        return (record, *self.seal_record(owner, record))

    def reseal_record(
        self, owner: str, conversation_id: str, record_id: str, key_id: str | None, data: bytes
    ) -> tuple[str | None, bytes]:
        """One record row sealed again with the current key (refused unsealed in strict mode)."""
        return self.seal_record(owner, self.open_record(owner, conversation_id, record_id, key_id, data))

    # -- row work shared by the SQL stores -------------------------------------------------------
    def info(self, owner: str, row: Sequence[Any]) -> ConversationInfo:
        """A conversation row (the ``CONVERSATION_COLUMNS``) as its summary line."""
        _, cid, version, created, updated, preview_key, preview, last_model, forked_from, forked_at = row
        preview_text = (
            None if preview is None else self.open_field(owner, cid, "preview", 0, preview_key, preview)
        )
        try:
            return ConversationInfo(
                conversation_id=cid,
                version=_count(version),
                created_at=to_datetime(created),
                updated_at=to_datetime(updated),
                preview=preview_text,
                last_model=last_model,
                forked_from=None if forked_from is None else (forked_from, _count(forked_at)),
            )
        except (TypeError, ValueError, OverflowError, OSError) as exc:
            raise CorruptRecord(
                f"conversation row is malformed: {exc}", conversation_id=str(cid), seq=0
            ) from None

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
        """One message row sealed again with the current key: ``(key_id, data)``. In strict mode
        an unsealed row is refused (``CorruptRecord``), never sealed: sealing would make a row
        someone inserted into the database look authentic."""
        plain = self.open_row(owner, conversation_id, seq, key_id, data)
        encoded = plain.encode() if isinstance(plain, str) else stored_bytes(plain)
        if encoded is None:
            raise CorruptRecord(
                f"message row is stored as {type(plain).__name__}, not bytes",
                conversation_id=conversation_id,
                seq=seq,
            )
        _, new_key, sealed = self.seal(owner, conversation_id, seq, [encoded])[0]
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
        effects: list[ToolEffect] = []
        for run_id, call_id, tool_name, started_at, finished_at, failed, arguments_key, arguments in rows:
            opened = self.open_field(owner, conversation_id, "tool", call_id, arguments_key, arguments)
            try:
                started = to_datetime(float(started_at))
            except (TypeError, ValueError, OverflowError, OSError) as exc:
                raise CorruptRecord(
                    f"ledger entry of call {call_id!r} is malformed: {exc}",
                    conversation_id=conversation_id,
                    seq=0,
                ) from None
            effects.append(
                ToolEffect(
                    conversation_id=conversation_id,
                    run_id=str(run_id),
                    call_id=str(call_id),
                    tool_name=str(tool_name),
                    arguments=opened,
                    started_at=started,
                    finished=finished_at is not None,
                    failed=bool(failed),
                )
            )
        return effects


def _field_name(conversation_id: str, kind: str, where: int | str) -> str:
    if kind == "tool":
        return f"arguments of tool call {where!r} of conversation {conversation_id}"
    if kind == "compaction":
        return f"compaction record {where!r} of conversation {conversation_id}"
    return f"{kind} of conversation {conversation_id}"


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value
