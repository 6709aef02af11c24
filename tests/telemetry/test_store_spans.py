"""``TracedStore`` and the run's store spans on each real store: the system name, the operation,
the conversation id, counts and failures, never content or the owner."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from opentelemetry.trace import StatusCode

from tether import ConflictError, UserError, user
from tether.stores import MemoryStore, PostgresStore, SQLiteStore, Store
from tether.telemetry import TracedStore, db_system

from .conftest import Otel


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    s: Store
    if request.param == "memory":
        s = MemoryStore()
    elif request.param == "sqlite":
        s = SQLiteStore(tmp_path / "c.db")
    else:
        s = PostgresStore(request.getfixturevalue("pg_dsn"), schema=request.getfixturevalue("pg_schema"))
    try:
        yield s
    finally:
        await s.close()


async def test_store_calls_are_client_spans_without_content(otel: Otel, store: Store) -> None:
    traced = TracedStore(store, otel.telemetry())
    cid = await traced.create("owner-secret")
    version = await traced.append("owner-secret", cid, [user("very private words")], expected_version=0)
    with pytest.raises(ConflictError):
        await traced.append("owner-secret", cid, [user("late")], expected_version=0)
    loaded = await traced.load("owner-secret", cid)
    assert loaded.version == version == 1
    spans = otel.spans()
    assert [s.name for s in spans] == [
        "create tether_conversations",
        "append tether_messages",
        "append tether_messages",
        "load tether_messages",
    ]
    system = {"MemoryStore": "tether.memory", "SQLiteStore": "sqlite", "PostgresStore": "postgresql"}[
        type(store).__name__
    ]
    assert db_system(store) == system
    for span in spans:
        a = dict(span.attributes or {})
        assert a["db.system.name"] == system
        assert a["gen_ai.conversation.id"] == cid
        text = json.dumps(a)
        assert "private" not in text
        assert "owner-secret" not in text
    ok, conflict = spans[1], spans[2]
    assert dict(ok.attributes or {})["tether.store.messages"] == 1
    assert dict(ok.attributes or {})["tether.store.version"] == 1
    assert conflict.status.status_code is StatusCode.ERROR
    assert dict(conflict.attributes or {})["error.type"] == "ConflictError"


async def test_traced_store_refuses_what_it_cannot_wrap(otel: Otel) -> None:
    traced = TracedStore(MemoryStore(), otel.telemetry())
    with pytest.raises(UserError, match="traced already"):
        TracedStore(traced)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="wraps a tether Store"):
        TracedStore(object())  # type: ignore[arg-type]
    # stores are replay guards (ADR 0011): the traced one is too
    assert await traced.claim_token("ab" * 32, time.time() + 60) is True
    assert otel.spans()[-1].name == "claim_token tether_replay_guard"
