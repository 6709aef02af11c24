"""``tether chat --mcp`` with a real MCP server (the SDK's server API, over stdio), through the
command line runner on a real SQLite file; ``tether serve --mcp`` refusing a bad spec at start."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tether.cli import app
from tether.models import PROVIDERS
from tether.stores import SQLiteStore

SERVER = Path(__file__).with_name("mcp_server.py")


@pytest.fixture(autouse=True)
def scripted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(PROVIDERS, "mcpcall", ("tests.integrations.mcp_models", "McpCallModel"))
    monkeypatch.setenv("TETHER_DB", str(tmp_path / "default.db"))
    monkeypatch.setenv("COLUMNS", "200")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), catch_exceptions=True)


def server(counts: Path) -> str:
    return f"{sys.executable} {SERVER} {counts}"


def stored(db: Path) -> list[str]:
    async def run() -> list[str]:
        async with SQLiteStore(db) as store:
            (info,) = await store.conversations("local")
            loaded = await store.load("local", info.conversation_id)
            return [m.role for m in loaded.messages]

    return asyncio.run(run())


def test_chat_calls_an_mcp_tool_and_stores_the_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts, db = tmp_path / "counts", tmp_path / "chat.db"
    monkeypatch.setenv("MCP_TEST_ARGUMENTS", json.dumps({"key": "colour"}))
    result = invoke("chat", "-m", "mcpcall:lookup", "--db", str(db), "--mcp", server(counts), "look it up")
    assert result.exit_code == 0, result.output
    assert "the tool said: value of colour" in result.stdout
    assert counts.read_text().split() == ["lookup"]
    assert stored(db) == ["user", "assistant", "tool", "assistant"]


def test_chat_asks_before_a_destructive_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts, db = tmp_path / "counts", tmp_path / "chat.db"
    monkeypatch.setenv("MCP_TEST_ARGUMENTS", json.dumps({"path": "/data"}))
    denied = invoke("chat", "-m", "mcpcall:delete_file", "--db", str(db), "--mcp", server(counts), "clean")
    assert denied.exit_code == 0, denied.output
    assert "no terminal to ask: denied" in denied.stdout
    assert "the user did not approve it" in denied.stdout
    assert not counts.exists()  # never ran
    asked: list[str] = []

    def yes(question: str) -> bool:
        asked.append(question)
        return True

    monkeypatch.setattr("tether.cli._chat.ask_in_terminal", yes)
    approved = invoke(
        "chat", "-m", "mcpcall:delete_file", "--db", str(tmp_path / "b.db"), "--mcp", server(counts), "go"
    )
    assert approved.exit_code == 0, approved.output
    assert "delete_file" in asked[0]
    assert "/data" in asked[0]
    assert "the tool said: deleted /data" in approved.stdout
    assert counts.read_text().split() == ["delete_file"]


def test_bad_mcp_options_are_one_line_errors(tmp_path: Path) -> None:
    result = invoke("chat", "-m", "mcpcall:lookup", "--mcp", "http://x", "--mcp-header", "no colon", "hi")
    assert result.exit_code != 0
    assert "'Name: value'" in result.output
    broken = invoke("chat", "-m", "mcpcall:lookup", "--mcp", f"{sys.executable} -c pass", "hi")
    assert broken.exit_code != 0
    assert "the tools could not be listed" in broken.output
    serve = invoke("serve", "--db", str(tmp_path / "s.db"), "--mcp", "   ", "-m", "test")
    assert serve.exit_code != 0
    assert "--mcp needs a command" in serve.output
