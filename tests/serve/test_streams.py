"""Runs are detached from HTTP connections; their event streams resume with Last-Event-ID, with
no duplicate and no gap; Stop is explicit and a disconnect is not one. Real ``tether serve``
processes, real HTTP on loopback, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from tests.serve._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    normalized,
    read_events,
    start_run,
    wait_status,
)
from tests.serve.scripted import WORDS

from tether.errors import StoreError
from tether.serve._sse import DELETED, UNAVAILABLE, event_stream, follow_log
from tether.stores.events import EventLog, LoggedEvent, MemoryEventLog, RunRecord, SQLiteEventLog

PROMPT = "tell me the words"


def test_reattached_stream_equals_an_uninterrupted_one(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        whole = read_events(client, start_run(client, new_conversation(client), PROMPT))
        run_id = start_run(client, new_conversation(client), PROMPT)
        first = read_events(client, run_id, stop_after=5)  # the tab closes mid-run
        second = read_events(client, run_id, last_event_id=first[-1].seq, stop_after=12)
        rest = read_events(client, run_id, last_event_id=second[-1].seq)
    joined = first + second + rest
    assert [e.seq for e in joined] == list(range(1, len(joined) + 1))  # no duplicate, no gap
    assert normalized(joined) == normalized(whole)
    assert whole[0].data["type"] == "run.started"
    assert whole[-1].data["type"] == "run.completed"
    assert sum(e.data["type"] == "text.delta" for e in whole) == WORDS


def test_a_disconnect_is_not_a_cancel(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, PROMPT)
        read_events(client, run_id, stop_after=3)
        done = wait_status(client, run_id, ("completed", "canceled", "failed"))
        messages = client.get(f"/v1/conversations/{cid}").json()["messages"]
    assert done["status"] == "completed"
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["parts"][0]["text"].endswith(f"word{WORDS}")


def test_cancel_ends_the_run_with_run_canceled_and_stores_its_partial(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "use tool lookup then tell me the words")
        seen = read_events(client, run_id, stop_after=12)  # the tool step is done, words are streaming
        assert any(e.data["type"] == "tool.finished" for e in seen)
        r = client.post(f"/v1/runs/{run_id}/cancel")
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "canceled"
        replay = read_events(client, run_id)
        again = client.post(f"/v1/runs/{run_id}/cancel")
        stored = client.get(f"/v1/conversations/{cid}").json()["messages"]
        after = start_run(client, cid, "and now?")  # the conversation is free again
    assert replay[-1].data["type"] == "run.canceled"
    assert [e.seq for e in replay] == list(range(1, len(replay) + 1))
    assert sum(e.data["type"] == "text.delta" for e in replay) < WORDS
    assert again.status_code == 200
    assert again.json()["status"] == "canceled"
    roles = [m["role"] for m in stored]
    assert roles[:3] == ["user", "assistant", "tool"]  # the prompt and the completed tool step
    assert stored[0]["parts"][0]["text"].startswith("use tool lookup")
    assert after


def test_a_second_run_on_a_busy_conversation_gets_409(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid = new_conversation(client)
        first = start_run(client, cid, PROMPT)
        r = client.post(f"/v1/conversations/{cid}/runs", json={"prompt": "again"})
        wait_status(client, first, ("completed",))
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["type"] == "conflict"
    assert first in error["message"]
    assert "active run" in error["message"]


def test_finished_run_replays_after_a_restart(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        run_id = start_run(client, new_conversation(client), PROMPT)
        before = read_events(client, run_id)
    server.stop()
    again = servers(db)
    with again.client(token) as client:
        after = read_events(client, run_id)
        tail = read_events(client, run_id, last_event_id=before[-3].seq)
    assert after == before
    assert tail == before[-2:]


def test_reattach_on_another_process_gets_the_complete_stream(
    db: Database, servers: Callable[..., Server]
) -> None:
    """Two processes on one database (PostgreSQL: LISTEN/NOTIFY; SQLite: polling)."""
    shared = db
    token = add_user(shared, "alice")
    a, b = servers(shared), servers(shared)
    with a.client(token) as on_a, b.client(token) as on_b:
        whole = read_events(on_a, start_run(on_a, new_conversation(on_a), PROMPT))
        run_id = start_run(on_a, new_conversation(on_a), PROMPT)
        first = read_events(on_a, run_id, stop_after=4)
        rest = read_events(on_b, run_id, last_event_id=first[-1].seq)  # live, from another process
    joined = first + rest
    assert [e.seq for e in joined] == list(range(1, len(joined) + 1))
    assert normalized(joined) == normalized(whole)


def test_cancel_on_another_process_stops_the_run(db: Database, servers: Callable[..., Server]) -> None:
    shared = db
    token = add_user(shared, "alice")
    a, b = servers(shared), servers(shared)
    with a.client(token) as on_a, b.client(token) as on_b:
        run_id = start_run(on_a, new_conversation(on_a), PROMPT)
        read_events(on_a, run_id, stop_after=3)
        r = on_b.post(f"/v1/runs/{run_id}/cancel")
        events = read_events(on_b, run_id)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "canceled"
    assert events[-1].data["type"] == "run.canceled"


def test_cancel_mid_answer_stores_the_text_streamed_so_far(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, PROMPT)
        read_events(client, run_id, stop_after=8)
        assert client.post(f"/v1/runs/{run_id}/cancel").json()["status"] == "canceled"
        events = read_events(client, run_id)
        stored = client.get(f"/v1/conversations/{cid}").json()["messages"]
    streamed = "".join(e.data["text"] for e in events if e.data["type"] == "text.delta")
    assert 0 < len(streamed.split()) < WORDS
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["parts"][0]["text"] == PROMPT
    assert stored[1]["stopReason"] == "canceled"
    assert stored[1]["parts"][0]["text"] == streamed


def test_a_last_event_id_the_run_has_not_reached_is_400(db: Database, servers: Callable[..., Server]) -> None:
    """No stream ever sent it; waiting for it would keep the stream open after the run ended."""
    token = add_user(db, "alice")
    server = servers(db)

    def ask(
        client: httpx.Client, run_id: str, after: int, *, header: bool = True, finished: bool = False
    ) -> tuple[int, bytes]:
        headers = {"Last-Event-ID": str(after)} if header else {}
        params = {} if header else {"after": after}
        with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers, params=params) as r:
            # a 200 for a running run would stream on: read only an error, or a finished run's stream
            return r.status_code, (r.read() if r.status_code != 200 or finished else b"")

    with server.client(token) as client:
        run_id = start_run(client, new_conversation(client), PROMPT)
        running = ask(client, run_id, 1000)
        by_query = ask(client, run_id, 1000, header=False)
        last = wait_status(client, run_id, ("completed",))["last_seq"]
        past = ask(client, run_id, last + 1, finished=True)
        at_the_end = ask(client, run_id, last, finished=True)
    for status, body in (running, by_query, past):
        assert status == 400, body
        assert b"past the last event" in body
    assert at_the_end[0] == 200
    assert b"data:" not in at_the_end[1]  # nothing after the last event, and the stream ended


async def test_a_reader_waiting_past_the_last_event_stops_once_the_run_ends() -> None:
    """``follow_log`` re-reads the run at each keep-alive: a reader whose resume point the run
    never reaches (an AG-UI resume, a log rewritten under it) does not ping for ever."""
    log = MemoryEventLog()
    record = await log.start_run("alice", "c1", "r1", "p1", b'{"type":"run.started"}')
    batches: list[object] = []

    async def read() -> None:
        async for batch in follow_log(log, record, after=10, ping_interval=0.05):
            batches.append(batch)

    reader = asyncio.create_task(read())
    await log.append("r1", "p1", [b'{"type":"text.delta"}', b'{"type":"run.completed"}'], status="completed")
    await asyncio.wait_for(reader, timeout=10)
    assert batches
    assert all(b is None for b in batches)  # keep-alives only: nothing after event 10


def test_head_on_a_live_stream_answers_the_headers_and_closes(
    db: Database, servers: Callable[..., Server]
) -> None:
    token = add_user(db, "alice")
    server = servers(db)
    with server.client(token) as client:
        run_id = start_run(client, new_conversation(client), "use tool delete_files now")
        wait_status(client, run_id, ("paused",))  # its stream stays open until a decision
        request = (
            f"HEAD /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(request.encode())
            answer = b""
            while chunk := sock.recv(4096):  # the server closes the connection once it answered
                answer += chunk
        client.post(f"/v1/runs/{run_id}/cancel")
    assert answer.startswith(b"HTTP/1.1 200")
    assert b"text/event-stream" in answer


async def _paused_run(log: object) -> RunRecord:
    from tether.serve._events import RunPausedEvent, RunStartedEvent, encode_event

    assert isinstance(log, EventLog)
    record = await log.start_run("alice", "c1", "r1", "p1", encode_event(RunStartedEvent("r1", "c1", "hi")))
    paused = encode_event(RunPausedEvent("r1", "c1", "pz", [], 0.0))
    await log.append("r1", "p1", [paused], status="paused", pause_id="pz", pause=b"{}")
    return record


async def _cancel_and_delete(log: EventLog) -> None:
    from tether.serve._events import RunCanceledEvent, encode_event

    canceled = encode_event(RunCanceledEvent("r1", "c1", "stopped"))
    assert await log.take_over(
        "r1", from_status="paused", to_status="canceled", event=canceled, pause_id="pz"
    )
    assert await log.delete_runs("alice", "c1") == 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_deleted_under_its_stream_ends_the_stream_with_run_deleted(
    kind: str, tmp_path: Path
) -> None:
    """The run ends and its conversation is deleted before the stream reads the last event:
    the stream ends with a ``run.deleted`` event saying why (no ``id:``: nothing was stored),
    not with a traceback and a cut connection."""
    log: EventLog = MemoryEventLog() if kind == "memory" else SQLiteEventLog(tmp_path / "serve.db")
    try:
        record = await _paused_run(log)
        stream = event_stream(log, record, 0, ping_interval=0.1)
        assert await anext(stream) == b"retry: 1000\n\n"
        first = await anext(stream)
        assert first.count(b"id: ") == 2
        assert b"run.paused" in first
        await _cancel_and_delete(log)
        rest = [chunk async for chunk in stream]
        last = rest[-1]
        assert last.startswith(b"data: "), rest
        assert b"id:" not in last
        event = json.loads(last[6:])
        assert event == {"type": "run.deleted", "run_id": "r1", "conversation_id": "c1", "reason": DELETED}
        assert all(c == b": ping\n\n" for c in rest[:-1]), rest
    finally:
        await log.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_an_agui_stream_whose_run_is_deleted_ends_with_run_error(kind: str, tmp_path: Path) -> None:
    from tether.serve.agui._routes import _Plan, _stream  # pyright: ignore[reportPrivateUsage]

    log: EventLog = MemoryEventLog() if kind == "memory" else SQLiteEventLog(tmp_path / "serve.db")
    try:
        record = await _paused_run(log)

        async def allowed(*_: object) -> bool:
            return True

        state = SimpleNamespace(
            events=log, config=SimpleNamespace(ping_interval=0.1), auth=SimpleNamespace(still_allowed=allowed)
        )
        call = SimpleNamespace(state=state, request=None, caller=None)
        stream = _stream(call, _Plan(record, 1, []))  # pyright: ignore[reportArgumentType]
        head = [await anext(stream) for _ in range(3)]  # RUN_STARTED, tether.input, MESSAGES_SNAPSHOT
        assert b"RUN_STARTED" in head[0]
        await _cancel_and_delete(log)
        rest = [chunk async for chunk in stream]
        events = [json.loads(c[6:]) for c in rest if c.startswith(b"data: ")]
        assert events[-1] == {"type": "RUN_ERROR", "message": DELETED, "code": "not_found"}, rest
    finally:
        await log.close()


class _FailingLog(MemoryEventLog):
    """A log whose database goes away once the stream has read its first events."""

    failing = False

    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        if self.failing:
            raise StoreError("SQLite: disk I/O error")
        return await super().read(owner, run_id, after_seq, limit)


async def test_a_stream_whose_event_log_fails_ends_with_a_comment_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = _FailingLog()
    record = await _paused_run(log)
    stream = event_stream(log, record, 0, ping_interval=0.1)
    assert await anext(stream) == b"retry: 1000\n\n"
    await anext(stream)
    log.failing = True
    rest = [chunk async for chunk in stream]
    assert rest[-1] == b": %s\n\n" % UNAVAILABLE.encode()
    assert not [r for r in caplog.records if r.exc_info]
    assert "disk I/O error" in caplog.text
