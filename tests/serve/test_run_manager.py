"""The run manager in process (memory store and log): a run whose holder stopped heartbeating on
another host is closed through the ledger; a run taken over while it runs stops without writing;
the events of a run are the agent's events in order, framed by run.started and its last event."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.serve.scripted import slow_words, tools

from tether.agent import UNKNOWN_OUTCOME_TEXT, Agent
from tether.messages import Message, Text, ToolCall, user
from tether.serve import Caller, RunManager
from tether.serve._pause import decode_pause
from tether.serve._schemas import Decision, DecisionsIn
from tether.stores import MemoryStore
from tether.stores.events._log import RunRecord
from tether.stores.events._memory import MemoryEventLog
from tether.telemetry import Telemetry


def _manager(store: MemoryStore, log: MemoryEventLog, words: int = 5, delay: float = 0.0) -> RunManager:
    agent = Agent(slow_words(words=words, delay=delay), tools=tools(), approval_secret=b"x" * 32)
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


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


async def _traced_run(headers: dict[str, str], telemetry: Telemetry | None) -> list[dict[str, Any]]:
    """The events of one run started by a request with ``headers``."""
    store, log = MemoryStore(), MemoryEventLog()
    agent = Agent(slow_words(words=3), tools=tools(), approval_secret=b"x" * 32, telemetry=telemetry)
    manager = RunManager(store=store, events=log, agent=agent, heartbeat_interval=0.05, stale_after=1.0)
    await manager.open()
    try:
        cid = await store.create("alice")
        run = await manager.start(Caller("alice", headers), cid, "hello")

        async def done() -> bool:
            return (await log.get_run("alice", run.run_id)).status == "completed"

        await _until(done)
    finally:
        await manager.close()
    return [json.loads(e.data) for e in await log.read("alice", run.run_id)]


async def test_a_run_continues_the_trace_of_the_request_that_started_it_and_its_events_carry_the_id() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(tracer_provider=provider)
    events = await _traced_run({"traceparent": f"00-{TRACE}-{PARENT}-01"}, telemetry)
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert trace.format_trace_id(span.context.trace_id) == TRACE
    assert span.parent is not None
    assert trace.format_span_id(span.parent.span_id) == PARENT
    assert (events[0]["type"], events[-1]["type"]) == ("run.started", "run.completed")
    assert {e.get("trace_id") for e in events} == {TRACE}

    # a malformed traceparent starts a new trace; the events carry that one
    exporter.clear()
    events = await _traced_run({"traceparent": f"00-{TRACE}-{PARENT}-01-garbage\x00"}, telemetry)
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert span.parent is None
    fresh = trace.format_trace_id(span.context.trace_id)
    assert fresh != TRACE
    assert "trace_id" not in events[0]  # run.started is written before the run span exists
    assert {e.get("trace_id") for e in events[1:]} == {fresh}
    provider.shutdown()


async def test_without_telemetry_the_incoming_trace_id_still_goes_on_the_events() -> None:
    events = await _traced_run({"traceparent": f"00-{TRACE}-{PARENT}-01"}, Telemetry(enabled=False))
    assert {e.get("trace_id") for e in events} == {TRACE}
    plain = await _traced_run({}, Telemetry(enabled=False))
    assert all("trace_id" not in e for e in plain)


class _DecidedFirst(MemoryEventLog):
    """A log where a decision is accepted just before Stop's compare-and-set on the paused run."""

    race: Callable[[], Awaitable[object]] | None = None

    async def take_over(self, run_id: str, **change: Any) -> RunRecord | None:
        if change.get("to_status") == "canceled" and self.race is not None:
            race, self.race = self.race, None
            await race()
        return await super().take_over(run_id, **change)


async def test_stop_racing_an_accepted_decision_still_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_TEST_EFFECTS", str(tmp_path / "effects"))
    store, log = MemoryStore(), _DecidedFirst()
    manager = _manager(store, log, words=200, delay=0.01)
    await manager.open()
    try:
        cid = await store.create("alice")
        run = await manager.start(Caller("alice"), cid, "use tool delete_files now")

        async def paused() -> bool:
            return (await log.get_run("alice", run.run_id)).status == "paused"

        await _until(paused)
        record = await log.get_run("alice", run.run_id)
        assert record.pause is not None
        pause = decode_pause(record.pause)
        approve = DecisionsIn(pause.pause_id, [Decision(c.call.id or "", "approve") for c in pause.calls])
        log.race = lambda: manager.decide(Caller("alice"), run.run_id, approve)
        stopped = await manager.cancel(Caller("alice"), run.run_id)
    finally:
        await manager.close()
    assert log.race is None  # the decision was accepted first
    assert stopped.status == "canceled"
    events = [json.loads(e.data)["type"] for e in await log.read("alice", run.run_id)]
    assert events.count("run.resumed") == 1
    assert events[-1] == "run.canceled"
    assert sum(t == "text.delta" for t in events) < 200
