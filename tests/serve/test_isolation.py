"""Authentication and isolation: every request carries a bearer token; another user's
conversations and runs answer 404, byte for byte the answer for ones that do not exist."""

from __future__ import annotations

import hashlib
import json
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from tests.serve._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    read_events,
    start_run,
    tether,
    wait_status,
)

from tether.serve._sse import REVOKED

ABSENT = "01a00000-0000-7000-8000-000000000000"


def _routes(cid: str, run_id: str) -> list[tuple[str, str, dict[str, object] | None]]:
    return [
        ("GET", f"/v1/conversations/{cid}", None),
        ("DELETE", f"/v1/conversations/{cid}", None),
        ("POST", f"/v1/conversations/{cid}/fork", {}),
        ("GET", f"/v1/conversations/{cid}/export?format=openai_chat", None),
        ("GET", f"/v1/conversations/{cid}/compactions", None),
        ("GET", f"/v1/conversations/{cid}/runs", None),
        ("POST", f"/v1/conversations/{cid}/runs", {"prompt": "hi"}),
        ("GET", f"/v1/runs/{run_id}", None),
        ("GET", f"/v1/runs/{run_id}/events", None),
        ("POST", f"/v1/runs/{run_id}/cancel", None),
        ("POST", f"/v1/runs/{run_id}/decisions", {"pause_id": "p", "decisions": []}),
    ]


def _ask(client: httpx.Client, method: str, path: str, body: dict[str, object] | None) -> httpx.Response:
    return client.request(method, path, json=body) if body is not None else client.request(method, path)


def test_another_users_conversations_and_runs_are_404_like_absent_ones(
    db: Database, servers: Callable[..., Server]
) -> None:
    alice, bob = add_user(db, "alice"), add_user(db, "bob")
    server = servers(db, model="py:tests.serve.scripted:fast_words")
    with server.client(alice) as a, server.client(bob) as b:
        cid = new_conversation(a)
        run_id = start_run(a, cid, "hello")
        wait_status(a, run_id, ("completed",))
        for method, path, body in _routes(cid, run_id):
            theirs = _ask(b, method, path, body)
            absent = _ask(b, method, path.replace(cid, ABSENT).replace(run_id, ABSENT), body)
            assert theirs.status_code == 404, (method, path, theirs.text)
            own_id = cid if cid in path else run_id
            assert theirs.content == absent.content.replace(ABSENT.encode(), own_id.encode()), (method, path)
        assert b.get("/v1/conversations").json()["conversations"] == []
        # alice still has everything, untouched by bob's attempts
        assert a.get(f"/v1/conversations/{cid}").json()["version"] == 2
        assert read_events(a, run_id)[-1].data["type"] == "run.completed"


def test_missing_bad_and_revoked_tokens_get_401(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, model="py:tests.serve.scripted:fast_words")
    with server.client(token) as client:
        assert client.get("/v1/me").json() == {"user": "alice", "auth": True}
    with server.client(None) as anonymous:
        assert anonymous.get("/healthz").json() == {"ok": True}  # says nothing about anyone's runs
        r = anonymous.get("/v1/conversations")
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["error"]["type"] == "unauthorized"
    with server.client(token[:-1] + ("A" if token[-1] != "A" else "B")) as forged:
        assert forged.get("/v1/conversations").status_code == 401
    tether("serve", "users", "revoke", "alice", *db.args())
    with server.client(token) as revoked:
        r = revoked.get("/v1/conversations")
        assert r.status_code == 401
        assert r.json() == {"error": {"type": "unauthorized", "message": "invalid or revoked token"}}


def test_open_streams_of_a_revoked_user_end_and_reconnects_get_401(
    db: Database, servers: Callable[..., Server]
) -> None:
    """Revoking a user ends the event streams they already hold (checked at every keep-alive
    interval), on the run stream and on AG-UI; the run itself goes on, and bob is untouched."""
    alice, bob = add_user(db, "alice"), add_user(db, "bob")
    server = servers(db, model="py:tests.serve.scripted:long_words", extra=["--ping-interval", "0.2"])
    with server.client(alice) as a, server.client(bob) as b:
        cid = new_conversation(a)
        run_id = start_run(a, cid, "talk")
        bob_cid = new_conversation(b)
        bob_run = start_run(b, bob_cid, "talk")
        body = {
            "threadId": new_conversation(a),
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
        }
        with (
            a.stream("GET", f"/v1/runs/{run_id}/events") as sse,
            a.stream("POST", "/v1/agui", json=body, headers={"Accept": "text/event-stream"}) as agui,
            b.stream("GET", f"/v1/runs/{bob_run}/events") as bobs,
        ):
            sse_lines, agui_lines, bob_lines = sse.iter_lines(), agui.iter_lines(), bobs.iter_lines()
            assert any(line.startswith("data: ") for line in _take(sse_lines, 4))
            assert any(line.startswith("data: ") for line in _take(agui_lines, 4))
            tether("serve", "users", "revoke", "alice", *db.args())
            rest = list(sse_lines)  # ends long before the 30-second answer does
            assert rest[-2:] == [f": {REVOKED}", ""]
            assert not any('"type":"run.completed"' in line for line in rest)
            agui_rest = [json.loads(line[6:]) for line in agui_lines if line.startswith("data: ")]
            assert agui_rest[-1] == {"type": "RUN_ERROR", "message": REVOKED, "code": "unauthorized"}
            assert any(line.startswith("data: ") for line in _take(bob_lines, 6))  # bob still streams
        assert a.get(f"/v1/runs/{run_id}/events").status_code == 401
        assert b.get(f"/v1/runs/{bob_run}").json()["status"] == "running"


def test_open_event_streams_per_user_are_bounded_and_given_back(
    db: Database, servers: Callable[..., Server]
) -> None:
    """Past ``--max-open-streams`` a user's next stream (run events or AG-UI) is 429 and an AG-UI
    request starts no run; a closed stream gives its place back; other users are not counted."""
    alice, bob = add_user(db, "alice"), add_user(db, "bob")
    server = servers(db, model="py:tests.serve.scripted:long_words", extra=["--max-open-streams", "2"])
    with server.client(alice) as a, server.client(bob) as b:
        cid = new_conversation(a)
        run_id = start_run(a, cid, "talk")
        path = f"/v1/runs/{run_id}/events"
        with a.stream("GET", path) as first, a.stream("GET", path) as second:
            assert (first.status_code, second.status_code) == (200, 200)
            refused = a.get(path)
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "5"
            assert "at most 2" in refused.json()["error"]["message"]
            thread = new_conversation(a)
            hello = [{"id": "u", "role": "user", "content": "hi"}]
            body = {"threadId": thread, "runId": "r", "messages": hello}
            assert a.post("/v1/agui", json=body).status_code == 429
            assert a.get(f"/v1/conversations/{thread}/runs").json()["runs"] == []  # no run started
            bob_run = start_run(b, new_conversation(b), "talk")
            with b.stream("GET", f"/v1/runs/{bob_run}/events") as bobs:
                assert bobs.status_code == 200
        deadline = time.monotonic() + 10  # the server sees the disconnects, and gives the places back
        while _opens(a, path) == 429:
            assert time.monotonic() < deadline, "closed streams never gave their places back"
            time.sleep(0.1)
        assert [_opens(a, path) for _ in range(5)] == [200] * 5  # one at a time: each gives its place back


def _opens(client: httpx.Client, path: str) -> int:
    """The status of a stream opened and closed at once."""
    with client.stream("GET", path) as response:
        return response.status_code


def _take(lines: Iterator[str], n: int) -> list[str]:
    return [line for _, line in zip(range(n), lines, strict=False)]


def test_tokens_are_stored_hashed(tmp_path: Path) -> None:
    db = Database("sqlite", path=tmp_path / "serve.db")
    token = add_user(db, "alice")
    conn = sqlite3.connect(db.path or "")
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert token not in dump
    assert token[4:] not in dump
    assert hashlib.sha256(token.encode()).hexdigest() in dump


def test_no_auth_on_loopback_says_so_and_acts_as_local(
    tmp_path: Path, servers: Callable[..., Server]
) -> None:
    db = Database("sqlite", path=tmp_path / "serve.db")
    server = servers(db, model="py:tests.serve.scripted:fast_words", extra=["--no-auth"])
    with server.client(None) as client:
        assert client.get("/v1/me").json() == {"user": "local", "auth": False}
        assert client.post("/v1/conversations").status_code == 201
    assert "--no-auth" in server.log()
    assert "WARNING" in server.log()


def test_no_auth_refuses_a_non_loopback_or_malformed_host_header(
    tmp_path: Path, servers: Callable[..., Server]
) -> None:
    db = Database("sqlite", path=tmp_path / "serve.db")
    server = servers(db, model="py:tests.serve.scripted:fast_words", extra=["--no-auth"])
    with server.client(None) as client:
        rebound = client.get("/v1/conversations", headers={"Host": f"attacker.example:{server.port}"})
        assert rebound.status_code == 403
        assert (
            client.get("/v1/conversations", headers={"Host": f"localhost:{server.port}"}).status_code == 200
        )
        for sloppy in (f"localhost:{server.port}@attacker.example", "[::1", "127.0.0.1 attacker.example"):
            refused = client.get("/v1/conversations", headers={"Host": sloppy})
            assert refused.status_code == 403, sloppy
    both = (
        f"GET /v1/me HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nHost: attacker.example\r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(both.encode())
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"several Host headers" in answer


def test_a_user_over_max_active_runs_gets_429(db: Database, servers: Callable[..., Server]) -> None:
    token = add_user(db, "alice")
    server = servers(db, extra=["--max-active-runs", "2"])
    with server.client(token) as client:
        first = [start_run(client, new_conversation(client), "go") for _ in range(2)]
        r = client.post(f"/v1/conversations/{new_conversation(client)}/runs", json={"prompt": "go"})
        for run_id in first:
            client.post(f"/v1/runs/{run_id}/cancel")
        again = client.post(f"/v1/conversations/{new_conversation(client)}/runs", json={"prompt": "go"})
    assert r.status_code == 429
    assert r.json()["error"]["type"] == "too_many_requests"
    assert "max_active_runs" in r.json()["error"]["message"]
    assert again.status_code == 202
