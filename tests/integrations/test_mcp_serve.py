"""``tether serve --mcp``: the service's agent uses a real MCP server's tools (the SDK's server,
over stdio), and a possibly destructive tool pauses the run for the owner's decision."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.agent.scripts import Script
from tests.agent.test_toolsets import Counter
from tests.serve._serve_support import Database, Server, add_user, new_conversation, start_run, wait_status

from tether.agent import Agent, Tool
from tether.serve import Caller, RunManager
from tether.stores import MemoryStore
from tether.stores.events._memory import MemoryEventLog

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


async def test_the_service_keeps_the_agents_toolsets_next_to_a_clients_tools() -> None:
    """A run given extra (client) tools by the service still gets the agent's toolsets."""
    counter = Counter()
    script = Script("done")
    store, log = MemoryStore(), MemoryEventLog()
    cid = await store.create("alice")
    agent = Agent(script.model, tools=[counter])
    manager = RunManager(store=store, events=log, agent=agent, heartbeat_interval=0.05, stale_after=1.0)
    await manager.open()
    try:
        client_tool = Tool(lambda: None, name="client_tool", external=True)
        record = await manager.start(Caller("alice"), cid, "go", extra_tools=[client_tool])
        for _ in range(200):
            if (await log.get_run("alice", record.run_id)).status != "running":
                break
            await asyncio.sleep(0.02)
    finally:
        await manager.close()
    assert {d.name for d in script.infos[0].tools} == {"tool_0", "client_tool"}
