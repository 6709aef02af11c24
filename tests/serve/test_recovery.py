"""A server without the durable engine (``--no-durable``) killed mid-run: the next start closes
the conversation through the ledger ("outcome unknown" for the side effect that was running; it
never runs again) and marks the run interrupted; the events up to the kill replay. (With the
engine, the default, such a run is continued: test_durable_runs.py.)"""

from __future__ import annotations

import time
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

from tether.agent import UNKNOWN_OUTCOME_TEXT

NO_ENGINE = ["--no-durable"]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_sigkill_mid_side_effect_closes_the_run_as_interrupted_and_never_reruns_it(
    db: Database, servers: Callable[..., Server], effects: Path
) -> None:
    token = add_user(db, "alice")
    server = servers(db, extra=NO_ENGINE)
    with server.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "use tool charge_card please")
        before = read_events(client, run_id, until="tool.started")
        deadline = time.monotonic() + 10
        while not _lines(effects) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert _lines(effects) == ["charged"]  # the tool is running (it blocks after charging)
    server.kill()

    again = servers(db, extra=NO_ENGINE)
    with again.client(token) as client:
        status = wait_status(client, run_id, ("interrupted",))
        replay = read_events(client, run_id)
        stored = client.get(f"/v1/conversations/{cid}").json()["messages"]
        follow = start_run(client, cid, "and then?")
        wait_status(client, follow, ("completed",))
        final = client.get(f"/v1/conversations/{cid}").json()["messages"]
    assert status["status"] == "interrupted"
    assert replay[: len(before)] == before  # the events up to the kill replay
    assert replay[-1].data["type"] == "run.interrupted"
    assert [e.seq for e in replay] == list(range(1, len(replay) + 1))
    closing = stored[-1]
    assert closing["role"] == "tool"
    assert closing["parts"][0]["content"][0]["text"] == UNKNOWN_OUTCOME_TEXT
    assert [m["role"] for m in final[-2:]] == ["user", "assistant"]
    assert _lines(effects) == ["charged"]  # at most once


def test_a_graceful_stop_interrupts_a_running_run(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, extra=NO_ENGINE)
    with server.client(token) as client:
        run_id = start_run(client, new_conversation(client), "tell me the words")
        read_events(client, run_id, stop_after=4)
    server.stop()
    again = servers(db, extra=NO_ENGINE)
    with again.client(token) as client:
        status = wait_status(client, run_id, ("interrupted",))
        replay = read_events(client, run_id)
    assert status["status"] == "interrupted"
    assert replay[-1].data["type"] == "run.interrupted"
    assert "stopped" in replay[-1].data["reason"]
