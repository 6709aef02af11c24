"""Rich rendering of messages, conversations and reports for people (``--json`` is for programs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text as RichText

from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult

__all__ = ["preview", "render_message", "render_messages", "render_report"]

_ROLE_STYLE = {
    "user": "bold cyan",
    "assistant": "bold green",
    "tool": "bold magenta",
    "system": "bold yellow",
}


def preview(text: str, width: int = 60) -> str:
    """One line of at most ``width`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _media(part: Image | Document) -> str:
    kind = "image" if isinstance(part, Image) else "document"
    if part.url is not None:
        return f"[{kind} {part.url}]"
    size = len(part.data or b"")
    return f"[{kind} {part.media_type or '?'}, {size} bytes inline]"


def _part(part: object, *, show_reasoning: bool) -> RenderableType | None:
    if isinstance(part, Text):
        return RichText(part.text)
    if isinstance(part, Reasoning):
        if part.redacted:
            return RichText("▸ reasoning (redacted)", style="dim italic")
        if not show_reasoning:
            words = len(part.text.split())
            return RichText(
                f"▸ reasoning ({words} words, collapsed; --reasoning shows it)", style="dim italic"
            )
        return RichText("reasoning: " + part.text, style="dim italic")
    if isinstance(part, ToolCall):
        flag = " [truncated arguments]" if part.truncated else ""
        return RichText.assemble(
            ("→ call ", "bold"),
            (part.name, "bold magenta"),
            f"({part.arguments})",
            (f"  id={part.id}", "dim"),
            flag,
        )
    if isinstance(part, ToolResult):
        status = "failed" if part.failed else "ok"
        if part.synthesized:
            status += ", synthesized"
        body = part.text or " ".join(_media(p) for p in part.content if isinstance(p, Image | Document))
        return RichText.assemble(
            ("← result ", "bold"),
            (part.name, "bold magenta"),
            (f" [{status}] ", "red" if part.failed else "dim"),
            body,
            (f"  id={part.call_id}", "dim"),
        )
    if isinstance(part, Image | Document):
        return RichText(_media(part), style="dim")
    return None


def render_message(message: Message, index: int | None = None, *, show_reasoning: bool = False) -> Panel:
    """One message as a panel titled with its index and role; tool calls and results are shown
    inline, reasoning is collapsed unless ``show_reasoning``."""
    parts = [r for p in message.parts if (r := _part(p, show_reasoning=show_reasoning)) is not None]
    title = f"[{_ROLE_STYLE.get(message.role, 'bold')}]{message.role}[/]"
    if index is not None:
        title = f"#{index} {title}"
    source = ":".join(x for x in (message.provider, message.model) if x)
    meta = [source, message.stop_reason or ""]
    subtitle = escape(" ".join(m for m in meta if m)) or None
    return Panel(
        Group(*parts) if parts else RichText("(empty)", style="dim"),
        title=title,
        title_align="left",
        subtitle=subtitle,
        subtitle_align="right",
    )


def render_messages(
    console: Console, messages: Sequence[Message], *, start: int = 0, show_reasoning: bool = False
) -> None:
    """Print every message as a panel (wrapped to the panel even on a soft-wrapping console)."""
    for offset, message in enumerate(messages):
        console.print(render_message(message, start + offset, show_reasoning=show_reasoning), soft_wrap=False)


def _cell(value: object) -> str:
    return escape("" if value is None else str(value))


def _rows(value: object) -> list[Mapping[str, Any]] | None:
    """``value`` as table rows when it is a non-empty list of objects."""
    if not isinstance(value, list) or not value:
        return None
    items = cast(list[object], value)
    if not all(isinstance(item, Mapping) for item in items):
        return None
    return cast(list[Mapping[str, Any]], items)


def render_report(console: Console, title: str, report: Mapping[str, Any], *, indent: int = 0) -> None:
    """A report (already JSON-shaped): scalars as ``name: value``, lists of objects as tables,
    nested objects indented under their name."""
    pad = " " * indent
    console.print(f"{pad}[bold]{escape(title)}[/]")
    pad += "  "
    for key, value in report.items():
        rows = _rows(value)
        if rows is not None:
            columns = list(dict.fromkeys(k for row in rows for k in row))
            table = Table(show_edge=False, pad_edge=False)
            for column in columns:
                table.add_column(column)
            for row in rows:
                table.add_row(*(_cell(row.get(c)) for c in columns))
            console.print(f"{pad}{escape(key)}:")
            console.print(Padding(table, (0, 0, 0, indent + 4)))
        elif isinstance(value, list):
            items = cast(list[object], value)
            console.print(f"{pad}{escape(key)}: {_cell(items) if items else 'none'}")
        elif isinstance(value, Mapping):
            render_report(console, key, cast(Mapping[str, Any], value), indent=indent + 2)
        else:
            console.print(f"{pad}{escape(key)}: {_cell(value)}")
