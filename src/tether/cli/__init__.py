"""The ``tether`` command line (``pip install 'tether[cli]'``; the chat's default model needs
``tether[local]``). Reference: docs/cli.md; decisions: docs/adr/0008-cli.md.

    tether chat [PROMPT]                 interactive, stored, streaming chat (default: local model)
    tether logs list | show | export     conversations stored by tether chat
    tether history check | normalize | sanitize | trim | convert FILE
    tether demo                          an offline chain of runs, printed as tether JSON
"""

from __future__ import annotations

import importlib.util

from tether.errors import MissingExtra

for _package in ("typer", "rich", "platformdirs"):
    if importlib.util.find_spec(_package) is None:
        raise MissingExtra("the tether command line", "cli", _package)

from tether.cli._app import app  # noqa: E402 - after the extra check, for a clear error

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point of ``tether``."""
    app(prog_name="tether")
