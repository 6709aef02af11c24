"""Every completed step is durable before the next one starts (ADR 0015), proved by killing a real
process with SIGKILL at each point of a run, on SQLite and PostgreSQL, then continuing the stored
conversation in a new process.

What the kill leaves in the store, and what the continuation repeats, per point:

- before the first model request: the prompt is stored; the request in flight is repeated;
- mid model stream: the prompt is stored; the streamed text is lost (explicitly, ADR 0015);
- after the turn is stored: the turn is never requested again; its calls run on continuation;
- inside a tool batch: a started ``idempotent=False`` tool is closed as "outcome unknown" and
  never re-run; an idempotent one is re-run;
- during the store append: the append is atomic (all or nothing); at most the request in flight
  is repeated.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tether.agent._batch import UNKNOWN_OUTCOME_TEXT
from tether.history import check_history

from .children import kill_at, lines, run_child, store_from

CHILD = Path(__file__).with_name("crash_child.py")
TIMEOUT = 60


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'conversations.db'}"
        return
    dsn = str(request.getfixturevalue("pg_dsn"))
    schema = f"tether_crash_{uuid.uuid4().hex[:12]}"
    try:
        yield f"postgres:{schema}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _kill_at(spec: str, cid: str, point: str, directory: Path) -> None:
    """Start the run in a child and SIGKILL it once it says it reached ``point``."""
    kill_at([sys.executable, str(CHILD), spec, cid, point, str(directory), "start"], point, TIMEOUT)


def _continue(spec: str, cid: str, directory: Path) -> str:
    args = [sys.executable, str(CHILD), spec, cid, "none", str(directory), "continue"]
    return run_child(args, TIMEOUT).strip()


async def _stored(spec: str, cid: str) -> list[str]:
    store = store_from(spec)
    try:
        loaded = await store.load("crash", cid)
    finally:
        await store.close()
    return [m.role + ("+calls" if m.tool_calls else "") for m in loaded.messages]


async def _log(spec: str, cid: str) -> list[object]:
    store = store_from(spec)
    try:
        return list((await store.load("crash", cid)).messages)
    finally:
        await store.close()


@pytest.mark.parametrize("point", ["before_request", "mid_stream"])
async def test_a_kill_before_the_first_turn_keeps_the_prompt(
    backend: str, point: str, tmp_path: Path
) -> None:
    cid = str(uuid.uuid4())
    _kill_at(backend, cid, point, tmp_path)
    assert await _stored(backend, cid) == ["user"]  # the prompt; a streamed fragment is not kept
    assert _continue(backend, cid, tmp_path) == "OUTPUT done: booked 2 / found rome"
    assert await _stored(backend, cid) == ["user", "assistant+calls", "tool", "assistant"]
    requests = lines(tmp_path, "requests")
    assert requests == {"request 1": 2, "request 3": 1}  # only the request in flight is repeated
    assert lines(tmp_path, "effects") == {"book": 1, "lookup": 1}


async def test_a_stored_turn_is_never_requested_again(backend: str, tmp_path: Path) -> None:
    cid = str(uuid.uuid4())
    _kill_at(backend, cid, "after_turn_stored", tmp_path)
    assert await _stored(backend, cid) == ["user", "assistant+calls"]
    assert _continue(backend, cid, tmp_path) == "OUTPUT done: booked 2 / found rome"
    assert lines(tmp_path, "requests") == {"request 1": 1, "request 3": 1}
    assert lines(tmp_path, "effects") == {"book": 1, "lookup": 1}
    log = await _log(backend, cid)
    check_history(log)  # pyright: ignore[reportArgumentType]


async def test_a_started_side_effect_is_closed_as_unknown_and_never_rerun(
    backend: str, tmp_path: Path
) -> None:
    cid = str(uuid.uuid4())
    _kill_at(backend, cid, "tool_effect", tmp_path)
    assert await _stored(backend, cid) == ["user", "assistant+calls"]
    output = _continue(backend, cid, tmp_path)
    assert output.startswith("OUTPUT done: " + UNKNOWN_OUTCOME_TEXT[:20]), output
    assert lines(tmp_path, "effects")["book"] == 1  # never run twice
    assert lines(tmp_path, "requests") == {"request 1": 1, "request 3": 1}
    assert await _stored(backend, cid) == ["user", "assistant+calls", "tool", "assistant"]


async def test_an_interrupted_idempotent_tool_is_run_again(backend: str, tmp_path: Path) -> None:
    cid = str(uuid.uuid4())
    _kill_at(backend, cid, "tool_lookup", tmp_path)
    assert await _stored(backend, cid) == ["user", "assistant+calls"]
    assert _continue(backend, cid, tmp_path) == "OUTPUT done: found rome"
    assert lines(tmp_path, "effects") == {"lookup": 2}
    assert lines(tmp_path, "requests") == {"request 1": 1, "request 3": 1}


async def test_a_kill_during_the_append_loses_nothing_completed(backend: str, tmp_path: Path) -> None:
    cid = str(uuid.uuid4())
    _kill_at(backend, cid, "during_append", tmp_path)
    kept = await _stored(backend, cid)
    assert kept in (["user"], ["user", "assistant+calls"])  # all of the append or none of it
    assert _continue(backend, cid, tmp_path) == "OUTPUT done: booked 2 / found rome"
    requests = lines(tmp_path, "requests")
    assert requests["request 1"] == (1 if len(kept) == 2 else 2)
    assert requests["request 3"] == 1
    assert lines(tmp_path, "effects") == {"book": 1, "lookup": 1}
