"""Approvals through the service: a paused run's pending calls are shown to its owner (never
their tokens); a decision is checked against the pause stored on the server and accepted once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from tests.serve._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
    wait_status,
)


def _paused(client: httpx.Client) -> tuple[str, str, dict[str, Any]]:
    cid = new_conversation(client)
    run_id = start_run(client, cid, "use tool delete_files now")
    events = read_events(client, run_id, until="run.paused")
    run = wait_status(client, run_id, ("paused",))
    assert events[-1].data["type"] == "run.paused"
    return cid, run_id, run


def test_approve_resumes_the_run_once(db: Database, servers: Callable[..., Server], effects: Path) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid, run_id, run = _paused(client)
        pause = run["pause"]
        assert [c["name"] for c in pause["calls"]] == ["delete_files"]
        assert "token" not in str(pause).lower()  # the authority stays on the server
        assert effects.read_text() == ""  # not run before the decision
        busy = client.post(f"/v1/conversations/{cid}/runs", json={"prompt": "meanwhile"})
        call_id = pause["calls"][0]["call_id"]
        body = {"pause_id": pause["pause_id"], "decisions": [{"call_id": call_id, "decision": "approve"}]}
        first = client.post(f"/v1/runs/{run_id}/decisions", json=body)
        second = client.post(f"/v1/runs/{run_id}/decisions", json=body)
        done = wait_status(client, run_id, ("completed", "failed"))
        events = read_events(client, run_id)
        third = client.post(f"/v1/runs/{run_id}/decisions", json=body)
    assert busy.status_code == 409  # a paused run still holds its conversation
    assert first.status_code == 202, first.text
    assert second.status_code == 409
    assert third.status_code == 409
    assert done["status"] == "completed"
    types = [e.data["type"] for e in events]
    assert types.count("run.paused") == 1
    assert types.count("run.resumed") == 1
    assert types[-1] == "run.completed"
    assert effects.read_text().splitlines() == ["deleted"]  # ran exactly once


def test_deny_answers_the_model_without_running_the_tool(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid, run_id, run = _paused(client)
        call_id = run["pause"]["calls"][0]["call_id"]
        body = {
            "pause_id": run["pause"]["pause_id"],
            "decisions": [{"call_id": call_id, "decision": "deny", "reason": "not today"}],
        }
        r = client.post(f"/v1/runs/{run_id}/decisions", json=body)
        wait_status(client, run_id, ("completed",))
        messages = client.get(f"/v1/conversations/{cid}").json()["messages"]
    assert r.status_code == 202, r.text
    result = next(m for m in messages if m["role"] == "tool")["parts"][0]
    assert result["failed"] is True
    assert "not today" in result["content"][0]["text"]
    assert effects.read_text() == ""


def test_decisions_that_do_not_match_the_stored_pause_are_refused(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        _, run_id, run = _paused(client)
        pause_id = run["pause"]["pause_id"]
        call_id = run["pause"]["calls"][0]["call_id"]
        url = f"/v1/runs/{run_id}/decisions"
        approve = {"call_id": call_id, "decision": "approve"}

        def decide(pause: str, *decisions: dict[str, str]) -> httpx.Response:
            return client.post(url, json={"pause_id": pause, "decisions": list(decisions)})

        unknown = decide(pause_id, {"call_id": "forged", "decision": "approve"})
        missing = decide(pause_id)
        twice = decide(pause_id, approve, {"call_id": call_id, "decision": "deny"})
        stale = decide("other", approve)
        token_in_body = decide(pause_id, {**approve, "token": "x"})
        still = client.get(f"/v1/runs/{run_id}").json()
        canceled = client.post(f"/v1/runs/{run_id}/cancel").json()
    assert unknown.status_code == 422
    assert "forged" in unknown.json()["error"]["message"]
    assert missing.status_code == 422
    assert call_id in missing.json()["error"]["message"]
    assert twice.status_code == 422
    assert stale.status_code == 409
    assert token_in_body.status_code == 400  # unknown fields are refused, not ignored
    assert still["status"] == "paused"
    assert canceled["status"] == "canceled"
    assert effects.read_text() == ""


def test_a_deny_reason_over_the_part_limit_is_413_and_the_run_stays_paused(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    """A reason becomes a tool result the conversation keeps: bounded like a prompt."""
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid, run_id, run = _paused(client)
        pause = run["pause"]
        call_id = pause["calls"][0]["call_id"]

        def deny(reason: str) -> httpx.Response:
            decision = {"call_id": call_id, "decision": "deny", "reason": reason}
            return client.post(
                f"/v1/runs/{run_id}/decisions", json={"pause_id": pause["pause_id"], "decisions": [decision]}
            )

        huge = deny("n" * (1024 * 1024 + 1))
        still = client.get(f"/v1/runs/{run_id}").json()["status"]
        fine = deny("not today")
        wait_status(client, run_id, ("completed",))
        messages = client.get(f"/v1/conversations/{cid}").json()["messages"]
    assert huge.status_code == 413, huge.text[:300]
    assert huge.json()["error"]["message"] == "$.decisions[0].reason: over the limit (max_part_bytes=1048576)"
    assert still == "paused"
    assert fine.status_code == 202
    assert "not today" in next(m for m in messages if m["role"] == "tool")["parts"][0]["content"][0]["text"]
    assert effects.read_text() == ""
