"""A paused run waits durably (ADR 0015): its pause is in the service database, not in a process,
so after the process that paused it is SIGKILLed a decision is accepted by another process (on
PostgreSQL, a second ``tether serve``) or by the next start (SQLite), and the run completes with
the approved tool run exactly once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.serve._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
    wait_status,
)


def test_a_decision_after_the_pausing_process_was_killed_resumes_the_run(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    first = servers(db)
    with first.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "use tool delete_files now")
        read_events(client, run_id, until="run.paused")
        pause = wait_status(client, run_id, ("paused",))["pause"]
    first.kill()

    second = servers(db)
    with second.client(token) as client:
        assert wait_status(client, run_id, ("paused",))["pause"] == pause  # still waiting
        call_id = pause["calls"][0]["call_id"]
        body = {"pause_id": pause["pause_id"], "decisions": [{"call_id": call_id, "decision": "approve"}]}
        decided = client.post(f"/v1/runs/{run_id}/decisions", json=body)
        done = wait_status(client, run_id, ("completed", "failed"))
        events = read_events(client, run_id)
    assert decided.status_code == 202, decided.text
    assert done["status"] == "completed"
    types = [e.data["type"] for e in events]
    assert types.count("run.paused") == 1
    assert types.count("run.resumed") == 1
    assert types[-1] == "run.completed"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # one gapless sequence
    assert effects.read_text().splitlines() == ["deleted"]
