"""A service run outlives its process (ADR 0015 §3): SIGKILLed, or still going when a stopping
process's drain ends, it is continued from its stored steps by the next start (SQLite) or by
another live process (PostgreSQL), under the same run id, with one gapless event sequence and a
``run.recovered`` event saying what was repeated. Real ``tether serve`` processes, real signals."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.serve._serve_support import (
    SCRIPTED,
    Database,
    Got,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
    wait_status,
)

WORDS = " ".join(f"word{i}" for i in range(1, 41))
COUNTED = f"{SCRIPTED}:counted_words"
SLOW = {"TETHER_TEST_WORD_DELAY": "0.05"}  # 40 words: about 2 s per model request


def _lines(path: Path, word: str) -> int:
    return path.read_text().split().count(word)


def _check_log(events: list[Got]) -> Got:
    """One gapless sequence, one run.recovered, ending completed; returns the recovered event."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.data["type"] for e in events]
    assert types[0] == "run.started", types
    assert types[-1] == "run.completed", types
    assert types.count("run.recovered") == 1, types
    assert "run.interrupted" not in types
    return next(e for e in events if e.data["type"] == "run.recovered")


def _answer(client: httpx.Client, cid: str) -> list[dict[str, Any]]:
    return list(client.get(f"/v1/conversations/{cid}").json()["messages"])


def _continued(server: Server, token: str, run_id: str, cid: str) -> tuple[list[Got], list[dict[str, Any]]]:
    """Wait on ``server`` for the run to end completed; its events and the stored conversation."""
    with server.client(token) as client:
        record = wait_status(client, run_id, ("completed", "interrupted", "failed"), timeout=60)
        events = read_events(client, run_id)
        messages = _answer(client, cid)
    assert record["status"] == "completed", server.log()
    return events, messages


def test_a_run_killed_mid_stream_is_continued_by_the_next_start(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    first = servers(db, model=COUNTED, extra_env=SLOW)
    with first.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "tell me the words")
        seen = read_events(client, run_id, stop_after=6)  # the reply is streaming
    first.kill()
    assert seen[-1].data["type"] == "text.delta"
    again = servers(db, model=COUNTED, extra_env=SLOW)
    events, messages = _continued(again, token, run_id, cid)
    moved = _check_log(events)
    assert moved.data["repeats"] == "model_request"
    assert moved.data["stored"] == 1  # the prompt was stored before the first request
    assert [e.seq for e in seen] == [e.seq for e in events[: len(seen)]]
    assert events[-1].data["output"] == WORDS
    assert [m["role"] for m in messages] == ["user", "assistant"]  # no duplicate, no fragment
    assert _lines(effects, "request") == 2  # the request in flight, and its repetition: no more
    if db.path is not None:  # DBOS's tables beside the service's, in write-ahead-log mode
        with sqlite3.connect(f"{db.path}.dbos") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_side_effect_killed_while_running_is_closed_never_run_again(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    first = servers(db, extra_env={"TETHER_TEST_EFFECT_SLEEP": "30"})
    with first.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "use tool charge_card")
        read_events(client, run_id, until="tool.started")
    deadline = time.monotonic() + 10
    while _lines(effects, "charged") < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.kill()
    again = servers(db)
    events, messages = _continued(again, token, run_id, cid)
    moved = _check_log(events)
    assert moved.data["repeats"] == "tool_calls"
    assert _lines(effects, "charged") == 1  # started once, never again
    tool = next(m for m in messages if m["role"] == "tool")
    assert "outcome unknown" in str(tool), tool
    assert events[-1].data["output"] == WORDS


def test_a_run_still_going_after_the_drain_is_handed_on_not_interrupted(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    first = servers(db, model=COUNTED, extra=["--drain-timeout", "0.5"], extra_env=SLOW)
    with first.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "tell me the words")
        read_events(client, run_id, stop_after=4)
    first.stop()  # SIGTERM: the drain ends long before the 2 s reply does
    assert first.proc is not None
    assert first.proc.returncode is not None
    again = servers(db, model=COUNTED, extra_env=SLOW)
    events, messages = _continued(again, token, run_id, cid)
    moved = _check_log(events)
    assert moved.data["repeats"] == "model_request"
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the handed-on turn stored nothing
    assert _lines(effects, "request") == 2


@pytest.mark.postgres
def test_another_live_process_continues_the_run_of_a_killed_one(
    pg_db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(pg_db, "alice")
    a = servers(pg_db, model=COUNTED, extra_env=SLOW)
    b = servers(pg_db, model=COUNTED, extra_env=SLOW)
    with a.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "tell me the words")
        seen = read_events(client, run_id, stop_after=5)
    a.kill()
    with b.client(token) as client:  # the client re-attaches to the survivor where it left off
        rest = read_events(client, run_id, last_event_id=seen[-1].seq)
        record = client.get(f"/v1/runs/{run_id}").json()
        replay = read_events(client, run_id)
    assert record["status"] == "completed", b.log()
    assert [e.seq for e in rest] == list(range(seen[-1].seq + 1, seen[-1].seq + 1 + len(rest)))
    _check_log(replay)
    assert _lines(effects, "request") == 2


def test_without_the_engine_a_killed_run_is_still_closed_as_interrupted(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    first = servers(db, extra=["--no-durable"], extra_env=SLOW)
    with first.client(token) as client:
        run_id = start_run(client, new_conversation(client), "tell me the words")
        read_events(client, run_id, stop_after=4)
    first.kill()
    again = servers(db, extra=["--no-durable"])
    with again.client(token) as client:
        record = wait_status(client, run_id, ("completed", "interrupted"), timeout=60)
    assert record["status"] == "interrupted"
