"""``BaseStore`` writes the ``Store`` contract once: a backend implements only the storage hooks
(``_create``, ``_append``, ...), and never sees an argument the contract refuses. ``Probe`` is such
a backend that stores nothing and notes every hook it is asked to run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tether import Message, UserError, assistant, user
from tether.stores import CompactionRecord, ConversationInfo, Loaded, SearchResults, ToolEffect
from tether.stores._base import BaseStore
from tether.stores._common import BatchFacts

from .test_arguments import ALICE, BAD_IDS, id_calls


class Probe(BaseStore):
    def __init__(self) -> None:
        self._clock = lambda: 1_700_000_000.0
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def _hit(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    async def close(self) -> None:
        self._hit("close")

    async def _create(self, owner: str, conversation_id: str, exist_ok: bool) -> str:
        self._hit("create", owner, conversation_id, exist_ok)
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
        self._hit("append", owner, conversation_id, encoded, facts.preview, expected_version)
        return len(messages)

    async def _load(
        self, owner: str, conversation_id: str, tail: int | None, since: int | None, on_corrupt: Any
    ) -> Loaded:
        self._hit("load", owner, conversation_id, tail, since, on_corrupt)
        return Loaded(conversation_id, (), 0, 0)

    async def _conversations(self, owner: str, limit: int | None, offset: int) -> list[ConversationInfo]:
        self._hit("conversations", owner, limit, offset)
        return []

    async def _info(self, owner: str, conversation_id: str) -> ConversationInfo:
        self._hit("info", owner, conversation_id)
        t = datetime.now(UTC)
        return ConversationInfo(conversation_id, 0, t, t)

    async def _fork(self, owner: str, conversation_id: str, at_version: int | None, target: str) -> str:
        self._hit("fork", owner, conversation_id, at_version, target)
        return target

    async def _delete(self, owner: str, conversation_id: str) -> None:
        self._hit("delete", owner, conversation_id)

    async def _expire_claims(self, t: float) -> None:
        self._hit("expire_claims", t)

    async def _delete_idle(self, cutoff: float, owner: str | None) -> int:
        self._hit("delete_idle", cutoff, owner)
        return 0

    async def _idle(self, cutoff: float, owner: str | None) -> list[tuple[str, str]]:
        self._hit("idle", cutoff, owner)
        return []

    async def _delete_if_unchanged(
        self, owner: str, conversation_id: str, version: int, cutoff: float
    ) -> bool:
        self._hit("delete_if_unchanged", owner, conversation_id, version, cutoff)
        return False

    async def _record_tool_started(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, tool_name: str, arguments: str
    ) -> bool:
        self._hit("record_tool_started", owner, conversation_id, run_id, call_id, tool_name, arguments)
        return True

    async def _record_tool_finished(
        self, owner: str, conversation_id: str, run_id: str, call_id: str, failed: bool
    ) -> None:
        self._hit("record_tool_finished", owner, conversation_id, run_id, call_id, failed)

    async def _pending_tool_effects(self, owner: str, conversation_id: str) -> list[ToolEffect]:
        self._hit("pending_tool_effects", owner, conversation_id)
        return []

    async def _claim_token(self, digest: str, expires_at: float) -> bool:
        self._hit("claim_token", digest, expires_at)
        return True

    async def _append_record(self, owner: str, record: CompactionRecord) -> None:
        self._hit("append_record", owner, record.id)

    async def _latest_record(self, owner: str, conversation_id: str) -> CompactionRecord | None:
        self._hit("latest_record", owner, conversation_id)
        return None

    async def _records(self, owner: str, conversation_id: str) -> list[CompactionRecord]:
        self._hit("records", owner, conversation_id)
        return []

    async def _delete_record(self, owner: str, conversation_id: str, record_id: str) -> None:
        self._hit("delete_record", owner, conversation_id, record_id)

    async def _search(
        self, owner: str, query: str, terms: list[str], limit: int, max_conversations: int, max_bytes: int
    ) -> SearchResults:
        self._hit("search", owner, query, terms, limit, max_conversations, max_bytes)
        return SearchResults((), "scan", 0)


@pytest.mark.parametrize("kind", list(BAD_IDS))
async def test_a_backend_never_sees_a_bad_id(kind: str) -> None:
    probe = Probe()
    for (method, argument), call in id_calls(probe, "chat").items():
        with pytest.raises(UserError, match=argument):
            await call(BAD_IDS[kind])
        assert probe.calls == [], (method, argument)


async def test_bad_arguments_other_than_ids_stop_before_the_backend() -> None:
    probe = Probe()
    refused: list[Callable[[], Awaitable[object]]] = [
        lambda: probe.append(ALICE, "c", [user("x")], expected_version=-1),
        lambda: probe.append(ALICE, "c", ["not a message"]),  # type: ignore[list-item]
        lambda: probe.load(ALICE, "c", tail=-1),
        lambda: probe.load(ALICE, "c", on_corrupt="ignore"),  # type: ignore[arg-type]
        lambda: probe.conversations(ALICE, limit=-1),
        lambda: probe.fork(ALICE, "c", at_version=-1),
        lambda: probe.purge(timedelta(days=-1)),
        lambda: probe.purge(timedelta(days=1), on_expire="yes"),  # type: ignore[arg-type]
        lambda: probe.record_tool_finished(ALICE, "c", "r", "k", failed="no"),  # type: ignore[arg-type]
        lambda: probe.claim_token("not a digest", 1.0),
        lambda: probe.append_record(ALICE, "a record"),  # type: ignore[arg-type]
        lambda: probe.search(ALICE, "   "),
        lambda: probe.search(ALICE, "word", limit=0),
    ]
    for k, call in enumerate(refused):
        with pytest.raises(UserError):
            await call()
        assert probe.calls == [], k
    assert probe.calls == []


async def test_the_hooks_get_checked_values() -> None:
    probe = Probe()
    cid = await probe.create(ALICE)
    await probe.append(ALICE, cid, [user("hello there"), assistant("hi")], expected_version=0)
    await probe.purge(timedelta(seconds=10), owner=ALICE)
    await probe.search(ALICE, "hello  world", limit=3)
    (create, append, expire, delete_idle, search) = probe.calls
    assert cid
    assert create == ("create", (ALICE, cid, False))
    name, (owner, conversation, encoded, preview, expected) = append
    assert (name, owner, conversation, preview, expected) == ("append", ALICE, cid, "hello there", 0)
    assert len(encoded) == 2
    assert all(isinstance(b, bytes) and b.startswith(b"{") for b in encoded)
    assert expire == ("expire_claims", (1_700_000_000.0,))
    assert delete_idle == ("delete_idle", (1_700_000_000.0 - 10, ALICE))
    assert search == ("search", (ALICE, "hello  world", ["hello", "world"], 3, *search[1][4:]))
