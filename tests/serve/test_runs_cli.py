"""``tether runs list|show|cancel``: an operator's view of the service's run records, scoped to one
owner, against a real ``tether serve`` process on each backend."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
    tether,
    wait_status,
)


def test_runs_list_show_and_cancel_a_paused_run(db: Database, servers: Callable[..., Server]) -> None:
    ann, bob = add_user(db, "ann"), add_user(db, "bob")
    server = servers(db)
    with server.client(ann) as client:
        cid = new_conversation(client)
        done = start_run(client, cid, "hello")
        wait_status(client, done, ("completed",))
        paused = start_run(client, cid, "use tool delete_files now")
        read_events(client, paused, until="run.paused")
    with server.client(bob) as client:
        start_run(client, new_conversation(client), "hello")

    ann_args = [*db.args(), "--owner", "ann", "--json"]
    listed = json.loads(tether("runs", "list", *ann_args).stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(paused, "paused"), (done, "completed")]
    only = json.loads(tether("runs", "list", *ann_args, "--status", "paused").stdout)
    assert [r["run_id"] for r in only] == [paused]

    shown: dict[str, Any] = json.loads(tether("runs", "show", paused, *ann_args).stdout)
    types = [e["type"] for e in shown["event_types"]]
    assert types[0] == "run.started"
    assert types[-1] == "run.paused"
    assert [e["seq"] for e in shown["event_types"]] == list(range(1, len(types) + 1))

    # another owner's run is not found, and cannot be canceled
    refused = tether("runs", "cancel", paused, *db.args(), "--owner", "bob", check=False)
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr

    canceled = tether("runs", "cancel", paused, *db.args(), "--owner", "ann")
    assert canceled.stdout.strip() == f"run {paused}: canceled"
    with server.client(ann) as client:
        assert wait_status(client, paused, ("canceled",))["status"] == "canceled"
        events = read_events(client, paused)
    assert events[-1].data["type"] == "run.canceled"
    assert "operator" in events[-1].data["reason"]


def test_runs_cancel_stops_a_running_run_through_its_process(
    db: Database, servers: Callable[..., Server]
) -> None:
    ann = add_user(db, "ann")
    server = servers(db, model="py:tests.serve.scripted:long_words")
    with server.client(ann) as client:
        run_id = start_run(client, new_conversation(client), "hello")
        read_events(client, run_id, stop_after=3)
        result = tether("runs", "cancel", run_id, *db.args(), "--owner", "ann", "--wait", "30")
        assert result.stdout.strip() == f"run {run_id}: canceled"
        assert wait_status(client, run_id, ("canceled",))["status"] == "canceled"


def test_runs_processes_lists_the_live_processes_and_the_runs_they_hold(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "ann")
    server = servers(db, extra_env={"TETHER_TEST_WORD_DELAY": "0.2"})  # 40 words: 8 s
    with server.client(token) as client:
        run_id = start_run(client, new_conversation(client), "tell me the words")
        read_events(client, run_id, stop_after=3)
        listed = json.loads(tether("runs", "processes", *db.args(), "--json").stdout)
    assert server.proc is not None
    assert [(p["pid"], p["running_runs"]) for p in listed] == [(server.proc.pid, 1)]
    assert 0 <= listed[0]["heartbeat_age"] < 5
    table = tether("runs", "processes", *db.args()).stdout
    assert str(server.proc.pid) in table
