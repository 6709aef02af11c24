"""Compaction on the command line: how compaction records are marked among a conversation's
messages (``/history``, ``tether logs show``). The settings ``tether chat`` compacts with are
``tether.agent.compaction._defaults`` (``tether serve`` uses the same)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from tether.cli._render import render_message
from tether.messages import Message
from tether.stores import CompactionRecord

__all__ = ["record_line", "render_with_records"]


def record_line(record: CompactionRecord) -> str:
    """One line describing a record, e.g. ``compaction 0190…: messages 0-119 summarized``.

    Messages are numbered from 0 as ``/history``, ``logs show`` and the chat's compaction line
    number them (a record's ``boundary`` is a store sequence number, counted from 1)."""
    model = f" by {record.model}" if record.model else ""
    return (
        f"compaction record {record.id}: messages {record.previous_boundary}-{record.boundary - 1} "
        f"summarized{model} "
        f"({record.tokens_before:,} -> {record.tokens_after:,} tokens, "
        f"{record.created_at.strftime('%Y-%m-%d %H:%M')} UTC)"
    )


def render_with_records(
    console: Console,
    messages: Sequence[Message],
    records: Sequence[CompactionRecord],
    *,
    start: int = 0,
    show_reasoning: bool = False,
) -> None:
    """The messages as panels (``messages[i]`` is stored at seq ``start + i + 1``), each record
    marked by a dim line right after the last message it stands for; the latest is the one a
    run's view starts from."""
    after: dict[int, list[CompactionRecord]] = {}
    for record in records:
        after.setdefault(record.boundary, []).append(record)
    latest = records[-1] if records else None
    for i, message in enumerate(messages):
        console.print(render_message(message, start + i, show_reasoning=show_reasoning), soft_wrap=False)
        for record in after.get(start + i + 1, ()):
            mark = " [the view starts here]" if record is latest else ""
            console.print(f"[dim]── {escape(record_line(record))}{escape(mark)} ──[/]")
