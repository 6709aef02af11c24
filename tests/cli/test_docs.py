"""Every command and option has help text and is documented in docs/cli.md, in its own section."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.core import TyperGroup, TyperOption

from tether.cli import app
from tether.cli._chat import SLASH_COMMANDS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _commands() -> Iterator[tuple[str, Any]]:
    root = typer.main.get_command(app)

    def walk(path: str, command: Any) -> Iterator[tuple[str, Any]]:
        yield path, command
        if isinstance(command, TyperGroup):
            for name, sub in command.commands.items():
                yield from walk(f"{path} {name}", sub)

    yield from walk("tether", root)


COMMANDS = dict(_commands())
LEAVES = {path: c for path, c in COMMANDS.items() if not isinstance(c, TyperGroup)}


def _section(path: str) -> str:
    """The part of docs/cli.md under the heading naming ``path`` (up to the next heading of the
    same or a higher level)."""
    text = DOCS.read_text()
    match = re.search(rf"^(#+) `{re.escape(path)}`\s*$", text, re.MULTILINE)
    assert match, f"docs/cli.md has no heading for `{path}`"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def test_the_expected_commands_exist() -> None:
    assert set(LEAVES) == {
        "tether chat",
        "tether demo",
        "tether logs list",
        "tether logs show",
        "tether logs search",
        "tether logs export",
        "tether history check",
        "tether history normalize",
        "tether history sanitize",
        "tether history trim",
        "tether history compact",
        "tether history convert",
        "tether serve users add",
        "tether serve users token",
        "tether serve users revoke",
        "tether serve users list",
        "tether runs list",
        "tether runs show",
        "tether runs cancel",
        "tether runs processes",
        "tether mcp",
    }


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_has_help(path: str) -> None:
    command = COMMANDS[path]
    assert (command.help or "").strip(), f"{path} has no help text"


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_every_option_has_help_and_is_documented(path: str) -> None:
    section = _section(path)
    for param in LEAVES[path].params:
        if param.name == "help":
            continue
        help_text = getattr(param, "help", None)
        assert (help_text or "").strip(), f"{path}: {param.name} has no help text"
        if isinstance(param, TyperOption):
            for flag in [*param.opts, *param.secondary_opts]:
                assert f"`{flag}`" in section, f"docs/cli.md: `{flag}` of `{path}` is not documented"
        else:
            metavar = (param.metavar or param.name or "").upper()
            assert f"`{metavar}`" in section, f"docs/cli.md: argument {metavar} of `{path}` is not documented"


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_help_renders(path: str, invoke) -> None:  # type: ignore[no-untyped-def]
    result = invoke(*path.split()[1:], "--help")
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_every_slash_command_is_documented() -> None:
    section = _section("tether chat")
    for usage in SLASH_COMMANDS:
        assert f"`{usage}`" in section, f"docs/cli.md does not document {usage}"
