"""The ``Store`` protocol and the values that cross it.

A store is an append-only log of messages per conversation. Every method takes the ``owner``
(the authenticated caller or tenant): a conversation is addressed by ``(owner, conversation_id)``
and a conversation of another owner is indistinguishable from one that does not exist — the same
``NotFound`` with the same message. Versions count messages: a conversation with ``n`` messages is
at version ``n``; the message appended first has sequence number 1.

Compaction records (``append_record``, ``latest_record``, ``records``, ``delete_record``) are
kept beside the log, owner-scoped through their conversation; ``delete`` and ``purge`` remove
them with it and ``fork`` copies those whose boundary it copies. ``search`` finds messages
across the owner's conversations.

Errors (all from ``tether.errors``): ``NotFound`` (no such conversation *for this owner*),
``ConflictError`` (``expected_version`` did not match), ``CorruptRecord`` (a stored row does not
decode; names conversation and seq), ``EncryptionError`` (a key is missing or a row fails
authentication; the message names conversation and seq), ``StoreError`` (anything else),
``UserError`` (a bad argument: every store checks every argument the same way before it touches
any data — ids, paging and version numbers, digests).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from tether.errors import CorruptRecord
from tether.messages import Message
from tether.stores._records import CompactionRecord

__all__ = [
    "SCAN_BYTES",
    "SCAN_CONVERSATIONS",
    "ConversationInfo",
    "ExpireHook",
    "Loaded",
    "MessageHit",
    "OnCorrupt",
    "SearchMethod",
    "SearchResults",
    "Store",
    "ToolEffect",
]

OnCorrupt: TypeAlias = Literal["raise", "skip"]
"""What ``load`` does with a row that does not decode or decrypt: ``"raise"`` (the default) raises
``CorruptRecord``/``EncryptionError`` naming the conversation and seq; ``"skip"`` returns the good
rows and lists each bad one in ``Loaded.corrupt``."""


@dataclass(frozen=True, slots=True)
class Loaded:
    """The result of ``Store.load``.

    ``messages[i]`` has sequence number ``offset + i + 1``. ``version`` is the conversation's
    version when it was read: pass it as ``expected_version`` to the next ``append``. ``corrupt``
    is empty unless ``on_corrupt="skip"`` was asked for and rows were bad (their messages are then
    missing from ``messages``, so the offset rule no longer holds after the first bad row).
    """

    conversation_id: str
    messages: tuple[Message, ...]
    version: int
    offset: int
    corrupt: tuple[CorruptRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """One line of ``Store.conversations``: what a conversation picker shows.

    ``preview`` is the text of the first user message (at most 200 characters), ``last_model`` the
    ``model`` of the last assistant message that named one. ``forked_from`` is
    ``(conversation_id, version)`` when the conversation was made by ``fork``. Times are UTC.
    """

    conversation_id: str
    version: int
    created_at: datetime
    updated_at: datetime
    preview: str | None = None
    last_model: str | None = None
    forked_from: tuple[str, int] | None = None

    @property
    def message_count(self) -> int:
        """The number of messages (equal to ``version``: the log is append-only)."""
        return self.version


@dataclass(frozen=True, slots=True)
class ToolEffect:
    """A ledger entry of a tool with side effects that was started but whose result is not stored.

    ``finished`` is True when the tool reported completion (``failed`` says how) but the run died
    before its result message was appended; False means the outcome is unknown — the tool may or
    may not have run. Either way the effect must not be silently re-executed.
    """

    conversation_id: str
    run_id: str
    call_id: str
    tool_name: str
    arguments: str
    started_at: datetime
    finished: bool = False
    failed: bool = False


SearchMethod: TypeAlias = Literal["fts5", "postgres", "scan"]
"""How ``Store.search`` searched: an index (``fts5``, ``postgres``) or a scan of the messages."""
SCAN_CONVERSATIONS = 200
"""The default bound of a scan (encrypted stores, ``MemoryStore``): conversations searched."""
SCAN_BYTES = 64 * 1024 * 1024
"""The default bound of a scan: bytes of messages decrypted and searched."""


@dataclass(frozen=True, slots=True)
class MessageHit:
    """One message matching a search: its conversation, its ``seq`` (1 for the first message),
    its role, the ``score`` (higher is better; comparable within one search only) and a
    ``snippet`` of its text around the match."""

    conversation_id: str
    seq: int
    role: str
    score: float
    snippet: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SearchResults:
    """What ``Store.search`` found, best first.

    ``method``: ``"fts5"`` (SQLite's index), ``"postgres"`` (PostgreSQL full-text search) or
    ``"scan"`` (messages read and searched one by one: ``MemoryStore``, and stores with
    encryption at rest, which keep no plaintext index). ``conversations``: how many
    conversations were searched. ``complete`` is False when a scan stopped at its bound
    (``note`` says which); the most recently updated conversations are scanned first.
    """

    hits: tuple[MessageHit, ...]
    method: SearchMethod
    conversations: int
    complete: bool = True
    note: str | None = None

    def __len__(self) -> int:
        return len(self.hits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hits": [h.to_dict() for h in self.hits],
            "method": self.method,
            "conversations": self.conversations,
            "complete": self.complete,
            "note": self.note,
        }


ExpireHook: TypeAlias = Callable[[ConversationInfo, tuple[Message, ...]], Awaitable[bool]]
"""The compaction/archival hook of ``Store.purge``: called with each idle conversation and its
messages before it is deleted. Return True to delete it, False to keep it (for instance after
writing a summary somewhere). It runs outside any store transaction."""


@runtime_checkable
class Store(Protocol):
    """An append-only, owner-scoped conversation log with a tool-effect ledger. Every method is async."""

    async def create(self, owner: str, conversation_id: str | None = None, *, exist_ok: bool = False) -> str:
        """Create an empty conversation (version 0) and return its id (a new UUIDv7 when omitted).

        An existing ``(owner, conversation_id)`` raises ``ConflictError`` unless ``exist_ok``.
        Ids are scoped by owner: two owners may use the same id without seeing each other.
        A deleted conversation stays deleted: with ``exist_ok`` (a run's lazy creation) its id is
        ``ConflictError``, so a run that raced the delete cannot bring it back; without, the
        caller asks for a new conversation under that id, and gets it.
        """
        ...

    async def append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int | None = None,
    ) -> int:
        """Append a batch atomically (all or nothing) and return the new version.

        With ``expected_version`` the append happens only if the conversation is at exactly that
        version, else ``ConflictError(expected=..., actual=...)``. Appending a tool message whose
        results answer ledger entries closes those entries in the same transaction.
        """
        ...

    async def load(
        self,
        owner: str,
        conversation_id: str,
        *,
        tail: int | None = None,
        since: int | None = None,
        on_corrupt: OnCorrupt = "raise",
    ) -> Loaded:
        """The whole conversation, its last ``tail`` messages, or the messages after version ``since``."""
        ...

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]:
        """The owner's conversations, most recently updated first."""
        ...

    async def info(self, owner: str, conversation_id: str) -> ConversationInfo:
        """One conversation's summary line."""
        ...

    async def fork(
        self,
        owner: str,
        conversation_id: str,
        at_version: int | None = None,
        new_id: str | None = None,
    ) -> str:
        """Copy the first ``at_version`` messages (default: all) into a new conversation of the
        same owner and return its id. The original is untouched."""
        ...

    async def delete(self, owner: str, conversation_id: str) -> None:
        """Delete a conversation, its messages and its ledger entries."""
        ...

    async def purge(
        self,
        older_than: timedelta,
        *,
        owner: str | None = None,
        on_expire: ExpireHook | None = None,
    ) -> int:
        """Delete conversations not updated for longer than ``older_than`` (of every owner, or of
        ``owner``); return how many were deleted. ``on_expire`` is the compaction hook. Expired
        replay-guard claims (``claim_token``) are deleted too, whatever ``owner`` says."""
        ...

    async def record_tool_started(
        self,
        owner: str,
        conversation_id: str,
        run_id: str,
        call_id: str,
        tool_name: str,
        arguments: str,
    ) -> bool:
        """Durably note that a tool with side effects is about to run.

        An entry is keyed by ``(run_id, call_id)``: model call ids repeat across runs (many
        models number them per response), so a later run's call with a reused id is a new entry.
        Returns True when this call wrote the entry; False when this run started this call and
        its result was never stored (the entry is open) — the tool may already have run and must
        not run again. A closed entry of the same run and call id is a later call reusing the id:
        it starts afresh.

        Appending a tool message closes open entries its results answer: those of the message's
        ``run_id`` (any run's, when the message carries no run id, as a ledger closure does).
        """
        ...

    async def record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, *, failed: bool = False
    ) -> None:
        """Note that the tool returned (``failed`` when it raised). ``NotFound`` for an unknown call."""
        ...

    async def pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        """Entries started but whose tool result was never appended, oldest first."""
        ...

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        """Atomically record that the single-use token whose digest is ``digest`` was used.

        ``digest`` is a hex SHA-256 (64 lowercase hex characters, else ``UserError``): the store
        keeps digests only, never tokens. ``expires_at`` is when the token expires, in seconds
        since the epoch by the store's clock. Returns True the first time a digest is claimed and
        False while an unexpired claim of it exists — whichever process, connection or store
        instance over the same database made it. Claims are not owner-scoped (a digest is an HMAC
        output: it cannot collide across owners); an expired claim is deleted, a few per call and
        all of them by ``purge``. The caller still rejects expired tokens itself.
        """
        ...

    # -- compaction records (docs/adr/0010-compaction.md) ----------------------------------------
    async def append_record(self, owner: str, record: CompactionRecord) -> None:
        """Keep a compaction record beside its conversation's log (``record.conversation_id``).
        Its boundary must not pass the conversation's version (``UserError``: append the messages
        it stands for first); a record id already there is a ``ConflictError``. Encrypted like
        messages when encryption at rest is on."""
        ...

    async def latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        """The record appended last (the one a run's view starts from), or ``None``."""
        ...

    async def records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        """Every record of the conversation, oldest first."""
        ...

    async def delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        """Delete one record (``NotFound`` when the conversation has no such record): the view
        goes back to the previous record's, or to the full log. The log is untouched."""
        ...

    # -- search ----------------------------------------------------------------------------------
    async def search(
        self,
        owner: str,
        query: str,
        *,
        limit: int = 20,
        max_conversations: int = SCAN_CONVERSATIONS,
        max_bytes: int = SCAN_BYTES,
    ) -> SearchResults:
        """The ``limit`` messages of the owner's conversations best matching ``query``, best
        first, each with a snippet. An index where one may exist (SQLite FTS5, PostgreSQL
        full-text search); otherwise (``MemoryStore``, encryption at rest) a scan of the most
        recently updated conversations, bounded by ``max_conversations`` and ``max_bytes``
        (``SearchResults.complete`` is False when a bound stopped it)."""
        ...

    async def close(self) -> None:
        """Release connections and threads. Idempotent."""
        ...
