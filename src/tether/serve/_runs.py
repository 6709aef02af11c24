"""The run manager: runs detached from HTTP connections, pumped into the durable event log.

A run is a server-owned asyncio task. It streams the agent's events into the ``EventLog``
(batched: whatever arrived while the previous append was committing goes in the next one); the
Server-Sent Events endpoint reads only the log. So a client that disconnects changes nothing, a
client that re-attaches (here or on another process) reads what it missed, and the explicit Stop
(``cancel``) is the only way a client ends a run early.

Each process registers itself and heartbeats; a ``running`` run whose process is dead (its pid
is gone on this host, or its heartbeat is stale) is closed by whichever live process sees it
first: the conversation through the ledger (a started side effect says "outcome unknown" and is
never re-run), the run marked ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tether.agent import (
    Agent,
    Deferred,
    DeferredResults,
    MessageCompleted,
    RunCompleted,
    RunStream,
    Tool,
    Toolset,
)
from tether.errors import ConflictError, NotFound, RunCanceled, RunError, TetherError
from tether.messages import Message, new_id
from tether.stores import Store
from tether.stores.events import ActiveRunLimit, EventLog, RunRecord, RunStatus
from tether.telemetry import TraceLink, continue_trace, parse_traceparent

from ._durable import DurableRuns, RunInputs, client_tools
from ._errors import ApiError
from ._events import ErrorInfo as EventError
from ._events import (
    EventOut,
    MessageCompletedEvent,
    RunCanceledEvent,
    RunCompletedEvent,
    RunFailedEvent,
    RunInterruptedEvent,
    RunPausedEvent,
    RunResumedEvent,
    RunStartedEvent,
    encode_agent_event,
    encode_event,
    traced,
)
from ._handoff import HeldRecorder
from ._pause import StoredCall, StoredPause, decisions_for, decode_pause, public_calls
from ._recovery import Recovery
from ._schemas import DecisionsIn
from ._writer import EventWriter

__all__ = ["Caller", "RunManager"]

log = logging.getLogger("tether.serve")
_encoder = msgspec.json.Encoder()

CANCELED_REASON = "stopped by the user"
SHUTDOWN_REASON = "the server stopped while the run was going on"
LOG_FAILED = "the event log refused an append"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking, and the request context a run is started from (the one place where a
    request becomes a run: trace context continuation belongs here)."""

    owner: str
    headers: Mapping[str, str] = field(default_factory=lambda: {})


def _incoming(caller: Caller) -> str | None:
    """The trace id of the caller's valid ``traceparent`` (the events written before the run
    span exists carry it), else ``None``."""
    parsed = parse_traceparent(caller.headers.get("traceparent"))
    return parsed[0] if parsed is not None else None


def _jsonable(value: Any) -> Any:
    try:
        return msgspec.to_builtins(value)
    except (TypeError, ValueError):
        return str(value)


class RunManager:
    """Starts, resumes, cancels and recovers runs of one service process."""

    def __init__(
        self,
        *,
        store: Store,
        events: EventLog,
        agent: Agent[Any, Any],
        approval_ttl: float = 24 * 3600.0,
        heartbeat_interval: float = 1.0,
        stale_after: float = 15.0,
        max_active_runs: int = 0,
        max_part_bytes: int = 0,
        engine: DurableRuns | None = None,
    ) -> None:
        self.store = store
        self.events = events
        self.agent = agent
        self.approval_ttl = approval_ttl
        self.heartbeat_interval = heartbeat_interval
        self.stale_after = stale_after
        self.max_active_runs = max_active_runs
        """Active (running or paused) runs a user may have at once, on every process (0: no limit)."""
        self.max_part_bytes = max_part_bytes
        """Bound of a decision's ``reason`` or ``value`` in UTF-8 / JSON bytes, as of a prompt (0: none)."""
        self.process_id = new_id()
        self.host = socket.gethostname()
        self.recovery = Recovery(
            store=store,
            events=events,
            engine=engine,
            process_id=self.process_id,
            host=self.host,
            stale_after=stale_after,
        )
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._streams: dict[str, RunStream[Any]] = {}
        self._reasons: dict[str, str] = {}
        self._recorders: dict[str, HeldRecorder] = {}
        self._handed: set[str] = set()
        """Runs this process lets go of (a stop after the drain): another process continues them."""
        self._letting_go = False
        self._launched: set[str] = set()
        """Workflow ids this process started or took over (another part's workflow is stale)."""
        """The stop has reached the hand-on: a workflow that starts now is left pending."""
        self.engine = engine
        """The durable engine (DBOS) under the runs; ``None``: a run of a dead process is closed."""
        self._loop_task: asyncio.Task[None] | None = None
        self.draining = False
        """The process is stopping: it starts no new run (a drain lets the running ones finish)."""

    # -- life cycle -------------------------------------------------------------------------------
    async def open(self) -> None:
        """Register this process, close runs left by dead ones, start heartbeating."""
        await self.events.heartbeat(self.process_id, self.host, os.getpid())
        if self.engine is not None:  # on this event loop: continued runs run on it
            self.engine.launch(self, self.process_id)
        await self.recover()
        self._loop_task = asyncio.create_task(self._background(), name="tether-serve-heartbeat")

    async def close(self, timeout: float = 10.0, *, drain: float = 0.0) -> None:
        """Stop: runs get ``drain`` seconds to finish (this process keeps heartbeating and refuses
        new runs meanwhile); then, with the durable engine, runs still going are handed on (they
        store nothing more here and a live process, or the next start, continues them), without
        it they are interrupted (their partial is stored); then unregister."""
        self.draining = True
        if drain > 0 and self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=drain)
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        self._letting_go = self.engine is not None
        tasks = list(self._tasks.items())
        for run_id, _ in tasks:
            if self.engine is not None:
                self._hand_on(run_id)
            else:
                self._reasons[run_id] = SHUTDOWN_REASON
                self._cancel_local(run_id, SHUTDOWN_REASON)
        if tasks:
            await asyncio.wait([t for _, t in tasks], timeout=timeout)
        if self.engine is not None:
            self.engine.shutdown()  # before unregistering: this process takes no run back
        with contextlib.suppress(TetherError):
            await self.events.forget_process(self.process_id)

    def _hand_on(self, run_id: str) -> None:
        """Let go of a run: nothing more is stored or logged for it here; it stops."""
        self._handed.add(run_id)
        recorder = self._recorders.get(run_id)
        if recorder is not None:
            recorder.release()
        stream = self._streams.get(run_id)
        if stream is not None:
            stream.cancel()

    @property
    def running(self) -> int:
        """How many runs this process is executing."""
        return len(self._tasks)

    async def _background(self) -> None:
        beats = 0
        full_every = max(1, int(self.stale_after / max(self.heartbeat_interval, 0.01) / 3))
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            beats += 1
            try:
                await self.events.heartbeat(self.process_id, self.host, os.getpid())
                for run_id in await self.events.cancel_requests(self.process_id):
                    self._cancel_local(run_id, CANCELED_REASON)
                # every beat reads the process table (a dead process's runs move within about a
                # second); the running runs of every owner are scanned only every few beats
                await self.recovery.sweep(full=beats % full_every == 0)
            except Exception:  # never let the heartbeat die; the next beat tries again
                log.exception("heartbeat failed")

    # -- starting ---------------------------------------------------------------------------------
    def _context(self, caller: Caller) -> dict[str, str]:
        """What a run keeps of the request that started it (trace context goes here)."""
        return {k: v for k, v in caller.headers.items() if k in ("traceparent", "tracestate")}

    async def start(
        self, caller: Caller, conversation_id: str, prompt: str, *, extra_tools: Sequence[Tool[Any]] = ()
    ) -> RunRecord:
        """Start a run on a conversation of ``caller``; returns at once. ``NotFound`` for a
        conversation that is absent or another owner's; ``ConflictError`` when it has an active run.
        ``extra_tools`` are added to the agent's for this run (a client's external tools)."""
        if self.draining:
            raise ApiError(503, "this server is stopping: start the run again (another server takes it)")
        await self.store.info(caller.owner, conversation_id)
        run_id = new_id()
        first = encode_event(traced(RunStartedEvent(run_id, conversation_id, prompt), _incoming(caller)))
        try:  # the count of active runs and the insert are one step of the log, on every process
            record = await self.events.start_run(
                caller.owner, conversation_id, run_id, self.process_id, first, max_active=self.max_active_runs
            )
        except ActiveRunLimit:
            raise ApiError(
                429,
                f"you have {self.max_active_runs} active runs (the limit, max_active_runs): wait for one to "
                "end, or cancel one",
            ) from None
        inputs = RunInputs(
            run_id,
            caller.owner,
            conversation_id,
            prompt,
            context=self._context(caller),
            client_tools=client_tools(extra_tools),
        )
        await self._launch(record, inputs)
        return record

    async def _launch(self, record: RunRecord, inputs: RunInputs) -> None:
        """Run it: as a durable workflow (the engine's task on this loop), else as a task; both
        run ``run_segment`` on the same inputs."""
        self._launched.add(inputs.workflow_id)
        if self.engine is not None:
            try:
                await self.engine.start(inputs)
            except Exception as exc:  # the engine's database refused: the run cannot be kept
                log.exception("run %s: the durable engine did not take it", record.run_id)
                failed = RunFailedEvent(
                    record.run_id, record.conversation_id, EventError("StoreError", f"not started: {exc}")
                )
                with contextlib.suppress(TetherError):
                    await self.events.append(
                        record.run_id, self.process_id, [encode_event(failed)], status="failed"
                    )
                raise ApiError(503, "the run could not be started durably: try again") from None
            return
        task = asyncio.create_task(self.run_segment(inputs), name=f"tether-run-{record.run_id}")
        self._track(record.run_id, task)  # at once: a Stop right after the start finds it

    def _tools(self, extra_tools: Sequence[Tool[Any]]) -> list[Tool[Any] | Toolset] | None:
        return [*self.agent.tools, *self.agent.toolsets, *extra_tools] if extra_tools else None

    def _track(self, run_id: str, task: asyncio.Task[Any]) -> None:
        self._tasks[run_id] = task

        def done(_: asyncio.Task[Any]) -> None:
            if self._tasks.get(run_id) is task:
                for table in (self._tasks, self._streams, self._reasons, self._recorders):
                    table.pop(run_id, None)
                self._handed.discard(run_id)

        task.add_done_callback(done)

    async def run_segment(self, inputs: RunInputs) -> str:
        """The body of a run's durable workflow: run it (this process started it) or continue it
        (its process died: take it over in the log, then go on from the stored steps)."""
        try:
            record = await self.events.get_run(inputs.owner, inputs.run_id)
        except NotFound:  # deleted with its conversation meanwhile
            return "deleted"
        if record.status != "running":
            return record.status
        if self._letting_go:  # this process is handing its runs on: leave the workflow pending
            raise asyncio.CancelledError
        task = asyncio.current_task()
        assert task is not None
        self._track(record.run_id, task)
        prompt, deferred = inputs.prompt, inputs.deferred()
        if record.process_id == self.process_id and inputs.workflow_id not in self._launched:
            return "superseded"  # a stale part's workflow recovered here: this process runs a later one
        if record.process_id != self.process_id:
            if not await self.recovery.holder_dead(record):
                return "superseded"  # its holder is alive: a stale part's workflow, not a dead run
            self._launched.add(inputs.workflow_id)
            plan = await self.recovery.take_over(record, inputs, deferred)
            if plan is None:
                return "taken"
            prompt, deferred, finished = plan
            if finished is not None:
                await self.recovery.complete_stored(record, finished)
                return "completed"
        await self._drive(record, prompt, deferred, self._tools(inputs.tools()), inputs.context)
        return "ended"

    def _cancel_local(self, run_id: str, reason: str) -> bool:
        """Stop a run of this process: the run records its partial and ends with RunCanceled."""
        task = self._tasks.get(run_id)
        if task is None or task.done():
            return False
        self._reasons.setdefault(run_id, reason)
        stream = self._streams.get(run_id)
        if stream is not None:
            stream.cancel()
        # else the task has not taken its first step (the stream is registered before any await):
        # ``_drive`` sees the reason and stops the stream at once. Cancelling the task instead would
        # skip ``_drive`` entirely: no last event, and the run would stay ``running`` for good.
        return True

    async def _drive(
        self,
        record: RunRecord,
        prompt: str | None,
        deferred: DeferredResults | None,
        tools: Sequence[Tool[Any] | Toolset] | None = None,
        context: Mapping[str, str] | None = None,
    ) -> None:
        """Run the agent inside the trace of the request that started the run (its W3C
        ``traceparent``, kept in ``context``): the run span continues it and every event the run
        writes carries its trace id."""
        with continue_trace(context, telemetry=self.agent.telemetry) as link:
            await self._drive_traced(record, prompt, deferred, tools, link)

    async def _drive_traced(
        self,
        record: RunRecord,
        prompt: str | None,
        deferred: DeferredResults | None,
        tools: Sequence[Tool[Any] | Toolset] | None,
        link: TraceLink,
    ) -> None:
        run_id = record.run_id

        def stop(exc: BaseException) -> None:
            self._cancel_local(run_id, f"{LOG_FAILED}: {exc}")

        def completed(message: Message) -> bytes:
            event = MessageCompletedEvent(run_id, record.conversation_id, message)
            return encode_event(traced(event, link.trace_id))

        writer = EventWriter(self.events, run_id, self.process_id, on_error=stop, completed=completed)
        pause: StoredPause | None = None
        try:
            final, status, pause = await self._stream(record, prompt, deferred, tools, link, writer)
        except (Exception, asyncio.CancelledError) as exc:
            if run_id in self._handed:  # let go (a stop after the drain): no last event, no outcome
                await writer.drain()
                raise asyncio.CancelledError from None
            final, status = self._ending(exc, record)
        try:
            await writer.finish(
                [encode_event(traced(final, link.trace_id))],
                status,
                pause.pause_id if pause is not None else None,
                _encoder.encode(pause) if pause is not None else None,
            )
        except ConflictError as exc:  # taken over (closed as interrupted by another process)
            log.warning("run %s: final events not appended: %s", run_id, exc)
        except Exception:
            log.exception("run %s: final events not appended", run_id)

    async def _stream(
        self,
        record: RunRecord,
        prompt: str | None,
        deferred: DeferredResults | None,
        tools: Sequence[Tool[Any] | Toolset] | None,
        link: TraceLink,
        writer: EventWriter,
    ) -> tuple[EventOut, RunStatus, StoredPause | None]:
        """Stream the run's events into the log; its last event, status and pause."""
        run_id, cid = record.run_id, record.conversation_id
        recorder = HeldRecorder(self.store, record.owner, cid)
        recorder.on_stored = writer.stored
        self._recorders[run_id] = recorder
        stream = self.agent.run_stream(
            prompt, recorder=recorder, run_id=run_id, deferred=deferred, tools=tools
        )
        self._streams[run_id] = stream
        if run_id in self._reasons or run_id in self._handed:  # stopped before it began streaming
            stream.cancel()
        async with stream:
            result = None
            async for event in stream:
                if isinstance(event, RunCompleted):
                    result = event.result
                else:
                    data = encode_agent_event(event, link.trace_id)
                    if data is not None:
                        writer.add(data, event.message if isinstance(event, MessageCompleted) else None)
        if result is None:
            raise RunError("the run ended without a result", stage="model")
        if result.deferred is not None and result.deferred.calls:
            pause = self._pause(result.deferred)
            paused = RunPausedEvent(run_id, cid, pause.pause_id, public_calls(pause), pause.expires_at)
            return paused, "paused", pause
        output = _jsonable(result.output)
        done = RunCompletedEvent(run_id, cid, output, result.usage, result.requests, result.tool_executions)
        return done, "completed", None

    def _ending(self, exc: BaseException, record: RunRecord) -> tuple[EventOut, RunStatus]:
        """The last event and status of a run that did not complete."""
        run_id, cid = record.run_id, record.conversation_id
        if isinstance(exc, asyncio.CancelledError | RunCanceled):
            me = asyncio.current_task()
            if me is not None and isinstance(exc, asyncio.CancelledError):
                me.uncancel()
            reason = self._reasons.get(run_id)
            if reason is None and isinstance(exc, RunCanceled):  # a tool canceled the run
                reason = str(exc)
            if reason == SHUTDOWN_REASON:
                return RunInterruptedEvent(run_id, cid, reason), "interrupted"
            if reason is not None and reason.startswith(LOG_FAILED):
                return RunFailedEvent(run_id, cid, EventError("StoreError", reason)), "failed"
            return RunCanceledEvent(run_id, cid, reason or CANCELED_REASON), "canceled"
        if isinstance(exc, RunError):
            return RunFailedEvent(run_id, cid, EventError(type(exc).__name__, str(exc))), "failed"
        log.exception("run %s failed unexpectedly", run_id, exc_info=exc)
        error = EventError("InternalError", f"internal error ({type(exc).__name__})")
        return RunFailedEvent(run_id, cid, error), "failed"

    def _pause(self, deferred: Deferred) -> StoredPause:
        pause_id = deferred.pause_id or new_id()
        expires = deferred.expires_at
        if expires is None:  # an agent without an approval secret: the service's own bound
            expires = time.time() + self.approval_ttl
        calls = [StoredCall(c.call, c.kind, c.token) for c in deferred.calls]
        return StoredPause(pause_id, float(expires), calls)

    # -- decisions and cancel ---------------------------------------------------------------------
    async def decide(
        self, caller: Caller, run_id: str, body: DecisionsIn, *, extra_tools: Sequence[Tool[Any]] = ()
    ) -> RunRecord:
        """Check ``body`` against the stored pause and resume the run (once). ``extra_tools`` as
        for ``start`` (the client's external tools the pause waits on must be among them)."""
        if self.draining:
            raise ApiError(503, "this server is stopping: send the decisions again (another takes them)")
        record = await self.events.get_run(caller.owner, run_id)
        if record.status != "paused" or record.pause is None:
            raise ApiError(409, f"run {run_id!r} is {record.status}: it has no pending calls to decide")
        pause = decode_pause(record.pause)
        if body.pause_id != pause.pause_id:
            given = body.pause_id[:100]
            raise ApiError(409, f"pause {given!r} is not the run's current pause {pause.pause_id!r}")
        if time.time() > pause.expires_at:
            raise ApiError(409, f"pause {pause.pause_id!r} expired; cancel the run and ask again")
        self._check_tools(pause, extra_tools)
        # checked here, before the take-over (422, 413); the run derives them from its inputs
        _, summary = decisions_for(pause, body, self.max_part_bytes)
        resumed_event = RunResumedEvent(run_id, record.conversation_id, pause.pause_id, summary)
        event = encode_event(traced(resumed_event, _incoming(caller)))
        before = await self.events.take_over(
            run_id,
            from_status="paused",
            to_status="running",
            event=event,
            process_id=self.process_id,
            pause_id=pause.pause_id,
        )
        if before is None:
            raise ApiError(409, f"the decisions for pause {pause.pause_id!r} were already made")
        resumed = await self.events.get_run(caller.owner, run_id)
        inputs = RunInputs(
            run_id,
            caller.owner,
            resumed.conversation_id,
            segment=pause.pause_id,
            pause=record.pause.decode(),
            decisions=_encoder.encode(body).decode(),
            context=self._context(caller),
            client_tools=client_tools(extra_tools),
        )
        await self._launch(resumed, inputs)
        return resumed

    def _check_tools(self, pause: StoredPause, extra_tools: Sequence[Tool[Any]]) -> None:
        """422 when a pending call is of a tool the resumed run would not have: a client's own
        tool (AG-UI ``tools``) exists only in the requests that declare it, and a run resumed
        without it would fail and lose the client's result (the run stays paused instead)."""
        known = {t.name for t in (*self.agent.tools, *extra_tools)}
        for stored in pause.calls:
            if stored.kind == "external" and stored.call.name not in known:
                raise ApiError(
                    422,
                    f"call {stored.call.id!r} waits for the result of the client's tool "
                    f"{stored.call.name!r}, which only the AG-UI request that started the run declared: "
                    "answer it with POST /v1/agui (a tool message, and the same tools), or cancel the run",
                )

    async def cancel(self, caller: Caller, run_id: str, wait: float = 10.0) -> RunRecord:
        """The explicit Stop. Idempotent: a finished run is returned as it is."""
        record = await self.events.get_run(caller.owner, run_id)
        while record.status == "paused":
            event = encode_event(RunCanceledEvent(run_id, record.conversation_id, CANCELED_REASON))
            taken = await self.events.take_over(
                run_id, from_status="paused", to_status="canceled", event=event, pause_id=record.pause_id
            )
            if taken is not None:
                break
            # a decision won the compare-and-set (the run is running again, on this process or
            # another): Stop that run rather than answer with it still going
            record = await self.events.get_run(caller.owner, run_id)
        if record.status == "running":
            task = self._tasks.get(run_id)
            if task is not None and self._cancel_local(run_id, CANCELED_REASON):
                await asyncio.wait([task], timeout=wait)
            else:
                await self.events.request_cancel(caller.owner, run_id)
                deadline = time.monotonic() + wait
                seen = record.last_seq
                while time.monotonic() < deadline:
                    await self.events.wait(run_id, seen, min(1.0, deadline - time.monotonic()))
                    record = await self.events.get_run(caller.owner, run_id)
                    seen = record.last_seq
                    if record.status != "running":
                        break
        return await self.events.get_run(caller.owner, run_id)

    # -- recovery ---------------------------------------------------------------------------------
    async def recover(self) -> int:
        """Hand the runs of dead processes on (durable engine) or close them; returns how many
        were closed as interrupted (``Recovery``)."""
        return await self.recovery.sweep()
