"""Writing a summary: the summarizer calls of one compaction, chunk after chunk, under one timeout.

Every failure of the summarizer (it raises, times out, refuses, answers nothing, or writes far
more than its ``max_tokens``) becomes ``SummaryFailed`` with a text for the report; the compactor
then falls back. A summary cut at its token limit is kept and marked ``truncated``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tether.history import approximate_counter, summary_input
from tether.messages import Message, Text, Usage
from tether.models import Model, ModelSettings

from .._accept import valid_text
from ._config import SUMMARY_REQUEST, Compaction

__all__ = ["Plan", "Summary", "SummaryFailed", "write_summary"]

_BAD_STOPS = frozenset({"content_filter", "error"})
OVERLONG = 2
"""A summary counted at more than this many times ``summary_tokens`` is a failure (a summarizer
that ignores its ``max_tokens``); the counter is approximate, so it gets this much slack, and a
summarizer that reports writing at most ``summary_tokens`` (it honoured its limit) passes."""


def _written(usage: Usage) -> float:
    """The answer tokens the provider reports (reasoning apart); unknown (no count): infinite,
    so the approximate count alone decides."""
    if not usage.output_tokens:
        return float("inf")
    return max(usage.output_tokens - usage.reasoning_tokens, 0)


class SummaryFailed(Exception):
    """The summarizer failed; the text says how (for the report)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A summary to write: ``msgs[start:end]`` in ``chunks``, on top of ``previous``; ``skipped``:
    positions left out (too many at once); ``key``: the compactor's state it was planned in (a
    background summary is adopted only in it)."""

    start: int
    end: int
    chunks: tuple[tuple[int, int], ...]
    previous: str | None
    skipped: tuple[int, int] | None
    key: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Summary:
    """A summary written for a ``Plan``, what it cost, and whether it was cut at its limit."""

    start: int
    end: int
    text: str
    usage: Usage
    calls: int
    skipped: tuple[int, int] | None
    key: tuple[Any, ...]
    truncated: bool = False


async def write_summary(
    model: Model, config: Compaction, msgs: Sequence[Message], plan: Plan, offset: int
) -> Summary:
    """Summarize ``plan``'s chunks in order, each on top of the summary before it (positions are
    ``offset + index``). ``SummaryFailed`` on any failure of the summarizer."""
    previous = plan.previous
    usage = Usage()
    calls = 0
    truncated = False
    settings = ModelSettings(max_tokens=config.summary_tokens)
    count = config.counter or approximate_counter()
    try:
        async with asyncio.timeout(config.timeout):
            for i, j in plan.chunks:
                text = summary_input(
                    msgs,
                    previous=previous,
                    start=i,
                    end=j,
                    offset=offset,
                    max_part_chars=config.max_part_chars,
                )
                request = [Message("user", (Text(f"{text}\n\n{SUMMARY_REQUEST}"),))]
                response = await model.generate(request, instructions=config.prompt, settings=settings)
                calls += 1
                usage = usage + response.usage
                summary = valid_text(response.message.text).strip()  # no lone surrogate half
                if response.stop_reason in _BAD_STOPS:
                    raise SummaryFailed(f"the summarizer stopped with {response.stop_reason!r}")
                if not summary:
                    raise SummaryFailed("the summarizer returned no text")
                size = count(Message("user", (Text(summary),)))
                limit = config.summary_tokens
                if size > OVERLONG * limit and _written(response.usage) > limit:
                    # it ignored max_tokens: adopted, it could make the view larger than the log
                    raise SummaryFailed(
                        f"the summary was {size:,} tokens, more than {OVERLONG} times summary_tokens "
                        f"({config.summary_tokens:,})"
                    )
                # a summary cut at summary_tokens still stands for its messages: kept, reported
                truncated = truncated or response.stop_reason == "length"
                previous = summary
    except SummaryFailed:
        raise
    except TimeoutError:
        raise SummaryFailed(f"the summarizer timed out after {config.timeout:g} s") from None
    except Exception as exc:
        raise SummaryFailed(f"the summarizer failed: {type(exc).__name__}: {exc}") from exc
    assert previous is not None
    return Summary(plan.start, plan.end, previous, usage, calls, plan.skipped, plan.key, truncated)
