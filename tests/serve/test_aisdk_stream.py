"""The AI SDK endpoint at the HTTP level, on both backends: the chunks a reconnect sends after
``Last-Event-ID``, Stop, hostile answers to a pause, a revoked token, the stream slots. (The
official ``ai`` package drives the same endpoint in test_aisdk.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.serve._serve_support import Database, Server, add_user, tether, wait_status
from tests.serve.scripted import SMALL_WINDOW

THINKER = "py:tests.serve.aisdk_scripted:thinker"
TOOLS = "py:tests.serve.aisdk_scripted:tools"
LONG = "py:tests.serve.aisdk_scripted:long_thinker"
EXPECTED = " ".join(f"word{i}" for i in range(1, 31))


def user(text: str, mid: str = "u1") -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def sse(
    lines: Iterator[str], *, stop: Callable[[dict[str, Any]], bool] | None = None
) -> list[tuple[int | None, Any]]:
    """(SSE id, chunk) pairs; ``[DONE]`` as the string; stops after a chunk ``stop`` accepts."""
    out: list[tuple[int | None, Any]] = []
    seq: int | None = None
    for line in lines:
        if line.startswith("id: "):
            seq = int(line[4:])
        elif line.startswith("data: "):
            data = line[6:]
            chunk = data if data == "[DONE]" else json.loads(data)
            out.append((seq, chunk))
            seq = None
            if stop is not None and chunk != "[DONE]" and stop(chunk):
                break
    return out


def post(client: httpx.Client, body: dict[str, Any]) -> list[tuple[int | None, Any]]:
    with client.stream("POST", "/v1/aisdk/chat", json=body) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
        return sse(r.iter_lines())


def text(chunks: list[tuple[int | None, Any]]) -> str:
    return "".join(c["delta"] for _, c in chunks if isinstance(c, dict) and c["type"] == "text-delta")


@pytest.fixture
def alice(db: Database, servers: Callable[..., Server]) -> Iterator[httpx.Client]:
    token = add_user(db, "alice")
    server = servers(db, model=THINKER, tools=TOOLS, extra=["--ping-interval", "0.2"])
    with server.client(token) as client:
        yield client


def test_a_reconnect_with_last_event_id_sends_only_what_follows(alice: httpx.Client) -> None:
    with alice.stream("POST", "/v1/aisdk/chat", json={"id": "c1", "messages": [user("hi")]}) as r:
        seen = sse(r.iter_lines(), stop=lambda c: c["type"] == "text-delta" and c["delta"] == "word5 ")
    last = max(seq for seq, _ in seen if seq is not None)
    run_id = seen[0][1]["messageId"]
    with alice.stream("GET", "/v1/aisdk/chat/c1/stream", headers={"Last-Event-ID": str(last)}) as r:
        assert r.status_code == 200
        rest = sse(r.iter_lines())
    assert rest[0][1] == {
        "type": "start",
        "messageId": run_id,
        "messageMetadata": rest[0][1]["messageMetadata"],
    }
    assert text(seen) + text(rest) == EXPECTED  # nothing missing, nothing twice
    assert all(seq is None or seq > last for seq, _ in rest)
    assert rest[-1] == (None, "[DONE]")
    full = alice.get("/v1/aisdk/chat/c1/stream")  # the turn is over
    assert full.status_code == 204
    wait_status(alice, run_id, ("completed",))
    with alice.stream("GET", "/v1/aisdk/chat/c1/stream", headers={"Last-Event-ID": "x"}) as r:
        assert r.status_code == 400  # a malformed resume point is named, turn or not


def test_a_last_event_id_past_the_turn_is_refused(alice: httpx.Client) -> None:
    paused = post(alice, {"id": "c2", "messages": [user("use tool delete_files")]})
    assert paused[-2][1]["finishReason"] == "tool-calls"
    r = alice.get("/v1/aisdk/chat/c2/stream", headers={"Last-Event-ID": "999"})
    assert r.status_code == 400
    assert "past the last event" in r.json()["error"]["message"]


def test_stop_ends_the_stream_with_abort(alice: httpx.Client) -> None:
    with alice.stream("POST", "/v1/aisdk/chat", json={"id": "c3", "messages": [user("hi")]}) as r:
        lines = r.iter_lines()
        head = sse(lines, stop=lambda c: c["type"] == "text-delta")
        run_id = head[0][1]["messageId"]
        assert alice.post(f"/v1/runs/{run_id}/cancel").json()["status"] == "canceled"
        rest = sse(lines)
    kinds = [c["type"] for _, c in rest if isinstance(c, dict)]
    assert kinds[-2:] == ["abort", "finish"]
    assert rest[-2][1]["messageMetadata"]["tether"]["status"] == "canceled"
    assert len(text(head + rest)) < len(EXPECTED)


def _paused_turn(client: httpx.Client, cid: str, tool: str) -> tuple[str, dict[str, Any]]:
    """A turn paused on ``tool``: the run id and the assistant message as the page holds it."""
    chunks = post(client, {"id": cid, "messages": [user(f"use tool {tool}")]})
    run_id = chunks[0][1]["messageId"]
    call = next(c for _, c in chunks if isinstance(c, dict) and c["type"] == "tool-input-available")
    part: dict[str, Any] = {
        "type": f"tool-{tool}",
        "toolCallId": call["toolCallId"],
        "state": "input-available",
        "input": call["input"],
    }
    requests = [c for _, c in chunks if isinstance(c, dict) and c["type"] == "tool-approval-request"]
    if requests:
        part.update(state="approval-requested", approval={"id": requests[0]["approvalId"]})
    return run_id, {"id": run_id, "role": "assistant", "parts": [{"type": "step-start"}, part]}


def _answer(message: dict[str, Any], **changes: Any) -> dict[str, Any]:
    part = {**message["parts"][1], **changes}
    return {**message, "parts": [message["parts"][0], part]}


def test_hostile_answers_to_a_pause_are_refused_and_the_pause_kept(
    alice: httpx.Client, effects: Path
) -> None:
    run_id, message = _paused_turn(alice, "c4", "delete_files")
    approval = message["parts"][1]["approval"]
    cases = [
        # an approval id of another pause
        (_answer(message, state="approval-responded", approval={"id": "old:call", "approved": True}), 409),
        # an output where an approval is asked: the tool would run unapproved
        (_answer(message, state="output-available", output="deleted"), 422),
        # approved is not a boolean
        (_answer(message, state="approval-responded", approval={**approval, "approved": "yes"}), 422),
        # a deny reason over max_part_bytes
        (
            _answer(
                message,
                state="approval-responded",
                approval={**approval, "approved": False, "reason": "x" * 1_100_000},
            ),
            413,
        ),
        # no answer at all
        (message, 422),
    ]
    for answer, status in cases:
        r = alice.post(
            "/v1/aisdk/chat", json={"id": "c4", "messages": [user("use tool delete_files"), answer]}
        )
        assert r.status_code == status, r.text
    assert alice.get(f"/v1/runs/{run_id}").json()["status"] == "paused"
    assert effects.read_text() == ""
    good = _answer(message, state="approval-responded", approval={**approval, "approved": True})
    done = post(alice, {"id": "c4", "messages": [user("use tool delete_files"), good]})
    assert done[0][1]["messageId"] == run_id  # the same turn goes on
    assert [c["type"] for _, c in done[1:3]] == ["tool-approval-response", "tool-output-available"]
    assert effects.read_text() == "deleted\n"
    again = alice.post("/v1/aisdk/chat", json={"id": "c4", "messages": [user("use tool delete_files"), good]})
    assert again.status_code == 422  # answered once: the turn is over, a second send runs nothing
    assert effects.read_text() == "deleted\n"


def test_an_oversized_output_of_the_pages_tool_is_refused(alice: httpx.Client) -> None:
    run_id, message = _paused_turn(alice, "c5", "pick_color")
    big = _answer(message, state="output-available", output={"color": "x" * 1_100_000})
    r = alice.post("/v1/aisdk/chat", json={"id": "c5", "messages": [user("use tool pick_color"), big]})
    assert r.status_code == 413
    assert alice.get(f"/v1/runs/{run_id}").json()["status"] == "paused"


def test_a_revoked_token_ends_the_open_stream(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, model=LONG, tools=TOOLS, extra=["--ping-interval", "0.2"])
    with server.client(token) as alice:
        with alice.stream("POST", "/v1/aisdk/chat", json={"id": "c6", "messages": [user("hi")]}) as r:
            lines = r.iter_lines()
            head = sse(lines, stop=lambda c: c["type"] == "text-delta")
            tether("serve", "users", "revoke", "alice", *db.args())
            rest = sse(lines)  # ends long before the 30-second answer does
        assert rest[-1][1]["type"] == "error"
        assert "revoked" in rest[-1][1]["errorText"]
        assert len(text(head + rest)) < 1000
        assert alice.get("/v1/aisdk/chat/c6/stream").status_code == 401


def test_open_streams_are_bounded_per_user(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, model=THINKER, tools=TOOLS, extra=["--max-open-streams", "1"])
    with server.client(token) as client:
        with client.stream("POST", "/v1/aisdk/chat", json={"id": "c7", "messages": [user("hi")]}) as r:
            lines = r.iter_lines()  # held: a dropped iterator closes the response
            sse(lines, stop=lambda c: c["type"] == "start")
            refused = client.post("/v1/aisdk/chat", json={"id": "c8", "messages": [user("hi")]})
            assert refused.status_code == 429
            assert client.get("/v1/aisdk/chat/c7/stream").status_code == 429
        assert client.get("/v1/conversations/c8").status_code == 404  # a refused request starts nothing


def test_a_compacted_chat_says_so_in_a_data_part(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, model="py:tests.serve.scripted:small_window")
    with server.client(token) as client:
        parts: list[dict[str, Any]] = []
        for i in range(16):  # 16 exchanges of 84 tokens: 1.3 windows of 1,000 tokens
            chunks = [c for _, c in post(client, {"id": "long", "messages": [user(f"message {i}")]})]
            assert chunks[-2]["type"] == "finish", chunks[-3:]
            parts += [c for c in chunks[:-1] if c["type"] == "data-tether-compaction"]
        assert parts, "16 exchanges of 84 tokens in a 1,000-token window were never compacted"
        assert parts[0]["data"]["report"]["window"] == SMALL_WINDOW
        assert parts[0]["data"]["line"].startswith("compacted ")
        assert parts[0]["id"].endswith(f".compaction.{parts[0]['data']['step']}")


def test_a_long_chat_is_loaded_from_a_turn_within_the_limit(alice: httpx.Client) -> None:
    for i in range(3):
        post(alice, {"id": "c9", "messages": [user(f"look up thing {i}")]})
    stored = alice.get("/v1/conversations/c9").json()["version"]
    assert stored == 12  # user, assistant (call), tool, assistant: per turn
    full = alice.get("/v1/aisdk/chat/c9/messages").json()
    assert full["start"] == 0
    assert [m["role"] for m in full["messages"]] == ["user", "assistant"] * 3
    cut = alice.get("/v1/aisdk/chat/c9/messages", params={"limit": 6}).json()
    assert cut["start"] == 8  # the last 6 begin mid-turn: the page gets whole turns only
    assert cut["messages"] == full["messages"][4:]
    assert cut["messages"][0] == {
        "id": "c9.8",
        "role": "user",
        "parts": [{"type": "text", "text": "look up thing 2", "state": "done"}],
    }
    assert alice.get("/v1/aisdk/chat/c9/messages", params={"limit": 0}).status_code == 400


def test_a_seed_over_the_history_limits_is_refused_and_nothing_kept(alice: httpx.Client) -> None:
    many = [user(f"m{i}", f"m{i}") for i in range(10_001)]  # max_messages is 10,000
    r = alice.post("/v1/aisdk/chat", json={"id": "c10", "messages": [*many, user("go", "last")]})
    assert r.status_code == 413, r.text
    assert r.json()["error"]["limit"] == "max_messages"
    assert alice.get("/v1/conversations/c10").status_code == 404
    assert alice.get("/v1/aisdk/chat/c10/stream").status_code == 204
