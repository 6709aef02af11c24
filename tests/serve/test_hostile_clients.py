"""``tether serve`` attacked as a hostile client would, over real HTTP on loopback: simultaneous
starts against ``--max-active-runs``, a delete racing a start, form posts on every
state-changing route, numbers in every numeric parameter that ``int()`` reads but no client
means, a decision on a client tool's pause, a client tool whose schema asks for 30 MB."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.serve._serve_support import (
    Database,
    Server,
    add_user,
    new_conversation,
    start_run,
    wait_status,
)

LONG = "py:tests.serve.scripted:long_words"


def _together(calls: list[Callable[[], httpx.Response]]) -> list[httpx.Response]:
    """Run ``calls`` at the same moment, each on its own thread and connection."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], httpx.Response]) -> httpx.Response:
        barrier.wait(timeout=30)
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def _starter(server: Server, token: str, cid: str) -> Callable[[], httpx.Response]:
    def start() -> httpx.Response:
        with server.client(token) as client:
            return client.post(f"/v1/conversations/{cid}/runs", json={"prompt": "hello"})

    return start


def _cancel_all(client: httpx.Client, responses: list[httpx.Response]) -> None:
    for r in responses:
        if r.status_code == 202:
            client.post(f"/v1/runs/{r.json()['id']}/cancel")


def test_simultaneous_starts_never_pass_max_active_runs(db: Database, servers: Callable[..., Server]) -> None:
    """Ten starts at once on ten conversations with a limit of 2: exactly two run (the count and
    the insert are one step of the event log); the others are 429."""
    token = add_user(db, "alice")
    server = servers(db, model=LONG, extra=["--max-active-runs", "2"])
    with server.client(token) as client:
        cids = [new_conversation(client) for _ in range(10)]
        responses = _together([_starter(server, token, cid) for cid in cids])
        try:
            codes = sorted(r.status_code for r in responses)
            assert codes == [202, 202] + [429] * 8, [r.text for r in responses]
            assert all(
                "max_active_runs" in r.json()["error"]["message"] for r in responses if r.status_code == 429
            )
        finally:
            _cancel_all(client, responses)


@pytest.mark.postgres
def test_two_processes_share_one_max_active_runs(pg_db: Database, servers: Callable[..., Server]) -> None:
    """The same with the starts split over two processes of one PostgreSQL database."""
    token = add_user(pg_db, "alice")
    first = servers(pg_db, model=LONG, extra=["--max-active-runs", "3"])
    second = servers(pg_db, model=LONG, extra=["--max-active-runs", "3"])
    with first.client(token) as client:
        cids = [new_conversation(client) for _ in range(12)]
        calls = [_starter(first if i % 2 else second, token, cid) for i, cid in enumerate(cids)]
        responses = _together(calls)
        try:
            codes = sorted(r.status_code for r in responses)
            assert codes == [202] * 3 + [429] * 9, [r.text for r in responses]
        finally:
            _cancel_all(client, responses)


def test_a_deleted_conversation_stays_deleted_when_a_start_races_the_delete(
    db: Database, servers: Callable[..., Server]
) -> None:
    """A DELETE and a run start at the same moment: either the run holds the conversation first
    (the delete is 409) or the delete wins (the start is 404). Never both: a run that started
    would re-create the conversation it was deleted under."""
    token = add_user(db, "alice")
    server = servers(db, model=LONG)
    outcomes: set[tuple[int, int]] = set()
    with server.client(token) as client:
        for _ in range(12):
            cid = new_conversation(client)

            def delete(cid: str = cid) -> httpx.Response:
                with server.client(token) as c:
                    return c.delete(f"/v1/conversations/{cid}")

            deleted, started = _together([delete, _starter(server, token, cid)])
            outcomes.add((deleted.status_code, started.status_code))
            assert (deleted.status_code, started.status_code) in {(204, 404), (409, 202)}, (
                deleted.text,
                started.text,
            )
            if started.status_code == 202:
                run = started.json()["id"]
                client.post(f"/v1/runs/{run}/cancel")
                assert client.delete(f"/v1/conversations/{cid}").status_code == 204
            assert client.get(f"/v1/conversations/{cid}").status_code == 404
            # a run's lazy creation (and an AG-UI thread named like it) cannot bring it back
            assert client.post(f"/v1/conversations/{cid}/runs", json={"prompt": "hi"}).status_code == 404
            again = client.post(
                "/v1/agui",
                json={
                    "threadId": cid,
                    "runId": "x",
                    "messages": [{"id": "u", "role": "user", "content": "hi"}],
                },
            )
            assert again.status_code == 409, again.text
            assert "was deleted" in again.json()["error"]["message"]
            assert client.get(f"/v1/conversations/{cid}").status_code == 404


# -- content types -------------------------------------------------------------------------------

_STATE_CHANGING = ("post", "put", "patch", "delete")
_NOT_JSON: list[tuple[str, dict[str, str], bytes]] = [
    ("text/plain", {"Content-Type": "text/plain"}, b"x=1"),
    ("empty form", {"Content-Type": "application/x-www-form-urlencoded"}, b""),
    ("form", {"Content-Type": "application/x-www-form-urlencoded"}, b"x=1"),
    ("multipart", {"Content-Type": "multipart/form-data; boundary=b"}, b"--b--\r\n"),
    ("no type", {}, b"x=1"),
    ("text/plain+json lookalike", {"Content-Type": "text/x+json"}, b"{}"),
]


@pytest.fixture
def api(tmp_path: Path, servers: Callable[..., Server]) -> tuple[Server, str]:
    db = Database("sqlite", path=tmp_path / "serve.db")
    token = add_user(db, "alice")
    return servers(db, model=LONG), token


def test_every_state_changing_route_refuses_what_is_not_json(api: tuple[Server, str]) -> None:
    """Every state-changing operation of the OpenAPI document (so a new route is covered) refuses
    a body a form or a no-preflight fetch of another site can send, with or without a body, and
    nothing changes."""
    server, token = api
    with server.client(token) as client:
        doc = client.get("/openapi.json").json()
        idle = new_conversation(client)
        busy = new_conversation(client)
        run = start_run(client, busy, "hello")
        before = client.get("/v1/conversations").json()["conversations"]
        checked: list[str] = []
        for path, item in doc["paths"].items():
            for method in (m for m in item if m in _STATE_CHANGING):
                url = path.replace("{conversation_id}", idle).replace("{run_id}", run)
                for name, headers, body in _NOT_JSON:
                    r = client.request(method.upper(), url, headers=headers, content=body)
                    assert r.status_code == 415, (method, path, name, r.status_code, r.text)
                    assert r.json()["error"]["type"] == "unsupported_media_type"
                checked.append(f"{method.upper()} {path}")
        assert {"POST /v1/runs/{run_id}/cancel", "DELETE /v1/conversations/{conversation_id}"} <= set(checked)
        assert "POST /v1/agui" in checked
        assert client.get("/v1/conversations").json()["conversations"] == before
        assert client.get(f"/v1/runs/{run}").json()["status"] == "running"
        # what the page and curl send still works: no body and no type, or JSON
        body_less = client.post(f"/v1/runs/{run}/cancel", json={"stop": True})
        assert body_less.status_code == 400
        assert "takes no request body" in body_less.json()["error"]["message"]
        assert client.post(f"/v1/runs/{run}/cancel").json()["status"] == "canceled"
        assert (
            client.post("/v1/conversations", headers={"Content-Type": "application/json"}).status_code == 201
        )


# -- numbers -------------------------------------------------------------------------------------

_NOT_NUMBERS = ["²", "+5", "5_0", "٥", "５", " 5", "5 ", "-1", "0x5", "1e3", "5.0", "9" * 19, ""]


def _numeric_parameters(doc: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """``(method, path, where, name)`` of every parameter the document says is a number."""
    out: list[tuple[str, str, str, str]] = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            for p in op.get("parameters", []):
                schema = p["schema"]
                digits = schema.get("pattern", "").startswith("^[0-9]")
                if schema.get("type") == "integer" or digits:
                    out.append((method, path, p["in"], p["name"]))
    return out


def test_every_numeric_parameter_takes_ascii_digits_only(api: tuple[Server, str]) -> None:
    """Each number the service reads from a query or a header (found in the OpenAPI document)
    is 1-18 ASCII digits: a superscript ``int()`` refuses was a 500, and a sign, ``_``, spaces
    or other scripts' digits were read as numbers."""
    server, token = api
    with server.client(token) as client:
        doc = client.get("/openapi.json").json()
        cid = new_conversation(client)
        run = start_run(client, cid, "hello")
        client.post(f"/v1/runs/{run}/cancel")
        found = _numeric_parameters(doc)
        assert {(w, n) for _, _, w, n in found} >= {
            ("query", "limit"),
            ("query", "offset"),
            ("query", "after"),
            ("header", "Last-Event-ID"),
        }
        for method, path, where, name in found:
            url = path.replace("{conversation_id}", cid).replace("{run_id}", run)
            for value in _NOT_NUMBERS:
                if where == "header":
                    if value.strip() != value or not value:
                        continue  # servers strip a header's spaces; an empty one is no header
                    # as a client's bytes reach the server (latin-1: "²" is the byte b2)
                    raw = (
                        value.encode("latin-1", "replace")
                        if value.isascii() or value == "²"
                        else value.encode()
                    )
                    r = client.request(method.upper(), url, headers={name: raw})
                else:
                    r = client.request(method.upper(), url, params={name: value})
                assert r.status_code == 400, (method, path, name, value, r.status_code, r.text)
                message = r.json()["error"]["message"]
                assert "ASCII digits" in message, message
            good = client.request(method.upper(), url, **_good(where, name))
            assert good.status_code == 200, (path, name, good.text)


def _good(where: str, name: str) -> dict[str, Any]:
    return {"headers": {name: "1"}} if where == "header" else {"params": {name: "1"}}


# -- decisions on a client tool's pause ----------------------------------------------------------


def test_an_http_decision_on_a_client_tools_pause_is_422_and_the_run_stays_paused(
    tmp_path: Path, servers: Callable[..., Server]
) -> None:
    """A client tool exists only in the AG-UI request that declared it: a decision through
    ``/v1/runs/{id}/decisions`` was 202 and then the run failed with the result lost. It is
    refused (422, as AG-UI refuses a result without its tool) and the run stays paused for the
    AG-UI answer."""
    db = Database("sqlite", path=tmp_path / "serve.db")
    token = add_user(db, "alice")
    server = servers(db, model="py:tests.serve.scripted:fast_words")
    tools = [{"name": "pick_color", "description": "Ask the user", "parameters": {"type": "object"}}]
    prompt = [{"id": "u", "role": "user", "content": "use tool pick_color please"}]
    with server.client(token) as client:
        r = client.post("/v1/agui", json={"threadId": "t1", "runId": "c", "messages": prompt, "tools": tools})
        finished = [line for line in r.text.splitlines() if '"RUN_FINISHED"' in line]
        assert finished, r.text
        run = re.search(r'"runId":"([^"]+)"', finished[-1])
        assert run is not None
        state = client.get(f"/v1/runs/{run.group(1)}").json()
        assert state["status"] == "paused"
        (pending,) = state["pause"]["calls"]
        decision = {"call_id": pending["call_id"], "decision": "result", "value": "red"}
        refused = client.post(
            f"/v1/runs/{run.group(1)}/decisions",
            json={"pause_id": state["pause"]["pause_id"], "decisions": [decision]},
        )
        assert refused.status_code == 422, refused.text
        assert "POST /v1/agui" in refused.json()["error"]["message"]
        assert client.get(f"/v1/runs/{run.group(1)}").json()["status"] == "paused"
        answer = [
            *prompt,
            {
                "id": "a",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": pending["call_id"],
                        "type": "function",
                        "function": {"name": "pick_color", "arguments": "{}"},
                    }
                ],
            },
            {"id": "t", "role": "tool", "toolCallId": pending["call_id"], "content": "red"},
        ]
        done = client.post(
            "/v1/agui", json={"threadId": "t1", "runId": "c2", "messages": answer, "tools": tools}
        )
        assert '"RUN_FINISHED"' in done.text, done.text
        wait_status(client, run.group(1), ("completed",))
        stored = client.get("/v1/conversations/t1").json()["messages"]
        results = [p for m in stored if m["role"] == "tool" for p in m["parts"]]
        assert [p["content"][0]["text"] for p in results] == ["red"]


# -- the test model and a client's schema ------------------------------------------------------------


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_the_test_model_does_not_build_what_a_client_schema_asks(
    tmp_path: Path, servers: Callable[..., Server]
) -> None:
    """``--model test`` calls a client's tool with arguments made from the client's schema:
    ``"minLength": 30000000`` was a 30 MB call (+234 MB of server memory). The run fails, saying
    why, and the server's memory stays where it was."""
    db = Database("sqlite", path=tmp_path / "serve.db")
    token = add_user(db, "alice")
    server = servers(db, model="test", tools=None)
    schema = {"type": "object", "properties": {"c": {"type": "string", "minLength": 30_000_000}}}
    tools = [{"name": "pick", "description": "hostile", "parameters": schema}]
    prompt = [{"id": "u", "role": "user", "content": "hi"}]
    assert server.proc is not None
    with server.client(token) as client:
        client.post("/v1/agui", json={"threadId": "warm", "runId": "w", "messages": prompt})
        before = _rss_kb(server.proc.pid)
        r = client.post("/v1/agui", json={"threadId": "t1", "runId": "c", "messages": prompt, "tools": tools})
        assert '"RUN_ERROR"' in r.text, r.text[-2000:]
        assert "minLength 30000000" in r.text
        assert len(r.content) < 100_000
        grown = _rss_kb(server.proc.pid) - before
        assert grown < 40_000, f"the server grew by {grown} KB"
    assert "Traceback" not in server.log()
