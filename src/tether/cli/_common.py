"""Shared pieces of the command line: the error guard, input/output, JSON reports, consoles."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec
import typer
from rich.console import Console
from typer.core import TyperGroup

from tether.errors import TetherError
from tether.messages import Message, dumps, loads

__all__ = [
    "EXIT_ERROR",
    "EXIT_PROBLEMS",
    "CliFailure",
    "GuardedGroup",
    "dump_history",
    "env_flag",
    "err_console",
    "fail",
    "load_history",
    "out_console",
    "print_json",
    "read_input",
    "to_jsonable",
    "write_output",
]

EXIT_PROBLEMS = 1
"""``tether history check`` found something that needs repair."""
EXIT_ERROR = 2
"""Bad input, a bad option, an unreadable file or database: one line on stderr, no traceback."""


def out_console() -> Console:
    """A console on the current stdout (looked up per call so test runners can swap streams)."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def err_console() -> Console:
    """A console on the current stderr."""
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


class CliFailure(Exception):
    """A problem the command line reports as one line (a file that cannot be read, a bad choice)."""


def fail(message: str) -> NoReturn:
    """Stop the command with a one-line error."""
    raise CliFailure(message)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class GuardedGroup(TyperGroup):
    """The root command group: every deliberate failure becomes ``tether: error: …`` on stderr and
    exit code 2. Tracebacks are for bugs only."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context
        try:
            return super().invoke(ctx)
        except CliFailure as exc:
            _report(str(exc))
        except TetherError as exc:
            _report(f"{type(exc).__name__}: {exc}")
        except sqlite3.Error as exc:
            _report(f"database error: {exc}")
        except OSError as exc:
            _report(f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))


def _report(message: str) -> NoReturn:
    typer.echo(f"tether: error: {_one_line(message)}", err=True)
    raise typer.Exit(EXIT_ERROR)


def read_input(path: str) -> bytes:
    """The bytes of ``path``; ``-`` reads standard input."""
    if path == "-":
        return sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")


def write_output(path: str, data: bytes) -> None:
    """Write ``data`` to ``path``; ``-`` writes standard output (with a final newline)."""
    if path == "-":
        stream = sys.stdout
        if hasattr(stream, "buffer"):
            stream.flush()
            stream.buffer.write(data + b"\n")
            stream.buffer.flush()
        else:
            stream.write(data.decode() + "\n")
        return
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


def load_history(path: str) -> list[Message]:
    """A tether JSON history read from ``path`` (or stdin); a bad file names where it is wrong."""
    data = read_input(path)
    try:
        return loads(data)
    except TetherError as exc:
        name = "stdin" if path == "-" else path
        fail(f"{name} is not a tether history: {exc}")


def dump_history(messages: Sequence[Message]) -> bytes:
    """Indented tether JSON, readable in a terminal and diff-friendly."""
    return msgspec.json.format(dumps(messages), indent=2)


def to_jsonable(value: Any) -> Any:
    """Reports (dataclasses, msgspec structs) as plain JSON values; a report's own ``to_dict``
    (which may add derived fields such as ``changed``) is used when it has one."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        value = to_dict()
    return msgspec.json.decode(msgspec.json.encode(value))


def print_json(value: Any, *, err: bool = False) -> None:
    """Print ``value`` as indented JSON on stdout (or stderr)."""
    text = msgspec.json.format(msgspec.json.encode(to_jsonable(value)), indent=2).decode()
    typer.echo(text, err=err)


def env_flag(name: str) -> bool:
    """True when the environment variable is set to something other than empty/0/false."""
    return os.environ.get(name, "").lower() not in ("", "0", "false", "no")
