"""``BaseStore``: the ``Store`` contract written once. Every public method checks its arguments
(the same ``TetherError`` for the same bad input on every backend) and calls the backend's
underscored hook with checked values; a backend is its storage and nothing else."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import timedelta

from tether.messages import Message
from tether.stores._common import (
    BatchFacts,
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
    encode_batch,
    id_or_new,
    purge_cutoff,
    purge_with_hook,
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
from tether.stores._records import CompactionRecord, check_record
from tether.stores._search import check_search

__all__ = ["BaseStore"]


class BaseStore(ABC):
    """The checked ``Store`` methods over a backend's hooks (``_create``, ``_append``, ...): each
    hook receives validated ids and arguments and does the storage part only."""

    _clock: Callable[[], float]

    # -- conversations --------------------------------------------------------------------------
    async def create(self, owner: str, conversation_id: str | None = None, *, exist_ok: bool = False) -> str:
        """See ``Store.create``."""
        return await self._create(
            check_id(owner, "owner"), id_or_new(conversation_id, "conversation_id"), exist_ok
        )

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
        encoded = encode_batch(messages)  # the JSON contract can carry each message
        return await self._append(
            owner, conversation_id, messages, encoded, batch_facts(messages), expected_version
        )

    async def load(
        self,
        owner: str,
        conversation_id: str,
        *,
        tail: int | None = None,
        since: int | None = None,
        on_corrupt: OnCorrupt = "raise",
    ) -> Loaded:
        """See ``Store.load``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        check_load(tail, since, on_corrupt)
        return await self._load(owner, conversation_id, tail, since, on_corrupt)

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]:
        """See ``Store.conversations``."""
        owner = check_id(owner, "owner")
        limit, offset = check_paging(limit, offset)
        return await self._conversations(owner, limit, offset)

    async def info(self, owner: str, conversation_id: str) -> ConversationInfo:
        """See ``Store.info``."""
        return await self._info(*check_ids(owner, conversation_id))

    async def fork(
        self,
        owner: str,
        conversation_id: str,
        at_version: int | None = None,
        new_id: str | None = None,
    ) -> str:
        """See ``Store.fork`` (encrypted rows are re-sealed for the new conversation)."""
        owner, conversation_id = check_ids(owner, conversation_id)
        at_version = check_optional_count(at_version, "at_version")
        return await self._fork(owner, conversation_id, at_version, id_or_new(new_id, "new_id"))

    async def delete(self, owner: str, conversation_id: str) -> None:
        """See ``Store.delete``."""
        await self._delete(*check_ids(owner, conversation_id))

    async def purge(
        self,
        older_than: timedelta,
        *,
        owner: str | None = None,
        on_expire: ExpireHook | None = None,
    ) -> int:
        """See ``Store.purge``. Without a hook every idle conversation goes in one transaction;
        with one, each is deleted after its hook returns True, unless it was appended to meanwhile."""
        check_purge(older_than, owner, on_expire)
        owner = None if owner is None else check_id(owner, "owner")
        t = self._clock()
        cutoff = purge_cutoff(t, older_than)
        await self._expire_claims(t)
        if on_expire is None:
            return await self._delete_idle(cutoff, owner)
        idle = await self._idle(cutoff, owner)

        async def delete_if_unchanged(o: str, cid: str, version: int) -> bool:
            return await self._delete_if_unchanged(o, cid, version, cutoff)

        return await purge_with_hook(self, idle, on_expire, delete_if_unchanged)

    # -- the tool-effect ledger and replay guard ------------------------------------------------
    async def record_tool_started(
        self,
        owner: str,
        conversation_id: str,
        run_id: str,
        call_id: str,
        tool_name: str,
        arguments: str,
    ) -> bool:
        """See ``Store.record_tool_started`` (arguments are encrypted like messages)."""
        owner, conversation_id = check_ids(owner, conversation_id)
        run_id, call_id, tool_name, arguments = check_tool_call(run_id, call_id, tool_name, arguments)
        return await self._record_tool_started(owner, conversation_id, run_id, call_id, tool_name, arguments)

    async def record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, *, failed: bool = False
    ) -> None:
        """See ``Store.record_tool_finished``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        run_id, call_id = check_call(run_id, call_id)
        await self._record_tool_finished(owner, conversation_id, run_id, call_id, check_failed(failed))

    async def pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        """See ``Store.pending_tool_effects``."""
        return await self._pending_tool_effects(*check_ids(owner, conversation_id))

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        """See ``Store.claim_token``."""
        return await self._claim_token(*check_claim(digest, expires_at))

    # -- compaction records ---------------------------------------------------------------------
    async def append_record(self, owner: str, record: CompactionRecord) -> None:
        """See ``Store.append_record`` (sealed like messages when the store has a keyring)."""
        await self._append_record(check_id(owner, "owner"), check_record(record))

    async def latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        """See ``Store.latest_record``."""
        return await self._latest_record(*check_ids(owner, conversation_id))

    async def records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        """See ``Store.records``."""
        return await self._records(*check_ids(owner, conversation_id))

    async def delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        """See ``Store.delete_record``."""
        owner, conversation_id = check_ids(owner, conversation_id)
        await self._delete_record(owner, conversation_id, check_id(record_id, "record_id"))

    # -- search ---------------------------------------------------------------------------------
    async def search(
        self,
        owner: str,
        query: str,
        *,
        limit: int = 20,
        max_conversations: int = SCAN_CONVERSATIONS,
        max_bytes: int = SCAN_BYTES,
    ) -> SearchResults:
        """See ``Store.search`` (and the backend's class for how it searches)."""
        owner = check_id(owner, "owner")
        terms, limit, max_conversations, max_bytes = check_search(query, limit, max_conversations, max_bytes)
        return await self._search(owner, query, terms, limit, max_conversations, max_bytes)

    @abstractmethod
    async def close(self) -> None:
        """Release what the store holds. Idempotent."""

    # -- the backend's hooks: arguments checked --------------------------------------------------
    @abstractmethod
    async def _create(self, owner: str, conversation_id: str, exist_ok: bool) -> str: ...

    @abstractmethod
    async def _append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        encoded: list[bytes],
        facts: BatchFacts,
        expected_version: int | None,
    ) -> int: ...

    @abstractmethod
    async def _load(
        self, owner: str, conversation_id: str, tail: int | None, since: int | None, on_corrupt: OnCorrupt
    ) -> Loaded: ...

    @abstractmethod
    async def _conversations(self, owner: str, limit: int | None, offset: int) -> list[ConversationInfo]: ...

    @abstractmethod
    async def _info(self, owner: str, conversation_id: str) -> ConversationInfo: ...

    @abstractmethod
    async def _fork(self, owner: str, conversation_id: str, at_version: int | None, target: str) -> str: ...

    @abstractmethod
    async def _delete(self, owner: str, conversation_id: str) -> None: ...

    @abstractmethod
    async def _expire_claims(self, t: float) -> None:
        """Delete the replay-guard claims expired at ``t``."""

    @abstractmethod
    async def _delete_idle(self, cutoff: float, owner: str | None) -> int:
        """Delete every conversation (of ``owner``) not updated since ``cutoff``, at once."""

    @abstractmethod
    async def _idle(self, cutoff: float, owner: str | None) -> list[tuple[str, str]]:
        """(owner, id) of every conversation (of ``owner``) not updated since ``cutoff``."""

    @abstractmethod
    async def _delete_if_unchanged(
        self, owner: str, conversation_id: str, version: int, cutoff: float
    ) -> bool:
        """Delete the conversation if it is still at ``version`` and idle since ``cutoff``."""

    @abstractmethod
    async def _record_tool_started(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, tool_name: str, arguments: str
    ) -> bool: ...

    @abstractmethod
    async def _record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, failed: bool
    ) -> None: ...

    @abstractmethod
    async def _pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]: ...

    @abstractmethod
    async def _claim_token(self, digest: str, expires_at: float) -> bool: ...

    @abstractmethod
    async def _append_record(self, owner: str, record: CompactionRecord) -> None: ...

    @abstractmethod
    async def _latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None: ...

    @abstractmethod
    async def _records(self, owner: str, conversation_id: str) -> list[CompactionRecord]: ...

    @abstractmethod
    async def _delete_record(self, owner: str, conversation_id: str, record_id: str) -> None: ...

    @abstractmethod
    async def _search(
        self, owner: str, query: str, terms: list[str], limit: int, max_conversations: int, max_bytes: int
    ) -> SearchResults: ...
