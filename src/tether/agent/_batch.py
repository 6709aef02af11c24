"""Executing one batch of tool calls: validation, concurrency, call-order results, cancellation.

Calls of a batch run concurrently; results come back in call order. A tool raising
``ToolCanceled`` stops the batch: results finished before the stop stay, every other call is
closed with the neutral synthesized result. A tool declared ``propagate`` ends the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tether.history import INTERRUPTED_TEXT
from tether.messages import Text, ToolCall, ToolResult

from ._context import RunContext
from ._tools import Tool, ToolCanceled, result_content

__all__ = ["BatchCanceled", "Job", "ToolRaised", "run_jobs"]


@dataclass(slots=True)
class Job:
    """One call to execute. ``result`` is filled when it finishes."""

    index: int
    call: ToolCall
    tool: Tool[Any]
    kwargs: dict[str, Any]
    ctx: RunContext[Any]
    result: ToolResult | None = None


class BatchCanceled(Exception):
    """A tool raised ``ToolCanceled``; the jobs that finished before hold their results."""

    def __init__(self, cause: ToolCanceled, call: ToolCall) -> None:
        super().__init__(cause.reason)
        self.cause = cause
        self.call = call


class ToolRaised(Exception):
    """A tool declared ``propagate`` raised ``error``."""

    def __init__(self, error: BaseException, call: ToolCall) -> None:
        super().__init__(str(error))
        self.error = error
        self.call = call


Hook = Callable[[Job], Awaitable[None]]
Finish = Callable[[Job, bool], Awaitable[None]]


async def _execute(job: Job, started: Hook | None, finished: Finish | None) -> None:
    if started is not None:
        await started(job)
    try:
        value = await job.tool.invoke(job.ctx, job.kwargs)
    except ToolCanceled as exc:
        raise BatchCanceled(exc, job.call) from exc
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if job.tool.propagate:
            if finished is not None:
                await finished(job, True)
            raise ToolRaised(exc, job.call) from exc
        evidence = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        job.result = ToolResult(job.call.id or "", job.call.name, (Text(evidence),), failed=True)
    else:
        content, failed = result_content(value)
        job.result = ToolResult(job.call.id or "", job.call.name, content, failed=failed)
    if finished is not None:
        await finished(job, job.result.failed)


async def run_jobs(jobs: Sequence[Job], started: Hook | None = None, finished: Finish | None = None) -> None:
    """Run the jobs concurrently; each job's ``result`` is set when it completes.

    Raises ``BatchCanceled`` or ``ToolRaised`` after the other jobs were cancelled and awaited;
    on outer cancellation the jobs are cancelled too.
    """
    if len(jobs) == 1:
        await _execute(jobs[0], started, finished)
        return
    tasks = [asyncio.ensure_future(_execute(job, started, finished)) for job in jobs]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    for t in tasks:
        if t in done and not t.cancelled():
            error = t.exception()
            if error is not None:
                raise error


def interrupted(call: ToolCall) -> ToolResult:
    """The neutral no-result result (the same text repair synthesizes)."""
    return ToolResult(call.id or "", call.name, (Text(INTERRUPTED_TEXT),), synthesized=True)
