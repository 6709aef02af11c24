"""Compaction on the command line: the settings ``tether chat`` uses, and how compaction records
are marked among a conversation's messages (``/history``, ``tether logs show``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from tether.agent import Compaction
from tether.cli._render import render_message
from tether.messages import Message
from tether.models import Model
from tether.stores import CompactionRecord

__all__ = [
    "LOCAL_MAX_TOKENS",
    "LOCAL_WINDOW",
    "chat_compaction",
    "model_window",
    "record_line",
    "render_with_records",
]

LOCAL_WINDOW = 4096
"""The bundled local model's context window in tokens (``LocalModel(n_ctx=4096)``)."""
LOCAL_MAX_TOKENS = 512
"""The most tokens a local reply takes by default: kept free for it."""


def model_window(model: Model) -> int | None:
    """The model's context window in tokens: what its provider publishes, or for a local GGUF
    model the context it is loaded with (:data:`LOCAL_WINDOW`); ``None`` when not known."""
    profile = model.profile
    return profile.context_window or (LOCAL_WINDOW if profile.provider == "local" else None)


def chat_compaction(model: Model, *, recall: bool) -> Compaction | None:
    """``tether chat``'s compaction: at 80% of the model's context window (the local model's is
    4096 tokens), aiming at 50%; the chat's model writes the summaries. ``None`` when the window
    is not known (then nothing is cut unless --max-messages or --budget say so)."""
    local = model.profile.provider == "local"
    window = model_window(model)
    if window is None:
        return None
    if local:  # a small window: a short summary, and room for the reply
        return Compaction(
            window=window, reserve=LOCAL_MAX_TOKENS, summary_tokens=300, keep_last=6, recall=recall
        )
    # the summary's budget scales with the window (2,000 tokens from a 16k window up)
    return Compaction(window=window, summary_tokens=max(min(2_000, window // 8), 64), recall=recall)


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
