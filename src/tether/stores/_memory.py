"""``MemoryStore``: the Store contract in process memory (tests, prototypes, one-process apps)."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from msgspec.structs import replace

from tether.messages import Message
from tether.stores._common import (
    GUARD_PURGE_BATCH,
    batch_facts,
    check_append,
    check_call,
    check_claim,
    check_failed,
    check_id,
    check_ids,
    check_load,
    check_optional_count,
    check_paging,
    check_purge,
    check_tool_call,
    check_version,
    deleted,
    encode_batch,
    exists,
    fork_point,
    id_or_new,
    load_offset,
    not_found,
    now,
    purge_cutoff,
    purge_with_hook,
    to_datetime,
    unknown_call,
)
from tether.stores._protocol import (
    SCAN_BYTES,
    SCAN_CONVERSATIONS,
    ConversationInfo,
    ExpireHook,
    Loaded,
    OnCorrupt,
    SearchResults,
    ToolEffect,
)
from tether.stores._records import (
    CompactionRecord,
    boundary_error,
    check_record,
    dumps_record,
    duplicate_record,
    record_not_found,
)
from tether.stores._search import check_search, scan_search

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


class MemoryStore:
    """An in-memory ``Store``. Messages are immutable, so they are kept as objects, never copied.

    Safe to share between tasks and threads of one process; nothing survives the process.
    ``clock`` returns seconds since the epoch (retention tests pass their own). It refuses what
    the durable stores refuse (a message the JSON contract cannot carry, a bad id), so code
    tested against it behaves the same on them.
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

    def _info(self, conversation_id: str, c: _Conversation) -> ConversationInfo:
        return ConversationInfo(
            conversation_id=conversation_id,
            version=len(c.messages),
            created_at=to_datetime(c.created_at),
            updated_at=to_datetime(c.updated_at),
            preview=c.preview,
            last_model=c.last_model,
            forked_from=c.forked_from,
        )

    async def create(self, owner: str, conversation_id: str | None = None, *, exist_ok: bool = False) -> str:
        """See ``Store.create``."""
        owner = check_id(owner, "owner")
        cid = id_or_new(conversation_id, "conversation_id")
        with self._lock:
            existing = self._data.get((owner, cid))
            if existing is not None:
                if exist_ok:
                    return cid
                raise exists(cid, len(existing.messages))
            if exist_ok and (owner, cid) in self._deleted:
                raise deleted(cid)
            self._deleted.discard((owner, cid))
            t = self._clock()
            self._data[(owner, cid)] = _Conversation(next(self._pks), created_at=t, updated_at=t)
        return cid

    async def append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int | None = None,
    ) -> int:
        """See ``Store.append``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        check_append(messages, expected_version)
        encode_batch(messages)  # the durable stores' check: the JSON contract can carry each message
        facts = batch_facts(messages)
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

    async def load(
        self,
        owner: str,
        conversation_id: str,
        *,
        tail: int | None = None,
        since: int | None = None,
        on_corrupt: OnCorrupt = "raise",
    ) -> Loaded:
        """See ``Store.load``. Memory never holds a corrupt row."""
        owner, conversation_id = check_ids(owner, conversation_id)
        check_load(tail, since, on_corrupt)
        with self._lock:
            c = self._get(owner, conversation_id)
            version = len(c.messages)
            offset = load_offset(conversation_id, version, tail, since)
            return Loaded(conversation_id, tuple(c.messages[offset:]), version, offset)

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]:
        """See ``Store.conversations``."""
        owner = check_id(owner, "owner")
        limit, offset = check_paging(limit, offset)
        with self._lock:
            mine = [(cid, c) for (o, cid), c in self._data.items() if o == owner]
        mine.sort(key=lambda item: (item[1].updated_at, item[1].pk), reverse=True)
        end = None if limit is None else offset + limit
        return [self._info(cid, c) for cid, c in mine[offset:end]]

    async def info(self, owner: str, conversation_id: str) -> ConversationInfo:
        """See ``Store.info``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        with self._lock:
            return self._info(conversation_id, self._get(owner, conversation_id))

    async def fork(
        self,
        owner: str,
        conversation_id: str,
        at_version: int | None = None,
        new_id: str | None = None,
    ) -> str:
        """See ``Store.fork``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        at_version = check_optional_count(at_version, "at_version")
        target = id_or_new(new_id, "new_id")
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

    async def delete(self, owner: str, conversation_id: str) -> None:
        """See ``Store.delete``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        with self._lock:
            self._get(owner, conversation_id)
            del self._data[(owner, conversation_id)]
            self._deleted.add((owner, conversation_id))

    async def purge(
        self,
        older_than: timedelta,
        *,
        owner: str | None = None,
        on_expire: ExpireHook | None = None,
    ) -> int:
        """See ``Store.purge``."""
        check_purge(older_than, owner, on_expire)
        owner = None if owner is None else check_id(owner, "owner")
        t = self._clock()
        cutoff = purge_cutoff(t, older_than)
        with self._lock:
            self._purge_guards(t, None)
            idle = [
                key
                for key, c in self._data.items()
                if c.updated_at < cutoff and (owner is None or key[0] == owner)
            ]
            if on_expire is None:
                for key in idle:
                    del self._data[key]
                    self._deleted.add(key)
                return len(idle)

        async def delete_if_unchanged(o: str, cid: str, version: int) -> bool:
            with self._lock:
                c = self._data.get((o, cid))
                if c is None or len(c.messages) != version or c.updated_at >= cutoff:
                    return False
                del self._data[(o, cid)]
                self._deleted.add((o, cid))
                return True

        return await purge_with_hook(self, idle, on_expire, delete_if_unchanged)

    async def record_tool_started(
        self,
        owner: str,
        conversation_id: str,
        run_id: str,
        call_id: str,
        tool_name: str,
        arguments: str,
    ) -> bool:
        """See ``Store.record_tool_started``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        run_id, call_id, tool_name, arguments = check_tool_call(run_id, call_id, tool_name, arguments)
        with self._lock:
            c = self._get(owner, conversation_id)
            key = (run_id, call_id)
            existing = c.effects.get(key)
            if existing is not None and not existing.stored:
                return False
            c.effects[key] = _Effect(run_id, tool_name, arguments, self._clock())
            return True

    async def record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, *, failed: bool = False
    ) -> None:
        """See ``Store.record_tool_finished``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        run_id, call_id = check_call(run_id, call_id)
        failed = check_failed(failed)
        with self._lock:
            c = self._get(owner, conversation_id)
            effect = c.effects.get((run_id, call_id))
            if effect is None:
                raise unknown_call(call_id, run_id)
            effect.finished = True
            effect.failed = failed

    async def pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        """See ``Store.pending_tool_effects``."""
        owner, conversation_id = check_ids(owner, conversation_id)
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

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        """See ``Store.claim_token``."""
        digest, expires_at = check_claim(digest, expires_at)
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
    async def append_record(self, owner: str, record: CompactionRecord) -> None:
        """See ``Store.append_record``."""
        owner = check_id(owner, "owner")
        record = check_record(record)
        dumps_record(record)  # the durable stores' check: the JSON shape can carry it
        with self._lock:
            c = self._get(owner, record.conversation_id)
            if record.boundary > len(c.messages):
                raise boundary_error(record, len(c.messages))
            if any(r.id == record.id for r in c.records):
                raise duplicate_record(record)
            c.records.append(record)

    async def latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        """See ``Store.latest_record``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        with self._lock:
            records = self._get(owner, conversation_id).records
            return records[-1] if records else None

    async def records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        """See ``Store.records``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        with self._lock:
            return list(self._get(owner, conversation_id).records)

    async def delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        """See ``Store.delete_record``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        record_id = check_id(record_id, "record_id")
        with self._lock:
            c = self._get(owner, conversation_id)
            kept = [r for r in c.records if r.id != record_id]
            if len(kept) == len(c.records):
                raise record_not_found(conversation_id, record_id)
            c.records = kept

    # -- search ------------------------------------------------------------------------------------
    async def search(
        self,
        owner: str,
        query: str,
        *,
        limit: int = 20,
        max_conversations: int = SCAN_CONVERSATIONS,
        max_bytes: int = SCAN_BYTES,
    ) -> SearchResults:
        """See ``Store.search``: a scan of the owner's conversations (``search_messages``), most
        recently updated first, bounded by ``max_conversations`` (memory holds no bytes to count)."""
        owner = check_id(owner, "owner")
        check_search(query, limit, max_conversations, max_bytes)
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
