"""The run manager in process (memory store and log): a run whose holder stopped heartbeating on
another host is closed through the ledger; a run taken over while it runs stops without writing;
the events of a run are the agent's events in order, framed by run.started and its last event."""

from __future__ import annotations

import asyncio
import json
import time

from tests.serve.scripted import SlowWords, tools

from tether.agent import UNKNOWN_OUTCOME_TEXT, Agent
from tether.messages import Message, Text, ToolCall, user
from tether.serve import Caller, RunManager
from tether.stores import MemoryStore
from tether.stores._events_memory import MemoryEventLog


def _manager(store: MemoryStore, log: MemoryEventLog, words: int = 5, delay: float = 0.0) -> RunManager:
    agent = Agent(SlowWords(words=words, delay=delay), tools=tools(), approval_secret=b"x" * 32)
    return RunManager(store=store, events=log, agent=agent, heartbeat_interval=0.05, stale_after=1.0)


async def _until(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


async def test_a_run_of_a_silent_process_on_another_host_is_closed_through_the_ledger() -> None:
    store, log = MemoryStore(), MemoryEventLog()
    cid = await store.create("alice")
    turn = Message("assistant", (ToolCall("call_1", "charge_card", "{}"),), run_id="r-dead")
    await store.append("alice", cid, [user("pay", run_id="r-dead"), turn])
    assert await store.record_tool_started("alice", cid, "r-dead", "call_1", "charge_card", "{}")
    await log.heartbeat("ghost", "another-host", 4242)
    await log.start_run("alice", cid, "r-dead", "ghost", b'{"type":"run.started"}')
    manager = _manager(store, log)
    await manager.open()  # the ghost's heartbeat is fresh: nothing happens yet
    try:
        assert (await log.get_run("alice", "r-dead")).status == "running"

        async def closed() -> bool:
            return (await log.get_run("alice", "r-dead")).status == "interrupted"

        await _until(closed)  # stale after 1 s without a heartbeat
    finally:
        await manager.close()
    messages = (await store.load("alice", cid)).messages
    assert messages[-1].role == "tool"
    assert messages[-1].tool_results[0].text == UNKNOWN_OUTCOME_TEXT
    last = (await log.read("alice", "r-dead"))[-1]
    assert json.loads(last.data)["type"] == "run.interrupted"
    assert [p.process_id for p in await log.processes()] == []  # the ghost was forgotten


async def test_the_events_of_a_run_frame_the_agents_events_in_order() -> None:
    store, log = MemoryStore(), MemoryEventLog()
    manager = _manager(store, log, words=5)
    await manager.open()
    try:
        cid = await store.create("alice")
        run = await manager.start(Caller("alice"), cid, "hello")

        async def done() -> bool:
            return (await log.get_run("alice", run.run_id)).status == "completed"

        await _until(done)
    finally:
        await manager.close()
    types = [json.loads(e.data)["type"] for e in await log.read("alice", run.run_id)]
    assert types == [
        "run.started",
        "message.completed",
        *["text.delta"] * 5,
        "message.completed",
        "run.completed",
    ]
    stored = (await store.load("alice", cid)).messages
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].parts == (Text("word1 word2 word3 word4 word5"),)


async def test_a_run_taken_over_while_running_stops_without_writing_more() -> None:
    store, log = MemoryStore(), MemoryEventLog()
    manager = _manager(store, log, words=200, delay=0.01)
    await manager.open()
    try:
        cid = await store.create("alice")
        run = await manager.start(Caller("alice"), cid, "hello")

        async def streaming() -> bool:
            return (await log.get_run("alice", run.run_id)).last_seq > 5

        await _until(streaming)
        taken = await log.take_over(
            run.run_id, from_status="running", to_status="interrupted", event=b'{"type":"run.interrupted"}'
        )
        assert taken is not None

        async def stopped() -> bool:
            return manager.running == 0

        await _until(stopped)
    finally:
        await manager.close()
    events = await log.read("alice", run.run_id)
    assert json.loads(events[-1].data)["type"] == "run.interrupted"
    assert sum(json.loads(e.data)["type"] == "text.delta" for e in events) < 200
