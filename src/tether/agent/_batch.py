"""Executing one batch of tool calls: validation, concurrency, call-order results, cancellation.

Calls of a batch run concurrently; results come back in call order. A tool raising
``ToolCanceled`` stops the batch: results finished before the stop stay; the stopping call is
closed saying it stopped the run, a sibling cancelled while it was running is closed with an
"outcome unknown" result (it may have had effects), and a call that never started gets the
neutral "interrupted before execution" result. A tool declared ``propagate`` ends the run.
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

__all__ = [
    "CANCELED_WHILE_RUNNING_TEXT",
    "UNKNOWN_OUTCOME_TEXT",
    "BatchCanceled",
    "Job",
    "ToolRaised",
    "canceled_result",
    "interrupted",
    "run_jobs",
]

CANCELED_WHILE_RUNNING_TEXT = (
    "outcome unknown: the run was stopped while this tool was running; the tool may have run "
    "and its effects may have happened"
)

UNKNOWN_OUTCOME_TEXT = (
    "outcome unknown: the run stopped after this tool started and before its result was stored; "
    "the tool may have run. It was not run again."
)
"""Closes a side-effecting call whose ledger entry says it started and whose result was never
stored: when a stored conversation is loaded, and when a run retried under the same run id
reaches that call again. Either way the tool may have run and is not run again."""


@dataclass(slots=True)
class Job:
    """One call to execute. ``result`` is filled when it finishes."""

    index: int
    call: ToolCall
    tool: Tool[Any]
    kwargs: dict[str, Any]
    ctx: RunContext[Any]
    result: ToolResult | None = None
    started: bool = False
    """True once the tool itself was invoked: from then on it may have had effects."""


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
    job.started = True
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
    on outer cancellation the jobs are cancelled too. No jobs (every call was answered without
    running, e.g. suppressed by the ledger) is a no-op.
    """
    if not jobs:
        return
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


def canceled_result(call: ToolCall, job: Job | None, stop: BatchCanceled | None) -> ToolResult:
    """The synthesized result of a call left unanswered when its batch ended early (``stop``
    when a tool raised ``ToolCanceled``).

    Never "interrupted before execution" for a call whose tool was already invoked: the stopping
    call says it stopped the run, any other started call says the outcome is unknown.
    """
    if job is None or not job.started:
        return interrupted(call)
    if stop is not None and job.call is stop.call:
        text = f"stopped: this call canceled the run ({stop.cause.reason}); no result was produced"
    else:
        text = CANCELED_WHILE_RUNNING_TEXT
    return ToolResult(call.id or "", call.name, (Text(text),), synthesized=True)
