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
    "json_option",
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
    """A problem the command line reports as one line (a file that cannot be read, a bad choice).

    ``kind`` is what ``--json`` errors report as ``kind``: the class name of the error behind the
    failure (``DecodeError`` for a corrupt history, ``FileNotFoundError`` for a missing file), or
    ``CliFailure`` for a problem of the command line itself.
    """

    def __init__(self, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind or type(self).__name__


def fail(message: str, *, cause: BaseException | None = None) -> NoReturn:
    """Stop the command with a one-line error; ``cause`` (the error behind it) names its kind."""
    raise CliFailure(message, type(cause).__name__ if cause is not None else None)


_JSON_ERRORS = "tether.json_errors"
"""``ctx.meta`` key (the dict is shared by every context of one invocation): ``--json`` was given."""


def _mark_json(ctx: typer.Context, value: bool) -> bool:
    if value:
        ctx.meta[_JSON_ERRORS] = True
    return value


def json_option(help: str) -> Any:
    """The ``--json`` option: a report as JSON, and errors as one JSON object on stderr."""
    return typer.Option("--json", help=help, callback=_mark_json)


def _one_line(text: str) -> str:
    return " ".join(text.split())


class GuardedGroup(TyperGroup):
    """The root command group: every deliberate failure becomes ``tether: error: …`` on stderr and
    exit code 2. Tracebacks are for bugs only."""

    def invoke(self, ctx: Any) -> Any:  # typer's own click Context
        _tolerant_output()
        try:
            return super().invoke(ctx)
        except CliFailure as exc:
            _report(ctx, str(exc), exc.kind)
        except TetherError as exc:
            _report(ctx, str(exc), type(exc).__name__, prefix=True)
        except sqlite3.Error as exc:
            _report(ctx, f"database error: {exc}", type(exc).__name__)
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            _report(ctx, f"{exc.strerror or exc}{where}", type(exc).__name__)


def _tolerant_output() -> None:
    """Text that is not valid Unicode (a file name of bytes that are not UTF-8, which Python holds
    as lone surrogates) is printed with backslash escapes instead of failing the command: a
    strict UTF-8 stdout (a UTF-8 locale, ``PYTHONIOENCODING``) would raise mid-report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure) and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="backslashreplace")


def _report(ctx: Any, message: str, kind: str, *, prefix: bool = False) -> NoReturn:
    """One line on stderr: ``{"error": …, "kind": …}`` when ``--json`` was given, else
    ``tether: error: …`` (with the class name first when ``prefix``)."""
    meta: dict[str, Any] = ctx.meta
    if meta.get(_JSON_ERRORS):
        line = msgspec.json.encode({"error": _one_line(message), "kind": kind}).decode()
    else:
        line = f"tether: error: {_one_line(f'{kind}: {message}' if prefix else message)}"
    typer.echo(line, err=True)
    raise typer.Exit(EXIT_ERROR)


def read_input(path: str) -> bytes:
    """The bytes of ``path``; ``-`` reads standard input. Nothing at all (an empty file, or an
    empty pipe: the command before it failed) is an error that says so."""
    if path == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    else:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror or exc}", cause=exc)
    if not data.strip():
        fail(f"{'stdin' if path == '-' else path} is empty: expected a JSON history")
    return data


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
        fail(f"cannot write {path}: {exc.strerror or exc}", cause=exc)


def load_history(path: str) -> list[Message]:
    """A tether JSON history read from ``path`` (or stdin); a bad file names where it is wrong."""
    data = read_input(path)
    try:
        return loads(data)
    except TetherError as exc:
        name = "stdin" if path == "-" else path
        fail(f"{name} is not a tether history: {exc}", cause=exc)


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
