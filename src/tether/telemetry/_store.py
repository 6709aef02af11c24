"""``TracedStore``: any ``Store`` with every call a client span (``db.system.name``,
``db.operation.name``, ``db.collection.name``, ``gen_ai.conversation.id``, message counts and
versions; never message content, never the owner).

A run with telemetry on wraps its recorder's store calls itself; an application (the HTTP
service) wraps the store it uses outside runs: ``TracedStore(store)``. Outside a configured
tracer or meter provider a call costs one settings check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from tether.errors import UserError
from tether.messages import Message

from . import _names as n
from ._settings import Telemetry, default_telemetry

if TYPE_CHECKING:
    from tether.stores import (
        CompactionRecord,
        ConversationInfo,
        ExpireHook,
        Loaded,
        OnCorrupt,
        SearchResults,
        Store,
        ToolEffect,
    )

    from ._otel import AttributeValue, Instruments

__all__ = ["TracedStore", "db_system"]

T = TypeVar("T")

_SYSTEMS = {"SQLiteStore": "sqlite", "PostgresStore": "postgresql", "MemoryStore": "tether.memory"}
_CONVERSATIONS = "tether_conversations"
_MESSAGES = "tether_messages"
_EFFECTS = "tether_tool_effects"
_GUARD = "tether_replay_guard"
_RECORDS = "tether_compactions"
_SEARCH = "tether_search"


def db_system(store: object) -> str:
    """``db.system.name`` of a store: ``sqlite``, ``postgresql``, ``tether.memory`` for tether's
    stores (and their subclasses), a ``db_system`` attribute of the store, else ``other_sql``."""
    declared = getattr(store, "db_system", None)
    if isinstance(declared, str) and declared:
        return declared
    for klass in type(store).__mro__:
        system = _SYSTEMS.get(klass.__name__)
        if system is not None:
            return system
    return "other_sql"


class TracedStore:
    """``store`` with each call traced (see the module docstring). ``telemetry``: where the spans
    go (default: ``tether.telemetry.configure``'s setting, OpenTelemetry's global providers).
    It is a ``Store`` itself (and a replay guard when ``store`` is one)."""

    __slots__ = ("_inst", "_telemetry", "inner", "system")

    def __init__(
        self, store: Store, telemetry: Telemetry | None = None, *, system: str | None = None
    ) -> None:
        if isinstance(store, TracedStore):
            raise UserError("the store is traced already")
        if not callable(getattr(store, "append", None)) or not callable(getattr(store, "load", None)):
            raise UserError(f"TracedStore wraps a tether Store, not {type(store).__name__}")
        self.inner = store
        self.system = system or db_system(store)
        self._telemetry = telemetry
        self._inst: Instruments | None = None

    @classmethod
    def bound(cls, store: Store, instruments: Instruments) -> TracedStore:
        """Traced with a run's instruments (the spans are children of the current span)."""
        traced = cls(store)
        traced._inst = instruments
        return traced

    def __repr__(self) -> str:
        return f"TracedStore({self.inner!r})"

    def _instruments(self) -> Instruments | None:
        if self._inst is not None:
            return self._inst
        return (self._telemetry or default_telemetry()).instruments()

    async def _call(
        self,
        operation: str,
        collection: str,
        conversation_id: str | None,
        work: Callable[[], Awaitable[T]],
        extra: Mapping[str, AttributeValue] | None = None,
        after: Callable[[T], Mapping[str, AttributeValue]] | None = None,
    ) -> T:
        inst = self._instruments()
        if inst is None:
            return await work()
        attributes: dict[str, AttributeValue] = {
            n.DB_SYSTEM_NAME: self.system,
            n.DB_OPERATION_NAME: operation,
            n.DB_COLLECTION_NAME: collection,
        }
        if conversation_id:
            attributes[n.GEN_AI_CONVERSATION_ID] = conversation_id
        if extra:
            attributes.update(extra)
        with inst.client_span(f"{operation} {collection}", attributes) as span:
            value = await work()
            if after is not None:
                span.set_attributes(after(value))
            return value

    # -- the Store protocol -----------------------------------------------------------------------
    async def create(self, owner: str, conversation_id: str | None = None, *, exist_ok: bool = False) -> str:
        return await self._call(
            "create",
            _CONVERSATIONS,
            conversation_id,
            lambda: self.inner.create(owner, conversation_id, exist_ok=exist_ok),
            after=lambda cid: {n.GEN_AI_CONVERSATION_ID: cid},
        )

    async def append(
        self,
        owner: str,
        conversation_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int | None = None,
    ) -> int:
        return await self._call(
            "append",
            _MESSAGES,
            conversation_id,
            lambda: self.inner.append(owner, conversation_id, messages, expected_version=expected_version),
            {n.TETHER_STORE_MESSAGES: len(messages)},
            lambda version: {n.TETHER_STORE_VERSION: version},
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
        return await self._call(
            "load",
            _MESSAGES,
            conversation_id,
            lambda: self.inner.load(owner, conversation_id, tail=tail, since=since, on_corrupt=on_corrupt),
            after=lambda loaded: {
                n.TETHER_STORE_MESSAGES: len(loaded.messages),
                n.TETHER_STORE_VERSION: loaded.version,
            },
        )

    async def conversations(
        self, owner: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ConversationInfo]:
        return await self._call(
            "conversations",
            _CONVERSATIONS,
            None,
            lambda: self.inner.conversations(owner, limit=limit, offset=offset),
        )

    async def info(self, owner: str, conversation_id: str) -> ConversationInfo:
        return await self._call(
            "info", _CONVERSATIONS, conversation_id, lambda: self.inner.info(owner, conversation_id)
        )

    async def fork(
        self,
        owner: str,
        conversation_id: str,
        at_version: int | None = None,
        new_id: str | None = None,
    ) -> str:
        return await self._call(
            "fork",
            _CONVERSATIONS,
            conversation_id,
            lambda: self.inner.fork(owner, conversation_id, at_version, new_id),
            after=lambda fork_id: {n.TETHER_STORE_FORK_ID: fork_id},
        )

    async def delete(self, owner: str, conversation_id: str) -> None:
        await self._call(
            "delete", _CONVERSATIONS, conversation_id, lambda: self.inner.delete(owner, conversation_id)
        )

    async def purge(
        self,
        older_than: timedelta,
        *,
        owner: str | None = None,
        on_expire: ExpireHook | None = None,
    ) -> int:
        return await self._call(
            "purge",
            _CONVERSATIONS,
            None,
            lambda: self.inner.purge(older_than, owner=owner, on_expire=on_expire),
            after=lambda deleted: {n.TETHER_STORE_DELETED: deleted},
        )

    async def record_tool_started(
        self,
        owner: str,
        conversation_id: str,
        run_id: str,
        call_id: str,
        tool_name: str,
        arguments: str,
    ) -> bool:
        return await self._call(
            "record_tool_started",
            _EFFECTS,
            conversation_id,
            lambda: self.inner.record_tool_started(
                owner, conversation_id, run_id, call_id, tool_name, arguments
            ),
            {n.TETHER_RUN_ID: run_id, n.GEN_AI_TOOL_CALL_ID: call_id, n.GEN_AI_TOOL_NAME: tool_name},
            lambda wrote: {n.TETHER_STORE_ENTRY_WRITTEN: wrote},
        )

    async def record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, *, failed: bool = False
    ) -> None:
        await self._call(
            "record_tool_finished",
            _EFFECTS,
            conversation_id,
            lambda: self.inner.record_tool_finished(owner, conversation_id, run_id, call_id, failed=failed),
            {n.TETHER_RUN_ID: run_id, n.GEN_AI_TOOL_CALL_ID: call_id},
        )

    async def pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        return await self._call(
            "pending_tool_effects",
            _EFFECTS,
            conversation_id,
            lambda: self.inner.pending_tool_effects(owner, conversation_id),
            after=lambda effects: {n.TETHER_STORE_PENDING_EFFECTS: len(effects)},
        )

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        """The replay guard of the wrapped store (``Agent(replay_guard=TracedStore(store))``)."""
        claim: Any = getattr(self.inner, "claim_token", None)
        if claim is None:
            raise UserError(f"{type(self.inner).__name__} is not a replay guard (it has no claim_token)")
        return await self._call("claim_token", _GUARD, None, lambda: claim(digest, expires_at))

    async def append_record(self, owner: str, record: CompactionRecord) -> None:
        await self._call(
            "append_record",
            _RECORDS,
            record.conversation_id,
            lambda: self.inner.append_record(owner, record),
            {n.TETHER_STORE_VERSION: record.boundary},
        )

    async def latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        return await self._call(
            "latest_record",
            _RECORDS,
            conversation_id,
            lambda: self.inner.latest_record(owner, conversation_id),
        )

    async def records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        return await self._call(
            "records", _RECORDS, conversation_id, lambda: self.inner.records(owner, conversation_id)
        )

    async def delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        await self._call(
            "delete_record",
            _RECORDS,
            conversation_id,
            lambda: self.inner.delete_record(owner, conversation_id, record_id),
        )

    async def search(
        self,
        owner: str,
        query: str,
        *,
        limit: int = 20,
        max_conversations: int = 200,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> SearchResults:
        return await self._call(
            "search",
            _SEARCH,
            None,
            lambda: self.inner.search(
                owner, query, limit=limit, max_conversations=max_conversations, max_bytes=max_bytes
            ),
        )

    async def close(self) -> None:
        await self.inner.close()
