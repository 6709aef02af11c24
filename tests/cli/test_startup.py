"""``tether --help`` starts without importing any command: the root lists them from summaries and
imports a command's module only when it runs. (How fast that is: ``python -m bench.startup``.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.core import TyperGroup

from tether.cli._app import COMMANDS, load_command

from ._cli_support import Invoke

HEAVY = ("tether.cli._chat", "tether.cli._logs", "tether.cli._history", "tether.cli._demo", "llama_cpp")


def _modules_after(*args: str) -> set[str]:
    """The modules a fresh ``tether ARGS`` has imported when it exits."""
    script = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        "from tether.cli import main\n"
        f"sys.argv = ['tether', *{list(args)!r}]\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "Usage:" in done.stdout
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_root_help_imports_no_command() -> None:
    loaded = _modules_after("--help")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "tether.convert" not in loaded


def test_a_command_help_imports_that_command_only() -> None:
    loaded = _modules_after("logs", "--help")
    assert "tether.cli._logs" in loaded
    assert not loaded & {"tether.cli._chat", "tether.cli._history", "llama_cpp", "tether.convert"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_root_summary_is_the_command_help(name: str, invoke: Invoke) -> None:
    command = load_command(name)
    assert command.name == name
    assert " ".join((command.help or "").split()) == COMMANDS[name][2]
    assert isinstance(command, TyperGroup) == (name in ("logs", "history", "runs", "serve"))
    listing = invoke("--help")
    assert listing.exit_code == 0
    assert name in listing.stdout
