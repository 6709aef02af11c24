"""The root ``tether`` command: the command groups under one error guard.

Each command's module is imported only when that command runs (or its own help is shown): the
chat pulls in the agent's streaming, the history tools the converters, the local model llama.cpp.
``tether --help`` lists them from the one-line summaries below and imports none of them
(``python -m bench.startup`` measures it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
import typer.main
from typer.core import TyperCommand

from tether.cli._common import GuardedGroup

__all__ = ["COMMANDS", "LazyGroup", "app"]

COMMANDS: dict[str, tuple[str, str, str]] = {
    "chat": (
        "tether.cli._chat",
        "chat",
        "Chat with a model; every turn is stored and a conversation survives restarts.",
    ),
    "demo": (
        "tether.cli._demo",
        "demo",
        "Run an offline chain of agent runs (scripted model, calculator tool) and print the conversation.",
    ),
    "logs": (
        "tether.cli._logs",
        "logs_app",
        "Browse the conversations stored by tether chat (or any SQLite store).",
    ),
    "history": (
        "tether.cli._history",
        "history_app",
        "Check, repair, sanitize, trim, compact and convert history files (tether JSON unless --from says "
        "otherwise). FILE may be - for standard input.",
    ),
    "runs": (
        "tether.cli._runs",
        "runs_app",
        "List, show and cancel the runs of tether serve (one owner's), and list its processes.",
    ),
    "mcp": (
        "tether.cli._mcp",
        "mcp",
        "Serve your conversations to an MCP client over stdio (read-only: list, read, search, recall).",
    ),
    "serve": (
        "tether.cli._serve",
        "serve_app",
        "Run the tether HTTP service (pip install 'tether[serve]'); manage its users with "
        "'tether serve users'.",
    ),
}
"""name → (module, attribute: a command function or a ``typer.Typer`` group, the summary that
``tether --help`` shows; tests check it against the command's own help)."""


def load_command(name: str) -> Any:
    """Import the module of command ``name`` and build its click command (with plain help)."""
    module, attribute, _ = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        command: Any = typer.main.get_group(target)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    plain_help(command)
    return command


def plain_help(command: Any) -> None:
    """Render the help of ``command`` and of every command under it with click's formatter.

    typer's rich help lays options out as a table of five columns (name, short name, ``--no-``
    name, type, description); at 80 columns the longest word of each column no longer fits, and
    rich cuts names and descriptions with an ellipsis (``--max-open-strea…``). It also reads
    ``[serve]`` in ``pip install 'tether[serve]'`` as style markup and drops it. click's formatter
    wraps descriptions under a name that does not fit beside them and prints text as written.
    A command's summary in a listing is its whole first paragraph (click would cut it)."""
    if getattr(command, "rich_markup_mode", None) is not None:
        command.rich_markup_mode = None
    if command.short_help is None and command.help:
        command.short_help = first_paragraph(command.help)
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)


def first_paragraph(text: str) -> str:
    """The summary of a help text: its first paragraph on one line."""
    return " ".join(text.strip().split("\n\n")[0].split())


class _Commands(MutableMapping[str, Any]):
    """The root group's commands: looking one up imports it (once)."""

    def __init__(self) -> None:
        self.loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self.loaded[name] = load_command(name)
        return self.loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self.loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self.loaded if name not in COMMANDS)

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self.loaded))


class LazyGroup(GuardedGroup):
    """``GuardedGroup`` whose commands are imported on first use. While the group's own help is
    rendered, a command not imported yet is shown by its summary alone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = _Commands()
        self._lazy.loaded.update(self.commands)
        self.commands = self._lazy
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names alone: nothing is imported

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and cmd_name in COMMANDS and cmd_name not in self._lazy.loaded:
            summary = COMMANDS[cmd_name][2]
            return TyperCommand(cmd_name, help=summary, short_help=summary)
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="tether",
    cls=LazyGroup,
    help="tether: durable, repairable conversation history for LLM agents. Chat on a local model, "
    "browse stored conversations, and check, repair, trim and convert history files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help as written, wrapped by click: see plain_help
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root() -> None:
    """The commands come from ``COMMANDS`` (a group needs a callback to exist without any)."""
