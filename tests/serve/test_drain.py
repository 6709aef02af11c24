"""A stopping server (SIGTERM: a deploy) lets its runs finish for ``--drain-timeout`` seconds; a
run that finishes in time completes instead of being closed as interrupted (ADR 0015)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tests.serve._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
    wait_status,
)
from tests.serve.scripted import slow_words

from tether.agent import Agent
from tether.serve import Caller, RunManager
from tether.serve._errors import ApiError
from tether.stores import MemoryStore
from tether.stores.events import MemoryEventLog


def test_a_run_going_on_at_sigterm_finishes_within_the_drain(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    slow = {"TETHER_TEST_WORD_DELAY": "0.1"}  # 40 words: about 4 s
    server = servers(db, extra=["--drain-timeout", "60"], extra_env=slow)
    with server.client(token) as client:
        run_id = start_run(client, new_conversation(client), "tell me the words")
        read_events(client, run_id, stop_after=3)
    server.stop()  # SIGTERM, then waits for the process to exit (uvicorn re-raises the signal)
    assert server.proc is not None
    assert server.proc.returncode is not None, server.log()
    again = servers(db)
    with again.client(token) as client:
        status = wait_status(client, run_id, ("completed", "interrupted"))
        replay = read_events(client, run_id)
    assert status["status"] == "completed"
    assert replay[-1].data["type"] == "run.completed"
    assert [e.seq for e in replay] == list(range(1, len(replay) + 1))


async def test_a_draining_process_starts_no_run_and_lets_its_runs_finish() -> None:
    store, log = MemoryStore(), MemoryEventLog()
    manager = RunManager(store=store, events=log, agent=Agent(slow_words(words=20, delay=0.02)))
    await manager.open()
    cid = await store.create("alice")
    other = await store.create("alice")
    record = await manager.start(Caller("alice"), cid, "hello")
    closing = asyncio.ensure_future(manager.close(drain=30))
    await asyncio.sleep(0)
    with pytest.raises(ApiError) as refused:
        await manager.start(Caller("alice"), other, "too late")
    assert refused.value.status == 503
    await closing
    assert (await log.get_run("alice", record.run_id)).status == "completed"
