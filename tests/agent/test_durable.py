"""Durable runs on DBOS (ADR 0015): a run whose process is killed with SIGKILL is continued by DBOS
— on SQLite by the next start of the same executor, on PostgreSQL by another process that
recovers the dead executor's runs — and completes: a completed model turn is never requested
again (only the one in flight), a started ``idempotent=False`` tool is closed by the ledger as
"outcome unknown" and never re-run, an idempotent one is run again. The store holds the
messages; DBOS holds the run's inputs and outcome (no history in its step records)."""

from __future__ import annotations

import json
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tether.agent import UNKNOWN_OUTCOME_TEXT

from .children import kill_at, lines, run_child, store_from

CHILD = Path(__file__).with_name("durable_child.py")
TIMEOUT = 90


class Setup:
    def __init__(self, store: str, sysdb: str, fleet: bool) -> None:
        self.store = store
        self.sysdb = sysdb
        self.fleet = fleet  # PostgreSQL: another executor continues the run


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    if request.param == "sqlite":
        yield Setup(f"sqlite:{tmp_path / 'conversations.db'}", f"sqlite:///{tmp_path / 'dbos.sqlite'}", False)
        return
    dsn = str(request.getfixturevalue("pg_dsn"))
    schema = f"tether_durable_{uuid.uuid4().hex[:12]}"
    try:
        yield Setup(f"postgres:{schema}", f"{dsn}#{schema}_dbos", True)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in (schema, f"{schema}_dbos"):
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _args(s: Setup, cid: str, run_id: str, point: str, directory: Path, mode: str) -> list[str]:
    args = [sys.executable, str(CHILD), s.store, s.sysdb, cid, run_id, point, str(directory), mode]
    if s.fleet:
        args += ["executor-a"] if mode == "start" else ["executor-b", "executor-a"]
    return args


def _kill_at(s: Setup, cid: str, run_id: str, point: str, directory: Path) -> None:
    kill_at(_args(s, cid, run_id, point, directory, "start"), point, TIMEOUT)


def _recover(s: Setup, cid: str, run_id: str, directory: Path) -> dict[str, object]:
    out = run_child(_args(s, cid, run_id, "none", directory, "recover"), TIMEOUT)
    (line,) = [x for x in out.splitlines() if x.startswith("OUTCOME ")]
    return json.loads(line.removeprefix("OUTCOME "))


async def _roles(spec: str, cid: str) -> list[str]:
    store = store_from(spec)
    try:
        return [m.role for m in (await store.load("crash", cid)).messages]
    finally:
        await store.close()


def _dbos_outputs(s: Setup) -> list[str]:
    """Every value DBOS keeps of the run: inputs, outputs and step records."""
    if s.fleet:
        url, _, schema = s.sysdb.partition("#")
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                sql.SQL("SELECT inputs, output FROM {}.workflow_status").format(sql.Identifier(schema))
            ).fetchall()
            steps = conn.execute(
                sql.SQL("SELECT count(*) FROM {}.operation_outputs").format(sql.Identifier(schema))
            ).fetchone()
    else:
        with sqlite3.connect(s.sysdb.removeprefix("sqlite:///")) as conn:
            rows = conn.execute("SELECT inputs, output FROM workflow_status").fetchall()
            steps = conn.execute("SELECT count(*) FROM operation_outputs").fetchone()
    assert steps == (0,)  # no step records: the store holds every completed step
    return [str(v) for row in rows for v in row]


@pytest.mark.parametrize("point", ["before_request", "after_turn_stored", "during_append"])
async def test_a_killed_durable_run_is_continued_and_completes(
    setup: Setup, point: str, tmp_path: Path
) -> None:
    cid, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    _kill_at(setup, cid, run_id, point, tmp_path)
    outcome = _recover(setup, cid, run_id, tmp_path)
    assert outcome["status"] == "completed"
    assert outcome["output"] == "done: booked 2 / found rome"
    assert outcome["continued_from"] is not None  # the prompt at least was stored before the kill
    requests = lines(tmp_path, "requests")
    assert requests["request 1"] <= 2
    assert requests["request 3"] == 1
    if point == "after_turn_stored":
        assert requests["request 1"] == 1
    assert lines(tmp_path, "effects") == {"book": 1, "lookup": 1}
    assert await _roles(setup.store, cid) == ["user", "assistant", "tool", "assistant"]
    kept = " ".join(_dbos_outputs(setup))
    assert "Let me look that up" not in kept  # DBOS holds references, not the conversation


async def test_a_started_side_effect_of_a_durable_run_is_never_rerun(setup: Setup, tmp_path: Path) -> None:
    cid, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    _kill_at(setup, cid, run_id, "tool_effect", tmp_path)
    outcome = _recover(setup, cid, run_id, tmp_path)
    assert outcome["status"] == "completed"
    assert str(outcome["output"]).startswith("done: " + UNKNOWN_OUTCOME_TEXT[:20])
    assert lines(tmp_path, "effects")["book"] == 1
    assert lines(tmp_path, "requests") == {"request 1": 1, "request 3": 1}


async def test_an_interrupted_idempotent_tool_of_a_durable_run_runs_again(
    setup: Setup, tmp_path: Path
) -> None:
    cid, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    _kill_at(setup, cid, run_id, "tool_lookup", tmp_path)
    outcome = _recover(setup, cid, run_id, tmp_path)
    assert outcome["output"] == "done: found rome"
    assert lines(tmp_path, "effects") == {"lookup": 2}
    assert lines(tmp_path, "requests") == {"request 1": 1, "request 3": 1}


async def test_a_run_stored_to_its_end_is_not_requested_again(setup: Setup, tmp_path: Path) -> None:
    # killed after the answer was stored, before DBOS recorded the outcome: the recovered
    # execution finds the answer in the store and asks the model nothing
    cid, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    _kill_at(setup, cid, run_id, "after_answer_stored", tmp_path)
    outcome = _recover(setup, cid, run_id, tmp_path)
    assert outcome["status"] == "completed"
    assert outcome["output"] == "done: booked 2 / found rome"
    assert outcome["requests"] == 0
    assert lines(tmp_path, "requests") == {"request 1": 1, "request 3": 1}
    assert lines(tmp_path, "effects") == {"book": 1, "lookup": 1}
    assert await _roles(setup.store, cid) == ["user", "assistant", "tool", "assistant"]
