"""MCP tools in: a real MCP server written with the official SDK (tests/integrations/mcp_server.py),
started as a subprocess over stdio and on loopback over streamable HTTP, driven by tether agents.
The server appends every call's tool name to a file, so the tests count real executions."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.agent.scripts import Script, calls

from tether import Image
from tether.agent import UNKNOWN_OUTCOME_TEXT, Agent
from tether.errors import ApprovalError, RunError, TetherError, ToolError
from tether.integrations.mcp import MCPFailure, MCPTools, ToolPolicy
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("mcp_server.py")
SECRET = "an approval secret of enough bytes"


def counted(counts: Path) -> list[str]:
    return counts.read_text().split() if counts.exists() else []


@pytest.fixture
def counts(tmp_path: Path) -> Path:
    return tmp_path / "counts.txt"


@pytest.fixture
def stdio(counts: Path) -> MCPTools:
    return MCPTools.stdio([sys.executable, str(SERVER), str(counts)], timeout=20)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_url(counts: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "MCP_TEST_TOKEN": "s3cret"}
    proc = subprocess.Popen([sys.executable, str(SERVER), str(counts), "http", str(port)], env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the MCP test server exited at start"
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


def names(info: FunctionInfo) -> set[str]:
    return {t.name for t in info.tools}


async def test_tools_are_listed_with_their_schema_and_guarantees(stdio: MCPTools) -> None:
    async with stdio:
        tools = {t.name: t for t in await stdio.list_tools()}
    assert tools["lookup"].definition.parameters["properties"]["key"]["type"] == "string"
    assert tools["lookup"].definition.parameters["required"] == ["key"]
    assert tools["lookup"].definition.description == "Look a key up (read-only)."
    guarantees = {n: (t.idempotent, t.requires_approval) for n, t in tools.items()}
    assert guarantees["lookup"] == (True, False)  # readOnlyHint
    assert guarantees["append_note"] == (False, False)  # a side effect, destructiveHint false
    assert guarantees["delete_file"] == (False, True)  # destructiveHint
    assert guarantees["unannotated"] == (False, True)  # the specification's defaults: may destroy


async def test_an_agent_calls_a_stdio_tool_with_its_schema(stdio: MCPTools, counts: Path) -> None:
    script = Script(calls(("c1", "lookup", '{"key": "colour"}')), "the colour is known")
    async with Agent(script.model, tools=[stdio]) as agent:
        result = await agent.run("what colour?")
    assert result.output == "the colour is known"
    assert result.messages[2].tool_results[0].text == "value of colour"
    assert {"lookup", "delete_file"} <= names(script.infos[0])
    assert counted(counts) == ["lookup"]


async def test_arguments_that_break_the_schema_never_reach_the_server(stdio: MCPTools, counts: Path) -> None:
    script = Script(calls(("c1", "append_note", '{"text": 2}')), "gave up")
    async with Agent(script.model, tools=[stdio], approval_secret=SECRET) as agent:
        result = await agent.run("double")
    closing = result.messages[2].tool_results[0]
    assert closing.failed
    assert "invalid arguments for append_note" in closing.text
    assert "at text: 2 is not of type 'string'" in closing.text
    assert counted(counts) == []


async def test_streamable_http_with_a_bearer_header(http_url: str, counts: Path) -> None:
    tools = MCPTools.http(http_url, headers={"Authorization": "Bearer s3cret"}, timeout=20)
    script = Script(calls(("c1", "lookup", '{"key": "k"}')), "ok")
    async with Agent(script.model, tools=[tools]) as agent:
        result = await agent.run("look")
    assert result.messages[2].tool_results[0].text == "value of k"
    assert counted(counts) == ["lookup"]


async def test_a_refused_token_fails_the_run_before_the_model_is_asked(http_url: str) -> None:
    tools = MCPTools.http(http_url, headers={"Authorization": "Bearer wrong"}, timeout=20)
    script = Script("never")
    async with Agent(script.model, tools=[tools]) as agent:
        with pytest.raises(RunError) as info:
            await agent.run("look")
    assert info.value.stage == "tools"
    assert http_url in str(info.value)
    assert script.seen == []


async def test_results_map_to_parts_and_say_what_was_not_carried(stdio: MCPTools) -> None:
    script = Script(calls(("c1", "picture", "{}"), ("c2", "structured", "{}"), ("c3", "fails", "{}")), "seen")
    async with Agent(script.model, tools=[stdio]) as agent:
        result = await agent.run("show")
    picture, structured, fails = result.messages[2].tool_results
    assert picture.content[0].text == "a pixel"  # type: ignore[union-attr]
    image = picture.content[1]
    assert isinstance(image, Image)
    assert image.media_type == "image/png"
    assert image.data is not None
    assert image.data.startswith(b"\x89PNG")
    assert "could not carry" in picture.text
    assert "audio (audio/wav)" in picture.text
    assert '"answer": 42' in structured.text
    assert fails.failed
    assert "the disk is full" in fails.text


async def test_a_destructive_tool_waits_for_a_signed_approval(stdio: MCPTools, counts: Path) -> None:
    script = Script(calls(("c1", "delete_file", '{"path": "/data"}')), "deleted it")
    async with Agent(script.model, tools=[stdio], approval_secret=SECRET) as agent:
        first = await agent.run("clean up")
        assert first.deferred is not None
        assert [c.call.name for c in first.deferred.calls] == ["delete_file"]
        assert counted(counts) == []  # nothing ran before the approval
        decisions = first.deferred.approve_all()
        done = await agent.run(history=first.messages, deferred=decisions)
        assert done.output == "deleted it"
        assert counted(counts) == ["delete_file"]
        with pytest.raises(ApprovalError):  # the same approval cannot run it twice
            await agent.run(history=first.messages, deferred=decisions)
    assert counted(counts) == ["delete_file"]


async def test_overrides_and_the_server_policy_change_the_guarantees(counts: Path) -> None:
    command = [sys.executable, str(SERVER), str(counts)]
    relaxed = MCPTools.stdio(
        command,
        overrides={"delete_file": ToolPolicy(requires_approval=False), "hang": ToolPolicy(enabled=False)},
    )
    strict = MCPTools.stdio(command, approval="all", prefix="fs", tools=["lookup"])
    async with relaxed, strict:
        loose = {t.name: t for t in await relaxed.list_tools()}
        tight = await strict.list_tools()
    assert not loose["delete_file"].requires_approval
    assert not loose["delete_file"].idempotent
    assert "hang" not in loose
    assert [(t.name, t.requires_approval, t.idempotent) for t in tight] == [("fs_lookup", True, True)]


async def test_a_server_that_dies_mid_call_is_a_failed_call_and_the_run_goes_on(
    stdio: MCPTools, counts: Path
) -> None:
    script = Script(calls(("c1", "crash", "{}")), calls(("c2", "lookup", '{"key": "k"}')), "recovered")
    async with Agent(script.model, tools=[stdio]) as agent:
        result = await agent.run("go")
    crashed = result.messages[2].tool_results[0]
    assert crashed.failed
    assert "MCPFailure" in crashed.text
    assert "closed the connection" in crashed.text
    assert result.messages[4].tool_results[0].text == "value of k"  # the server was started again
    assert result.output == "recovered"
    assert counted(counts) == ["crash", "lookup"]


async def test_an_http_server_that_dies_mid_call_is_a_failed_call(http_url: str, counts: Path) -> None:
    tools = MCPTools.http(http_url, headers={"Authorization": "Bearer s3cret"}, timeout=10)
    script = Script(calls(("c1", "crash", "{}")), calls(("c2", "lookup", '{"key": "k"}')), "it is gone")
    async with Agent(script.model, tools=[tools]) as agent:
        result = await asyncio.wait_for(agent.run("go"), 60)
    crashed = result.messages[2].tool_results[0]
    again = result.messages[4].tool_results[0]
    assert crashed.failed
    assert "MCPFailure" in crashed.text
    assert http_url in crashed.text
    assert again.failed  # nobody listens any more: a clear failure, not a hang
    assert "MCPFailure" in again.text
    assert result.output == "it is gone"
    assert counted(counts) == ["crash"]


async def test_on_failure_fail_ends_the_run_with_a_tool_error(counts: Path) -> None:
    tools = MCPTools.stdio([sys.executable, str(SERVER), str(counts)], on_failure="fail")
    script = Script(calls(("c1", "crash", "{}")), "unreachable")
    async with Agent(script.model, tools=[tools]) as agent:
        with pytest.raises(ToolError, match="closed the connection"):
            await agent.run("go")


async def test_a_hanging_server_is_bounded_by_the_timeout(counts: Path) -> None:
    tools = MCPTools.stdio([sys.executable, str(SERVER), str(counts)], timeout=2, connect_timeout=60)
    script = Script(calls(("c1", "hang", "{}")), "it hung")
    async with Agent(script.model, tools=[tools]) as agent:
        result = await asyncio.wait_for(agent.run("wait"), 60)
    hung = result.messages[2].tool_results[0]
    assert hung.failed
    assert "gave no answer within 2s during tools/call hang" in hung.text
    assert result.output == "it hung"


GARBAGE_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "garbage", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "g", "inputSchema": {"type": "object"},
                             "annotations": {"readOnlyHint": True}}]}
    elif method == "tools/call":
        print("this is not JSON-RPC", flush=True)
        result = {"content": "not a list of blocks", "isError": "maybe"}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}), flush=True)
"""


async def test_a_server_answering_garbage_mid_run_is_a_failed_call(tmp_path: Path) -> None:
    server = tmp_path / "garbage_server.py"
    server.write_text(GARBAGE_SERVER)
    tools = MCPTools.stdio([sys.executable, str(server)], timeout=5, connect_timeout=60)
    script = Script(calls(("c1", "g", "{}")), "went on")
    async with Agent(script.model, tools=[tools]) as agent:
        result = await asyncio.wait_for(agent.run("go"), 60)
    answer = result.messages[2].tool_results[0]
    assert answer.failed
    assert "MCPFailure" in answer.text
    assert "garbage_server.py" in answer.text
    assert result.output == "went on"


async def test_a_command_that_is_not_an_mcp_server_fails_the_run_clearly(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.py"
    garbage.write_text("import sys\nfor line in sys.stdin:\n    print('not json', flush=True)\n")
    tools = MCPTools.stdio([sys.executable, str(garbage)], connect_timeout=3)
    async with Agent(Script("never").model, tools=[tools]) as agent:
        with pytest.raises(RunError) as info:
            await asyncio.wait_for(agent.run("go"), 60)
    assert info.value.stage == "tools"
    assert "garbage.py" in str(info.value)


async def test_a_list_change_is_seen_by_the_next_run(stdio: MCPTools) -> None:
    script = Script(calls(("c1", "add_tool", "{}")), "added", calls(("c2", "added", "{}")), "used it")
    async with Agent(script.model, tools=[stdio]) as agent:
        await agent.run("add one")
        assert "added" not in names(script.infos[1])  # a run keeps the tools it started with
        second = await agent.run("use it")
    assert "added" in names(script.infos[2])
    assert second.messages[2].tool_results[0].text == "I was added"


async def test_closing_the_agent_stops_the_stdio_server(stdio: MCPTools) -> None:
    async with Agent(Script(calls(("c1", "lookup", '{"key": "k"}')), "ok").model, tools=[stdio]) as agent:
        await agent.run("go")
        live = stdio._live  # pyright: ignore[reportPrivateUsage]
        assert live is not None
        assert not live.task.done()
    assert live.task.done()
    with pytest.raises(Exception, match="closed"):
        await stdio.list_tools()


def test_run_sync_works_on_its_own_event_loop_each_time(stdio: MCPTools, counts: Path) -> None:
    agent = Agent(
        Script(
            calls(("c1", "lookup", '{"key": "a"}')), "one", calls(("c2", "lookup", '{"key": "b"}')), "two"
        ).model,
        tools=[stdio],
    )
    assert agent.run_sync("first").output == "one"
    assert agent.run_sync("second").output == "two"  # a new loop: the server is reached again
    assert counted(counts) == ["lookup", "lookup"]
    asyncio.run(agent.aclose())


def test_mcp_failure_is_a_tether_error() -> None:
    assert issubclass(MCPFailure, TetherError)


CHILD = """
import asyncio, sys
from tether import ToolCall, assistant
from tether.agent import Agent
from tether.integrations.mcp import MCPTools
from tether.models.testing import FunctionModel
from tether.stores import SQLiteStore

db, server, counts, marker = sys.argv[1:5]

def reply(messages, info):
    return assistant(ToolCall("w-1", "slow_side_effect", '{"path": "%s"}' % marker))

async def main():
    tools = MCPTools.stdio([sys.executable, server, counts])
    async with Agent(FunctionModel(reply), tools=[tools]) as agent:
        await agent.run("write it", store=SQLiteStore(db), owner="o", conversation_id="conv")

asyncio.run(main())
"""


async def test_a_sigkilled_run_resumes_without_calling_the_side_effect_again(
    tmp_path: Path, counts: Path
) -> None:
    db, marker, child = tmp_path / "c.db", tmp_path / "marker", tmp_path / "child.py"
    child.write_text(textwrap.dedent(CHILD))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, str(child), str(db), str(SERVER), str(counts), str(marker)], env=env
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            await asyncio.sleep(0.05)
        assert marker.exists(), "the side effect never started"
        proc.send_signal(signal.SIGKILL)  # tether dies while the MCP tool is running
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert counted(counts) == ["slow_side_effect"]
    store = SQLiteStore(db)
    tools = MCPTools.stdio([sys.executable, str(SERVER), str(counts)])
    try:
        async with Agent(FunctionModel(lambda m, i: "I could not confirm the write"), tools=[tools]) as agent:
            resumed = await agent.run(store=store, owner="o", conversation_id="conv")
        closing = resumed.messages[2].tool_results[0]
        assert closing.call_id == "w-1"
        assert closing.text == UNKNOWN_OUTCOME_TEXT
        assert resumed.output == "I could not confirm the write"
        assert counted(counts) == ["slow_side_effect"]  # not called again
    finally:
        await store.close()
