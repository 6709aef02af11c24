from __future__ import annotations

import io

from rich.console import Console

import tether
from tether.cli._render import render_messages


def test_long_text_wraps_inside_the_panel_on_a_soft_wrapping_console() -> None:
    # the CLI's consoles soft-wrap; panels must still wrap their text instead of cropping it
    buf = io.StringIO()
    console = Console(file=buf, width=40, soft_wrap=True, highlight=False)
    render_messages(console, [tether.user("word " * 30)])
    out = buf.getvalue()
    assert out.count("word") == 30
    assert all(len(line) <= 40 for line in out.splitlines())
