"""Chaos, bounded: two ``tether serve`` processes on one PostgreSQL database, 30 runs that each
call a side-effecting tool (its effects are rows of a table of their own), and 10 SIGKILLs at
random moments, each killed process started again at once. Every run completes; no side effect
happens twice; each run's events are one gapless sequence whose ``message.completed`` events are
exactly the run's stored messages; a run repeats at most one model request per move.

The figures go to the file named by ``TETHER_CHAOS_REPORT`` when it is set (JSON)."""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
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
)

from tether.agent import UNKNOWN_OUTCOME_TEXT

pytestmark = pytest.mark.postgres

RUNS = 30
KILLS = 10
TERMINAL = ("completed", "failed", "canceled", "interrupted")


def _charges(db: Database) -> Counter[str]:
    import psycopg
    from psycopg import sql

    assert db.dsn is not None
    assert db.schema is not None
    with psycopg.connect(db.dsn) as conn:
        rows = conn.execute(sql.SQL("SELECT order_id FROM {}").format(sql.Identifier(db.schema, "charges")))
        return Counter(str(r[0]) for r in rows)


def _make_table(db: Database) -> None:
    import psycopg
    from psycopg import sql

    assert db.dsn is not None
    assert db.schema is not None
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(db.schema)))
        conn.execute(
            sql.SQL("CREATE TABLE {} (order_id text NOT NULL)").format(sql.Identifier(db.schema, "charges"))
        )


def _wait_all(client: httpx.Client, runs: dict[str, str], timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    status: dict[str, str] = {}
    while time.monotonic() < deadline:
        status = {order: client.get(f"/v1/runs/{rid}").json()["status"] for order, rid in runs.items()}
        if all(s in TERMINAL for s in status.values()):
            break
        time.sleep(0.5)
    return status


def _unknown(messages: list[dict[str, Any]], run_id: str) -> bool:
    """The run's side effect was closed by the ledger ("outcome unknown", never re-run)."""
    tools = [m for m in _runs_own(messages, run_id) if m["role"] == "tool"]
    return any(UNKNOWN_OUTCOME_TEXT in json.dumps(m) for m in tools)


def _runs_own(messages: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The messages from the run's first one on (it held the conversation: all are its own,
    the ledger's closures included)."""
    first = next(i for i, m in enumerate(messages) if m.get("runId") == run_id)
    return messages[first:]


def _logged_messages(events: list[Got]) -> list[dict[str, Any]]:
    return [e.data["message"] for e in events if e.data["type"] == "message.completed"]


def test_two_processes_thirty_runs_ten_kills(
    pg_db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    _make_table(pg_db)
    token = add_user(pg_db, "alice")
    env = {
        "TETHER_TEST_PG_DSN": str(pg_db.dsn),
        "TETHER_TEST_PG_SCHEMA": str(pg_db.schema),
        "TETHER_TEST_WORD_DELAY": "0.04",
        "TETHER_TEST_EFFECT_SLEEP": "1.0",
    }
    spec: dict[str, Any] = {
        "model": f"{SCRIPTED}:chaos_model",
        "tools": f"{SCRIPTED}:chaos_tools",
        "extra": ["--max-active-runs", "0"],
        "extra_env": env,
    }
    alive = [servers(pg_db, **spec), servers(pg_db, **spec)]
    rng = random.Random(int(os.environ.get("TETHER_CHAOS_SEED", "21")))
    runs: dict[str, str] = {}  # order -> run id
    conversations: dict[str, str] = {}
    started_at = time.monotonic()
    for kill in range(KILLS):
        victim = kill % 2
        with alive[victim].client(token) as client:  # runs the victim holds when it dies
            for _ in range(RUNS // KILLS):
                order = str(len(runs))
                cid = new_conversation(client)
                runs[order] = start_run(client, cid, f"order {order}")
                conversations[order] = cid
        time.sleep(rng.uniform(0.05, 1.5))  # before the tool, inside it, or mid-stream
        alive[victim].kill()
        alive[victim] = servers(pg_db, **spec)  # started again at once
    with alive[0].client(token) as client:
        status = _wait_all(client, runs, timeout=150)
        logs = {order: read_events(client, rid) for order, rid in runs.items()}
        stored = {
            order: client.get(f"/v1/conversations/{cid}").json()["messages"]
            for order, cid in conversations.items()
        }
    elapsed = time.monotonic() - started_at
    charges = _charges(pg_db)
    lines = effects.read_text().splitlines()
    requests = Counter(line.split()[1] for line in lines if line.startswith("request "))
    moves = {o: sum(e.data["type"] == "run.recovered" for e in log) for o, log in logs.items()}
    repeated = {o: requests[o] - 2 for o in runs}
    report = {
        "runs": len(runs),
        "kills": KILLS,
        "seconds": round(elapsed, 1),
        "completed": sum(s == "completed" for s in status.values()),
        "moved_runs": sum(1 for m in moves.values() if m),
        "moves": sum(moves.values()),
        "repeated_model_requests": sum(repeated.values()),
        "closed_outcome_unknown": sum(1 for o in runs if _unknown(stored[o], runs[o])),
        "charges": sum(charges.values()),
        "duplicate_charges": sum(c - 1 for c in charges.values() if c > 1),
        "events": sum(len(log) for log in logs.values()),
    }
    if os.environ.get("TETHER_CHAOS_REPORT"):
        Path(os.environ["TETHER_CHAOS_REPORT"]).write_text(json.dumps(report, indent=2))
    logs_text = "\n".join(s.log()[-2000:] for s in alive)
    assert report["completed"] == RUNS, (status, report, logs_text)
    assert report["moves"] >= 1, report  # the kills hit runs in flight
    assert report["duplicate_charges"] == 0, (charges, report)
    for order, log in logs.items():
        run_id = runs[order]
        assert [e.seq for e in log] == list(range(1, len(log) + 1)), order  # gapless, no duplicate
        types = [e.data["type"] for e in log]
        assert types.count("run.started") == 1
        assert types[-1] == "run.completed"
        assert sum(t in ("run.completed", "run.failed", "run.interrupted") for t in types) == 1
        mine = _runs_own(stored[order], run_id)
        assert _logged_messages(log) == mine, order  # every stored message logged once, nothing else
        assert 0 <= repeated[order] <= moves[order], (order, requests[order], moves[order])
        if charges[order] == 0:  # killed after the ledger said it started, before the row: never re-run
            assert _unknown(stored[order], run_id), mine
