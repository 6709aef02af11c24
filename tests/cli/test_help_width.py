"""Every command's help reads at 80 columns: each option's full name, each description and each
summary whole (never cut with an ellipsis, never a bracketed word eaten as style markup), no line
wider than the terminal. Checked for the whole command tree (a new command is walked too), with
COLUMNS=80 and in a real 80-column terminal (a pseudo-terminal, no COLUMNS)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from tether.cli import app

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 80
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _tree() -> Iterator[tuple[tuple[str, ...], Any]]:
    def walk(path: tuple[str, ...], command: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
        yield path, command
        if isinstance(command, TyperGroup):
            for name, sub in command.commands.items():
                yield from walk((*path, name), sub)

    yield from walk((), typer.main.get_command(app))


TREE = dict(_tree())


def _flat(text: str) -> str:
    return " ".join(text.split())


def _problems(path: tuple[str, ...], output: str) -> list[str]:
    """What cannot be read in ``output``, the help of the command at ``path``."""
    command = TREE[path]
    flat = _flat(output)
    problems = [f"line of {len(line)} columns: {line!r}" for line in output.splitlines() if len(line) > WIDTH]
    texts = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    if output.count("…") > sum(t.count("…") for t in texts):  # beyond the help's own "openai:…"
        problems.append("an ellipsis cuts something")
    summary = _flat((command.help or "").split("\n\n")[0])
    if summary not in flat:
        problems.append(f"the help text is not shown whole: {summary!r}")
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("-") and not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", output):
                problems.append(f"option {name} is not shown whole")
        if param.help and _flat(param.help) not in flat:
            problems.append(f"the description of {param.name} is not shown whole: {param.help!r}")
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            if _flat((sub.help or "").split("\n\n")[0]) not in flat:
                problems.append(f"the summary of {name} is cut")
    return problems


@pytest.mark.parametrize("path", sorted(TREE), ids=lambda p: " ".join(("tether", *p)))
def test_help_reads_at_80_columns(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)}, prog_name="tether")
    assert result.exit_code == 0, result.output
    assert _problems(path, result.output) == []


def test_the_walk_reaches_every_command() -> None:
    """The tree is walked from the root, so a command added later is checked without a change
    here; its known leaves are there (and the groups that hold them)."""
    names = {" ".join(p) for p in TREE}
    assert {"", "chat", "serve", "serve users", "serve users add", "history convert", "logs show"} <= names


def test_help_reads_in_a_real_80_column_terminal() -> None:
    """The same in a pseudo-terminal 80 columns wide (no COLUMNS: the width comes from the
    terminal), every command at once."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["TERM"] = "xterm-256color"
    children = {
        path: pexpect.spawn(
            sys.executable,
            ["-m", "tether.cli", *path, "--help"],
            env=env,
            dimensions=(50, WIDTH),
            encoding="utf-8",
            timeout=120,
        )
        for path in TREE
    }
    problems: dict[str, list[str]] = {}
    try:
        for path, child in children.items():
            child.expect(pexpect.EOF)
            output = _ANSI.sub("", (child.before or "").replace("\r\n", "\n"))
            child.close()
            assert child.exitstatus == 0, output
            found = _problems(path, output)
            if found:
                problems[" ".join(("tether", *path))] = found
    finally:
        for child in children.values():
            if child.isalive():
                child.kill(9)
    assert problems == {}
