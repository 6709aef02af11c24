"""Runs whose process died: found by heartbeats, handed to a live process through the engine,
taken over in the event log, or closed.

A process that notices a dead one (its pid gone on this host, its heartbeat stale, or it
unregistered while holding runs) asks the durable engine (DBOS) to recover the dead executor's
workflows; the process whose workflow then runs takes the run over in the event log with a
compare-and-set on the dead holder that appends ``run.recovered``, logs the messages the dead
process stored but had not logged, and continues it. Without the engine, or for a run the
engine never got, the conversation is closed through the ledger and the run marked
``interrupted``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence

from tether.agent import DeferredResults, StoreRecorder
from tether.agent.durable import run_progress
from tether.errors import ConflictError, NotFound, StoreError, TetherError
from tether.messages import Message, Usage
from tether.stores import Store
from tether.stores.events import EventLog, ProcessInfo, RunRecord
from tether.telemetry import parse_traceparent

from ._durable import DurableRuns, RunInputs
from ._events import (
    MessageCompletedEvent,
    RunCompletedEvent,
    RunInterruptedEvent,
    RunRecoveredEvent,
    encode_event,
    event_type,
    traced,
)
from ._handoff import pending_calls

__all__ = ["DEAD_REASON", "MOVED_REASON", "Recovery"]

log = logging.getLogger("tether.serve")

DEAD_REASON = "the server process running it stopped or died; the conversation was closed through the ledger"
MOVED_REASON = (
    "the server process running it stopped or died; this process continues the run from its stored steps"
)
Plan = tuple[str | None, DeferredResults | None, Message | None]
"""What a continued run is given: its prompt, its decisions, the stored last turn that ends it."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Recovery:
    """The dead-process side of one service process's run manager."""

    def __init__(
        self,
        *,
        store: Store,
        events: EventLog,
        engine: DurableRuns | None,
        process_id: str,
        host: str,
        stale_after: float,
    ) -> None:
        self.store = store
        self.events = events
        self.engine = engine
        self.process_id = process_id
        self.host = host
        self.stale_after = stale_after

    async def sweep(self, *, full: bool = True) -> int:
        """Find the runs of dead processes: with the durable engine, hand them to a live process
        (DBOS recovers the dead executors' workflows; one process takes each run over and
        continues it); close the rest (no engine, or no workflow to continue) as interrupted.
        ``full=False`` (most heartbeats) reads only the process table and stops there when no
        process is dead; a full sweep also finds runs whose holder unregistered (a process that
        stopped and handed its runs on). Returns how many runs were closed."""
        processes = {p.process_id: p for p in await self.events.processes()}
        dead = self._dead(processes)
        if not dead and not full:
            return 0
        orphans = [
            run
            for run in await self.events.active_runs()
            if run.process_id != self.process_id
            and (run.process_id not in processes or run.process_id in dead)
        ]
        if self.engine is not None:
            holders = {run.process_id for run in orphans if run.process_id is not None}
            await self.engine.recover(holders | dead)
        closed = 0
        for run in orphans:
            if self.engine is not None and await self.engine.unfinished(run.run_id):
                continue  # a live process continues it
            if await self._close_orphan(run):
                closed += 1
        for process_id in dead:
            with contextlib.suppress(TetherError):
                await self.events.forget_process(process_id)
        return closed

    async def holder_dead(self, run: RunRecord) -> bool:
        """Whether the process holding ``run`` is dead or gone (else a workflow of the run that
        arrives here is a stale part's, and the run is not taken from a live process)."""
        processes = {p.process_id: p for p in await self.events.processes()}
        return run.process_id not in processes or run.process_id in self._dead(processes)

    def _dead(self, processes: Mapping[str, ProcessInfo]) -> set[str]:
        """Processes whose pid is gone (on this host) or whose heartbeat is stale."""
        now = time.time()
        pid = os.getpid()
        dead: set[str] = set()
        for p in processes.values():
            if p.process_id == self.process_id:
                continue
            local = p.host == self.host
            if (now - p.heartbeat_at > self.stale_after) or (
                local and (p.pid == pid or not _pid_alive(p.pid))
            ):
                dead.add(p.process_id)
        return dead

    async def _close_orphan(self, run: RunRecord) -> bool:
        try:  # close the stored conversation first, while the run still holds it
            await StoreRecorder(self.store, run.owner, run.conversation_id).open(repair=True)
        except (ConflictError, NotFound):
            pass
        except StoreError:
            log.exception("run %s: closing its conversation failed", run.run_id)
            return False
        event = encode_event(RunInterruptedEvent(run.run_id, run.conversation_id, DEAD_REASON))
        before = await self.events.take_over(
            run.run_id, from_status="running", to_status="interrupted", event=event, holder=run.process_id
        )
        if before is not None:
            log.warning("run %s of a dead process was closed as interrupted", run.run_id)
        return before is not None

    async def take_over(
        self, record: RunRecord, inputs: RunInputs, deferred: DeferredResults | None
    ) -> Plan | None:
        """Take a dead process's run (compare-and-set on its holder, appending ``run.recovered``);
        what the continuation is given: the prompt when nothing of the run is stored, the
        decisions when the paused turn is still unanswered, the stored last turn when the run only
        has to end. ``None`` when another process took it first."""
        run_id, cid = record.run_id, record.conversation_id
        try:
            loaded = await self.store.load(record.owner, cid)
            messages, version = loaded.messages, loaded.version
        except NotFound:
            messages, version = (), 0
        progress = run_progress(messages, version, run_id)
        again = deferred if pending_calls(messages, deferred) else None
        tail = messages[-1] if messages else None
        if progress.finished is not None:
            repeats = "nothing"
        elif not progress.started and not inputs.segment:
            repeats = "prompt"
        elif again is not None or (tail is not None and tail.role == "assistant" and tail.tool_calls):
            repeats = "tool_calls"
        else:
            repeats = "model_request"
        moved = RunRecoveredEvent(run_id, cid, record.process_id or "", len(messages), repeats, MOVED_REASON)
        trace = parse_traceparent(inputs.context.get("traceparent"))
        before = await self.events.take_over(
            run_id,
            from_status="running",
            to_status="running",
            event=encode_event(traced(moved, trace[0] if trace is not None else None)),
            holder=record.process_id,
            process_id=self.process_id,
        )
        if before is None:
            return None
        log.warning("run %s of process %s continues here (%s)", run_id, record.process_id, repeats)
        first = next((i for i, m in enumerate(messages) if m.run_id == run_id), len(messages))
        await self._log_stored(record, messages[first:], trace)  # the run holds the conversation: all its own
        return (inputs.prompt if repeats == "prompt" else None), again, progress.finished

    async def _log_stored(
        self, record: RunRecord, mine: Sequence[Message], trace: tuple[str, str, int] | None
    ) -> None:
        """Log the ``message.completed`` of the run's stored messages the dead process had not
        logged yet (the log's are a prefix of the stored ones: ``EventWriter``)."""
        logged, after = 0, 0
        while batch := await self.events.read(record.owner, record.run_id, after, 500):
            logged += sum(event_type(e.data) == "message.completed" for e in batch)
            after = batch[-1].seq
        trace_id = trace[0] if trace is not None else None
        missing = [
            encode_event(traced(MessageCompletedEvent(record.run_id, record.conversation_id, m), trace_id))
            for m in mine[logged:]
        ]
        if missing:
            await self.events.append(record.run_id, self.process_id, missing)

    async def complete_stored(self, record: RunRecord, last: Message) -> None:
        """End a run whose last turn was stored before its process died (no request at all)."""
        done = RunCompletedEvent(record.run_id, record.conversation_id, last.text, Usage(), 0, 0)
        await self.events.append(record.run_id, self.process_id, [encode_event(done)], status="completed")
