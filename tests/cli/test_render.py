from __future__ import annotations

import io

from rich.console import Console

import tether
from tether.cli._render import render_messages
from tether.cli._stream import StreamPrinter


def test_long_text_wraps_inside_the_panel_on_a_soft_wrapping_console() -> None:
    # the CLI's consoles soft-wrap; panels must still wrap their text instead of cropping it
    buf = io.StringIO()
    console = Console(file=buf, width=40, soft_wrap=True, highlight=False)
    render_messages(console, [tether.user("word " * 30)])
    out = buf.getvalue()
    assert out.count("word") == 30
    assert all(len(line) <= 40 for line in out.splitlines())


def test_a_streamed_reply_with_line_breaks_is_labelled_once() -> None:
    buf = io.StringIO()
    printer = StreamPrinter(Console(file=buf, width=80, highlight=False))
    for piece in ("first line\n", "second ", "line\n", "third"):
        printer.text(piece)
    printer.message()
    printer.tool_started(tether.ToolCall("c1", "calculator", '{"expression": "1+1"}'))
    printer.tool_finished(
        tether.ToolCall("c1", "calculator", '{"expression": "1+1"}'),
        tether.ToolResult("c1", "calculator", "2"),
    )
    printer.text("the answer is 2")
    printer.done()
    out = buf.getvalue()
    assert out.count("assistant>") == 2, out  # one per message, not one per line
    assert "assistant> first line\nsecond line\nthird\n" in out
    assert out.endswith("assistant> the answer is 2\n")
