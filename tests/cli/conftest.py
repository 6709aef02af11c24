"""Fixtures for the command-line tests: a runner, history files, and the one-line-error check."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tether import ToolCall, ToolResult, assistant, dumps, tool, user
from tether.cli import app

from ._cli_support import Invoke


@pytest.fixture
def invoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run ``tether …`` in-process. TETHER_DB points into tmp_path so nothing touches the real
    user data directory; TETHER_MODEL is cleared so the default-model logic is what runs."""
    monkeypatch.setenv("TETHER_DB", str(tmp_path / "default.db"))
    monkeypatch.delenv("TETHER_MODEL", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def run(*args: str, input: str | bytes | None = None) -> Result:
        return runner.invoke(app, list(args), input=input, catch_exceptions=True)

    return run


@pytest.fixture
def dangling_file(tmp_path: Path) -> Path:
    """A history whose last assistant turn asked for a tool that never answered, plus an orphan
    result for a call that does not exist."""
    history = [
        user("what time is it?"),
        assistant(ToolCall("c1", "current_time", "{}")),
        user("never mind"),
        tool(ToolResult("ghost", "calculator", "4")),
        assistant("ok"),
    ]
    path = tmp_path / "dangling.json"
    path.write_bytes(dumps(history))
    return path


@pytest.fixture
def sound_file(tmp_path: Path) -> Path:
    """A history that follows the pairing rule."""
    history = [
        user("2+2?"),
        assistant(ToolCall("c1", "calculator", '{"expression": "2+2"}')),
        tool(ToolResult("c1", "calculator", "4")),
        assistant("4"),
    ]
    path = tmp_path / "sound.json"
    path.write_bytes(dumps(history))
    return path
