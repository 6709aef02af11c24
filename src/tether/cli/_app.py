"""The root ``tether`` command: assembles the command groups under one error guard."""

from __future__ import annotations

import typer

from tether.cli._chat import chat
from tether.cli._common import GuardedGroup
from tether.cli._demo import demo
from tether.cli._history import history_app
from tether.cli._logs import logs_app
from tether.cli._serve import serve_app

__all__ = ["app"]

app = typer.Typer(
    name="tether",
    cls=GuardedGroup,
    help="tether: durable, repairable conversation history for LLM agents. Chat on a local model, "
    "browse stored conversations, and check, repair, trim and convert history files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("chat")(chat)
app.command("demo")(demo)
app.add_typer(logs_app, name="logs")
app.add_typer(history_app, name="history")
app.add_typer(serve_app, name="serve")
