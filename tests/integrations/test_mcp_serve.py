"""``tether serve --mcp``: the service's agent uses a real MCP server's tools (the SDK's server,
over stdio), and a possibly destructive tool pauses the run for the owner's decision."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.serve._serve_support import Database, Server, add_user, new_conversation, start_run, wait_status

SERVER = Path(__file__).with_name("mcp_server.py")
MODELS = "py:tests.integrations.mcp_models"


def _server(tmp_path: Path, model: str, arguments: dict[str, str]) -> tuple[Server, str, Path]:
    counts = tmp_path / "counts"
    db = Database("sqlite", path=tmp_path / "serve.db")
    token = add_user(db, "alice")
    server = Server(
        db,
        model=f"{MODELS}:{model}",
        tools=None,
        extra=["--mcp", f"{sys.executable} {SERVER} {counts}"],
        extra_env={"MCP_TEST_ARGUMENTS": json.dumps(arguments)},
    )
    return server.start(tmp_path), token, counts


def test_serve_gives_its_agent_the_mcp_tools(tmp_path: Path) -> None:
    server, token, counts = _server(tmp_path, "lookup_model", {"key": "colour"})
    try:
        with server.client(token) as client:
            cid = new_conversation(client)
            run_id = start_run(client, cid, "look it up")
            wait_status(client, run_id, ("completed",))
            messages = client.get(f"/v1/conversations/{cid}").json()["messages"]
    finally:
        server.stop()
    assert counts.read_text().split() == ["lookup"]
    assert "the tool said: value of colour" in json.dumps(messages)


def test_serve_pauses_a_destructive_mcp_tool_until_approved(tmp_path: Path) -> None:
    server, token, counts = _server(tmp_path, "delete_file_model", {"path": "/data"})
    try:
        with server.client(token) as client:
            cid = new_conversation(client)
            run_id = start_run(client, cid, "clean up")
            pause = wait_status(client, run_id, ("paused",))["pause"]
            assert [c["name"] for c in pause["calls"]] == ["delete_file"]
            assert not counts.exists()  # nothing ran before the decision
            decision = {"call_id": pause["calls"][0]["call_id"], "decision": "approve"}
            body = {"pause_id": pause["pause_id"], "decisions": [decision]}
            assert client.post(f"/v1/runs/{run_id}/decisions", json=body).status_code == 202
            wait_status(client, run_id, ("completed",))
    finally:
        server.stop()
    assert counts.read_text().split() == ["delete_file"]
