"""``MemoryStore``: the Store contract in process memory (tests, prototypes, one-process apps)."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field

from msgspec.structs import replace

from tether.messages import Message
from tether.stores._base import BaseStore
from tether.stores._common import (
    GUARD_PURGE_BATCH,
    BatchFacts,
    batch_facts,
    check_version,
    deleted,
    exists,
    fork_point,
    load_offset,
    not_found,
    now,
    to_datetime,
    unknown_call,
)
from tether.stores._protocol import ConversationInfo, Loaded, OnCorrupt, SearchResults, ToolEffect
from tether.stores._records import (
    CompactionRecord,
    boundary_error,
    dumps_record,
    duplicate_record,
    record_not_found,
)
from tether.stores._search import scan_search

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Effect:
    run_id: str
    tool_name: str
    arguments: str
    started_at: float
    finished: bool = False
    failed: bool = False
    stored: bool = False


@dataclass(slots=True)
class _Conversation:
    pk: int  # creation order: the listing's tie-break, as the SQL stores' primary key
    created_at: float
    updated_at: float
    messages: list[Message] = field(default_factory=lambda: [])
    preview: str | None = None
    last_model: str | None = None
    forked_from: tuple[str, int] | None = None
    effects: dict[tuple[str, str], _Effect] = field(default_factory=lambda: {})
    records: list[CompactionRecord] = field(default_factory=lambda: [])


class MemoryStore(BaseStore):
    """An in-memory ``Store``. Messages are immutable, so they are kept as objects, never copied.

    Safe to share between tasks and threads of one process; nothing survives the process.
    ``clock`` returns seconds since the epoch (retention tests pass their own). It refuses what
    the durable stores refuse (a message the JSON contract cannot carry, a bad id), so code
    tested against it behaves the same on them. ``search`` scans the owner's conversations
    (``search_messages``), most recently updated first, bounded by ``max_conversations`` (memory
    holds no bytes to count).
    """

    def __init__(self, *, clock: Callable[[], float] = now) -> None:
        self._data: dict[tuple[str, str], _Conversation] = {}
        self._deleted: set[tuple[str, str]] = set()
        """Deleted conversations' ``(owner, id)``: never created again (as the SQL stores)."""
        self._lock = threading.Lock()
        self._clock = clock
        self._pks = itertools.count(1)
        self._guards: dict[str, float] = {}  # digest -> expires_at
        self._expiries: list[tuple[float, str]] = []  # heap of (expires_at, digest), may be stale

    def _get(self, owner: str, conversation_id: str) -> _Conversation:
        conversation = self._data.get((owner, conversation_id))
        if conversation is None:
            raise not_found(conversation_id)
        return conversation

    def _describe(self, conversation_id: str, c: _Conversation) -> ConversationInfo:
        return ConversationInfo(
            conversation_id=conversation_id,
            version=len(c.messages),
            created_at=to_datetime(c.created_at),
            updated_at=to_datetime(c.updated_at),
            preview=c.preview,
            last_model=c.last_model,
            forked_from=c.forked_from,
        )

    async def _create(self, owner: str, conversation_id: str, exist_ok: bool) -> str:
        with self._lock:
            existing = self._data.get((owner, conversation_id))
            if existing is not None:
                if exist_ok:
                    return conversation_id
                raise exists(conversation_id, len(existing.messages))
            if exist_ok and (owner, conversation_id) in self._deleted:
                raise deleted(conversation_id)
            self._deleted.discard((owner, conversation_id))
            t = self._clock()
            self._data[(owner, conversation_id)] = _Conversation(next(self._pks), created_at=t, updated_at=t)
        return conversation_id

    async def _append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        encoded: list[bytes],
        facts: BatchFacts,
        expected_version: int | None,
    ) -> int:
        with self._lock:
            c = self._get(owner, conversation_id)
            version = len(c.messages)
            check_version(conversation_id, expected_version, version)
            if not messages:
                return version
            c.messages.extend(messages)
            c.updated_at = self._clock()
            if c.preview is None:
                c.preview = facts.preview
            if facts.last_model is not None:
                c.last_model = facts.last_model
            open_effects = [(k, e) for k, e in c.effects.items() if not e.stored] if facts.results else []
            for run_id, call_id in facts.results if open_effects else ():
                for (e_run, e_call), effect in open_effects:
                    if e_call == call_id and (run_id is None or e_run == run_id):
                        effect.stored = True
            return len(c.messages)

    async def _load(
        self, owner: str, conversation_id: str, tail: int | None, since: int | None, on_corrupt: OnCorrupt
    ) -> Loaded:
        with self._lock:  # memory never holds a corrupt row
            c = self._get(owner, conversation_id)
            version = len(c.messages)
            offset = load_offset(conversation_id, version, tail, since)
            return Loaded(conversation_id, tuple(c.messages[offset:]), version, offset)

    async def _conversations(self, owner: str, limit: int | None, offset: int) -> list[ConversationInfo]:
        with self._lock:
            mine = [(cid, c) for (o, cid), c in self._data.items() if o == owner]
        mine.sort(key=lambda item: (item[1].updated_at, item[1].pk), reverse=True)
        end = None if limit is None else offset + limit
        return [self._describe(cid, c) for cid, c in mine[offset:end]]

    async def _info(self, owner: str, conversation_id: str) -> ConversationInfo:
        with self._lock:
            return self._describe(conversation_id, self._get(owner, conversation_id))

    async def _fork(self, owner: str, conversation_id: str, at_version: int | None, target: str) -> str:
        with self._lock:
            c = self._get(owner, conversation_id)
            at = fork_point(at_version, len(c.messages))
            if (owner, target) in self._data:
                raise exists(target, len(self._data[(owner, target)].messages))
            self._deleted.discard((owner, target))
            copied = c.messages[:at]
            facts = batch_facts(copied)
            t = self._clock()
            self._data[(owner, target)] = _Conversation(
                next(self._pks),
                created_at=t,
                updated_at=t,
                messages=list(copied),
                preview=facts.preview,
                last_model=facts.last_model,
                forked_from=(conversation_id, at),
                records=[replace(r, conversation_id=target) for r in c.records if r.boundary <= at],
            )
        return target

    async def _delete(self, owner: str, conversation_id: str) -> None:
        with self._lock:
            self._get(owner, conversation_id)
            del self._data[(owner, conversation_id)]
            self._deleted.add((owner, conversation_id))

    async def _expire_claims(self, t: float) -> None:
        with self._lock:
            self._purge_guards(t, None)

    def _idle_keys(self, cutoff: float, owner: str | None) -> list[tuple[str, str]]:
        return [
            key
            for key, c in self._data.items()
            if c.updated_at < cutoff and (owner is None or key[0] == owner)
        ]

    async def _delete_idle(self, cutoff: float, owner: str | None) -> int:
        with self._lock:
            idle = self._idle_keys(cutoff, owner)
            for key in idle:
                del self._data[key]
                self._deleted.add(key)
            return len(idle)

    async def _idle(self, cutoff: float, owner: str | None) -> list[tuple[str, str]]:
        with self._lock:
            return self._idle_keys(cutoff, owner)

    async def _delete_if_unchanged(
        self, owner: str, conversation_id: str, version: int, cutoff: float
    ) -> bool:
        with self._lock:
            c = self._data.get((owner, conversation_id))
            if c is None or len(c.messages) != version or c.updated_at >= cutoff:
                return False
            del self._data[(owner, conversation_id)]
            self._deleted.add((owner, conversation_id))
            return True

    async def _record_tool_started(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, tool_name: str, arguments: str
    ) -> bool:
        with self._lock:
            c = self._get(owner, conversation_id)
            key = (run_id, call_id)
            existing = c.effects.get(key)
            if existing is not None and not existing.stored:
                return False
            c.effects[key] = _Effect(run_id, tool_name, arguments, self._clock())
            return True

    async def _record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, failed: bool
    ) -> None:
        with self._lock:
            c = self._get(owner, conversation_id)
            effect = c.effects.get((run_id, call_id))
            if effect is None:
                raise unknown_call(call_id, run_id)
            effect.finished = True
            effect.failed = failed

    async def _pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        with self._lock:
            c = self._get(owner, conversation_id)
            pending = [(call_id, e) for (_, call_id), e in c.effects.items() if not e.stored]
        return [
            ToolEffect(
                conversation_id=conversation_id,
                run_id=e.run_id,
                call_id=call_id,
                tool_name=e.tool_name,
                arguments=e.arguments,
                started_at=to_datetime(e.started_at),
                finished=e.finished,
                failed=e.failed,
            )
            for call_id, e in sorted(pending, key=lambda item: item[1].started_at)
        ]

    async def _claim_token(self, digest: str, expires_at: float) -> bool:
        with self._lock:
            t = self._clock()
            self._purge_guards(t, GUARD_PURGE_BATCH)
            held = self._guards.get(digest)
            if held is not None and held > t:
                return False
            self._guards[digest] = expires_at
            heapq.heappush(self._expiries, (expires_at, digest))
            return True

    def _purge_guards(self, t: float, limit: int | None) -> None:
        """Delete claims expired at ``t`` (at most ``limit``); the lock is held."""
        expiries, guards = self._expiries, self._guards
        done = 0
        while expiries and expiries[0][0] <= t and (limit is None or done < limit):
            expires, digest = heapq.heappop(expiries)
            if guards.get(digest) == expires:  # else a stale heap entry: the claim was renewed
                del guards[digest]
            done += 1

    # -- compaction records ---------------------------------------------------------------------
    async def _append_record(self, owner: str, record: CompactionRecord) -> None:
        dumps_record(record)  # the durable stores' check: the JSON shape can carry it
        with self._lock:
            c = self._get(owner, record.conversation_id)
            if record.boundary > len(c.messages):
                raise boundary_error(record, len(c.messages))
            if any(r.id == record.id for r in c.records):
                raise duplicate_record(record)
            c.records.append(record)

    async def _latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        with self._lock:
            records = self._get(owner, conversation_id).records
            return records[-1] if records else None

    async def _records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        with self._lock:
            return list(self._get(owner, conversation_id).records)

    async def _delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        with self._lock:
            c = self._get(owner, conversation_id)
            kept = [r for r in c.records if r.id != record_id]
            if len(kept) == len(c.records):
                raise record_not_found(conversation_id, record_id)
            c.records = kept

    # -- search ------------------------------------------------------------------------------------
    async def _search(
        self, owner: str, query: str, terms: list[str], limit: int, max_conversations: int, max_bytes: int
    ) -> SearchResults:
        with self._lock:
            mine = [(cid, c) for (o, cid), c in self._data.items() if o == owner]
            mine.sort(key=lambda item: (item[1].updated_at, item[1].pk), reverse=True)
            snapshot = [(cid, tuple(c.messages)) for cid, c in mine]

        async def conversations() -> AsyncGenerator[tuple[str, Sequence[Message], int]]:
            for cid, messages in snapshot:
                yield cid, messages, 0

        return await scan_search(
            conversations(), query, limit=limit, max_conversations=max_conversations, max_bytes=max_bytes
        )

    async def close(self) -> None:
        """Nothing to release."""
