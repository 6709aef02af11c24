"""What a summarizer reads: messages rendered as a plain-text transcript, and the incremental
input (the previous summary plus only the messages that aged out since it was written).

The transcript is text, not messages, so any model can summarize any history: nothing has to
pair, alternate or carry signatures, and media become one-line descriptions. Every message is
labelled with its position in the conversation (``[42] user: ...``) so a summary can cite it and
``recall`` can find it.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.errors import UserError
from tether.history._tokens import TokenCounter, approximate_counter
from tether.history.compact._view import split_summary
from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall

__all__ = ["render_message", "summary_chunks", "summary_input"]

MAX_PART_CHARS = 2_000


def _clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: its head and tail, and what was left out."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = text[: limit * 2 // 3]
    tail = text[len(text) - limit // 3 :]
    return f"{head}\n[... {len(text) - len(head) - len(tail):,} characters omitted ...]\n{tail}"


def _media(item: Image | Document) -> str:
    kind = "image" if type(item) is Image else "document"
    title = f" {item.title!r}" if type(item) is Document and item.title else ""
    if item.url is not None:
        return f"[{kind}{title}: {item.url}]"
    return f"[{kind}{title}: {item.media_type}, {len(item.data or b''):,} bytes inline]"


def render_message(
    message: Message, position: int | None = None, *, max_part_chars: int = MAX_PART_CHARS
) -> str:
    """One message as transcript text: ``[position] role: text``, then one indented line per
    call (``call name (id): arguments``), reasoning and media; a tool message gives one line per
    result (``[position] tool result of name (id[, failed]): text``). Each text longer than
    ``max_part_chars`` keeps its head and tail and says how much was left out (0: no limit)."""
    label = f"[{position}] " if position is not None else ""
    if message.role == "tool":
        lines: list[str] = []
        for r in message.tool_results:
            flags = ", failed" if r.failed else ""
            body = " ".join(
                _clip(c.text, max_part_chars) if type(c) is Text else _media(c)  # type: ignore[arg-type]
                for c in r.content
            )
            lines.append(f"{label}tool result of {r.name} ({r.call_id}{flags}): {body}")
        return "\n".join(lines) if lines else f"{label}tool: (no results)"
    texts: list[str] = []
    extra: list[str] = []
    for part in message.parts:
        if type(part) is Text:
            texts.append(_clip(part.text, max_part_chars))
        elif type(part) is ToolCall:
            extra.append(f"    call {part.name} ({part.id}): {_clip(part.arguments, max_part_chars)}")
        elif type(part) is Reasoning:
            if part.redacted:
                extra.append("    (reasoning: redacted)")
            elif part.text:
                extra.append(f"    (reasoning: {_clip(part.text, max_part_chars)})")
        elif type(part) is Image or type(part) is Document:
            extra.append(f"    {_media(part)}")
    head = f"{label}{message.role}: {' '.join(texts)}".rstrip()
    return "\n".join([head, *extra])


def summary_input(
    history: Sequence[Message],
    *,
    previous: str | None,
    start: int,
    end: int,
    offset: int = 0,
    max_part_chars: int = MAX_PART_CHARS,
) -> str:
    """The text a summarizer is asked to summarize: ``previous`` (the summary written at the
    last compaction, if any) and ``history[start:end]``, the messages that aged out since, each
    labelled with its conversation position ``offset + index``. When ``history[start]`` carries a
    view's summary (a compacted history passed back in) and ``previous`` is ``None``, that summary
    is the previous one and the message is rendered without it. Only ``history[start:end]`` is
    read: the cost is that of the new messages, however long the conversation."""
    n = len(history)
    if type(start) is not int or type(end) is not int or not 0 <= start < end <= n:
        raise UserError(f"summary_input needs 0 <= start < end <= {n}, not start={start!r}, end={end!r}")
    blocks: list[str] = []
    lines: list[str] = []
    for i in range(start, end):
        message = history[i]
        if i == start:
            embedded, rest = split_summary(message)
            if embedded is not None:
                if previous is None:
                    previous = embedded
                if rest is None:
                    continue
                message = rest
        lines.append(render_message(message, offset + i, max_part_chars=max_part_chars))
    if previous is not None:
        blocks.append(f"<previous-summary>\n{previous}\n</previous-summary>")
    first, last = offset + start, offset + end - 1
    blocks.append(f'<messages first="{first}" last="{last}">\n' + "\n".join(lines) + "\n</messages>")
    return "\n\n".join(blocks)


def summary_chunks(
    history: Sequence[Message],
    start: int,
    end: int,
    max_tokens: int,
    *,
    max_chunks: int | None = None,
    counter: TokenCounter | None = None,
    max_part_chars: int = MAX_PART_CHARS,
) -> list[tuple[int, int]]:
    """``history[start:end]`` cut into consecutive ranges whose transcripts (``render_message``
    with ``max_part_chars``, counted by ``counter``, the approximate one by default) hold at most
    ``max_tokens`` each; a single larger message is a range of its own. Filled from the newest
    message back: with ``max_chunks`` the oldest messages that do not fit are left out (the first
    range then starts after ``start``), so planning reads at most what will be summarized."""
    if type(max_tokens) is not int or max_tokens < 1:
        raise UserError(f"summary chunks need max_tokens >= 1, not {max_tokens!r}")
    if max_chunks is not None and (type(max_chunks) is not int or max_chunks < 1):
        raise UserError(f"summary chunks need max_chunks >= 1 or None, not {max_chunks!r}")
    count = counter or approximate_counter()
    chunks: list[tuple[int, int]] = []
    i = j = end
    size = 0
    while i > start:
        text = render_message(history[i - 1], i - 1, max_part_chars=max_part_chars)
        cost = count(Message("user", (Text(text),)))
        if size and size + cost > max_tokens:
            chunks.append((i, j))
            if max_chunks is not None and len(chunks) >= max_chunks:
                break
            j, size = i, 0
            continue
        size += cost
        i -= 1
    else:
        if j > i:
            chunks.append((i, j))
    chunks.reverse()
    return chunks
