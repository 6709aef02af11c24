"""The run event log: the ``EventLog`` protocol, its records, and the live tail every
implementation shares.

A *run* of the service (``tether serve``) is one turn of a conversation, detached from any HTTP
connection. Everything it does is appended to the log as JSON events numbered 1, 2, 3, … per
run, in the same transaction that moves the run's status. Readers (Server-Sent Events streams,
on any process sharing the database) read by sequence number, so a reader that knows the last
number it saw gets every later event exactly once.

Rules the implementations keep (docs/adr/0009-serve.md):

- At most one *active* run (``running`` or ``paused``) per ``(owner, conversation)``: the
  database enforces it with a partial unique index; a second ``start_run`` is ``ConflictError``.
- ``start_run`` counts the owner's active runs and inserts in one step (one transaction under a
  lock per owner, across processes): a limit is never overshot by simultaneous starts.
- ``delete_runs`` remembers the conversation as deleted in the same step: a ``start_run`` on it
  afterwards is ``NotFound``, so a start racing a delete either holds the conversation first
  (the delete is refused) or finds it gone.
- Only the process holding a ``running`` run appends to it (``append`` checks the holder), so a
  process presumed dead whose run was closed as ``interrupted`` cannot write after the fact.
- A status change away from ``paused`` or from a dead holder is one compare-and-set
  (``take_over``): a decision is accepted once, an orphan is closed once.
- A run of another owner is ``NotFound``, identical to an absent one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from tether.errors import ConflictError, NotFound

__all__ = [
    "ACTIVE",
    "TERMINAL",
    "ActiveRunLimit",
    "EventLog",
    "LiveTail",
    "LoggedEvent",
    "ProcessInfo",
    "RunRecord",
    "RunStatus",
    "busy",
    "conversation_deleted",
    "run_not_found",
]

RunStatus: TypeAlias = Literal["running", "paused", "completed", "failed", "canceled", "interrupted"]
ACTIVE: tuple[RunStatus, ...] = ("running", "paused")
"""Statuses of a run that still holds its conversation."""
TERMINAL: tuple[RunStatus, ...] = ("completed", "failed", "canceled", "interrupted")
"""Statuses after which nothing is appended to a run."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as the log knows it.

    ``last_seq`` is the number of its last event. ``process_id`` is the service process that
    ran it last (it holds the run while ``running``). ``pause`` is the server-side record of a
    paused run's pending calls (JSON, approval tokens included: never sent to a client) and
    ``pause_id`` names it; both are ``None`` unless the run is ``paused``. Times are UTC.
    """

    run_id: str
    owner: str
    conversation_id: str
    status: RunStatus
    created_at: datetime
    updated_at: datetime
    last_seq: int
    process_id: str | None = None
    pause_id: str | None = None
    pause: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """One stored event: its sequence number in the run and its JSON object."""

    seq: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """A service process: where it runs and when it last said it was alive (seconds since the epoch)."""

    process_id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float


def run_not_found(run_id: str) -> NotFound:
    """The error for a run that is absent or another owner's (the same text either way)."""
    return NotFound(f"no run {run_id!r}")


def busy(conversation_id: str, active: str | None) -> ConflictError:
    """The error for a second active run on a conversation."""
    which = f" ({active})" if active else ""
    return ConflictError(
        f"conversation {conversation_id!r} already has an active run{which}: wait for it to end, "
        "decide its pending calls, or cancel it",
        expected=0,
        actual=1,
    )


class ActiveRunLimit(ConflictError):
    """``start_run`` refused: the owner already has ``limit`` active runs."""

    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(
            f"{owner!r} has {limit} active runs (the limit): wait for one to end, or cancel one",
            expected=limit - 1,
            actual=limit,
        )
        self.limit = limit


def conversation_deleted(conversation_id: str) -> NotFound:
    """The error of a run started on a conversation whose runs were deleted with it."""
    return NotFound(f"conversation {conversation_id!r} was deleted")


@runtime_checkable
class EventLog(Protocol):
    """Durable, numbered events of service runs, and the runs' states. Every method is async."""

    async def start_run(
        self,
        owner: str,
        conversation_id: str,
        run_id: str,
        process_id: str,
        event: bytes,
        *,
        max_active: int = 0,
    ) -> RunRecord:
        """Record a new ``running`` run held by ``process_id`` with ``event`` as its event 1.
        ``ConflictError`` when the conversation already has an active run; ``ActiveRunLimit``
        when ``max_active`` (0: no limit) runs of ``owner`` are active (counted in the same
        step as the insert, on every process); ``NotFound`` when the conversation's runs were
        deleted with it (``delete_runs``)."""
        ...

    async def append(
        self,
        run_id: str,
        process_id: str,
        events: Sequence[bytes],
        *,
        status: RunStatus | None = None,
        pause_id: str | None = None,
        pause: bytes | None = None,
    ) -> int:
        """Append events to a ``running`` run held by ``process_id`` and return the last seq; with
        ``status`` move the run there in the same transaction (``paused`` stores ``pause_id`` and
        ``pause``). ``ConflictError`` when the run is not running or is held by another process."""
        ...

    async def take_over(
        self,
        run_id: str,
        *,
        from_status: RunStatus,
        to_status: RunStatus,
        event: bytes,
        process_id: str | None = None,
        holder: str | None = None,
        pause_id: str | None = None,
    ) -> RunRecord | None:
        """Compare and set: if the run is in ``from_status`` (held by ``holder`` / paused as
        ``pause_id`` when those are given), move it to ``to_status``, held by ``process_id``, clear
        its pause, append ``event``, and return the record as it was before; else ``None``."""
        ...

    async def request_cancel(self, owner: str, run_id: str) -> RunRecord:
        """Ask the process holding a ``running`` run to stop it (``cancel_requests``); returns
        the run as it is. ``NotFound`` if absent or another owner's."""
        ...

    async def cancel_requests(self, process_id: str) -> list[str]:
        """Ids of the ``running`` runs held by ``process_id`` whose cancel was requested."""
        ...

    async def get_run(self, owner: str, run_id: str) -> RunRecord:
        """One run of ``owner``; ``NotFound`` if absent or another owner's."""
        ...

    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]:
        """Runs of one conversation, newest first."""
        ...

    async def active_count(self, owner: str) -> int:
        """How many active (running or paused) runs ``owner`` has, on every process."""
        ...

    async def active_runs(self) -> list[RunRecord]:
        """Every ``running`` run of every owner (recovery looks for dead holders)."""
        ...

    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        """Up to ``limit`` events with seq greater than ``after_seq``, in order."""
        ...

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """Return when an event after ``after_seq`` may exist (True) or after ``timeout`` seconds
        (False). A True may be spurious: read to know."""
        ...

    async def delete_runs(self, owner: str, conversation_id: str) -> int:
        """Delete a conversation's runs and their events (none may be active: ``ConflictError``)
        and remember it as deleted: no run starts on it again."""
        ...

    async def heartbeat(self, process_id: str, host: str, pid: int) -> None:
        """Say that a service process is alive (registers it on first call)."""
        ...

    async def processes(self) -> list[ProcessInfo]:
        """Every registered service process."""
        ...

    async def forget_process(self, process_id: str) -> None:
        """Remove a process that stopped (cleanly, or was found dead and its runs closed)."""
        ...

    async def secret(self, name: str, size: int = 32) -> bytes:
        """A random secret shared by every process of this database (made on first use)."""
        ...

    async def close(self) -> None:
        """Release connections and threads. Idempotent."""
        ...


class _Tail:
    __slots__ = ("events", "local", "waiters")

    def __init__(self) -> None:
        self.events: deque[LoggedEvent] = deque(maxlen=LiveTail.KEEP)
        self.waiters: list[asyncio.Future[None]] = []
        self.local = False


class LiveTail:
    """Recent events of runs appended by this process, and the readers waiting for them.

    After a commit the log ``publish``es the new events: waiting readers wake at once and read
    them from memory (``cached``) instead of the database. A reader of a run appended elsewhere
    (another process) is woken by ``publish`` from a notification, or polls the database.
    """

    KEEP = 2048
    """Events kept per run."""

    def __init__(self) -> None:
        self._tails: dict[str, _Tail] = {}

    def _tail(self, run_id: str) -> _Tail:
        tail = self._tails.get(run_id)
        if tail is None:
            tail = self._tails[run_id] = _Tail()
        return tail

    def publish(self, run_id: str, events: Sequence[LoggedEvent], *, local: bool, final: bool) -> None:
        """Committed ``events`` of ``run_id`` (seqs in order); ``final`` when the run left the
        running state (its tail is dropped once its readers have woken)."""
        tail = self._tail(run_id)
        tail.local = local and not final
        if events:
            last = tail.events[-1].seq if tail.events else None
            if last is not None and events[0].seq != last + 1:
                tail.events.clear()  # a gap (events appended elsewhere): keep only contiguous ones
            tail.events.extend(events)
        self.wake(run_id)
        if final:
            self._tails.pop(run_id, None)

    def wake(self, run_id: str) -> None:
        """Wake every reader waiting on ``run_id`` (a notification from another process)."""
        tail = self._tails.get(run_id)
        if tail is None:
            return
        waiters, tail.waiters = tail.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        if not tail.events and not tail.local and not tail.waiters:
            self._tails.pop(run_id, None)

    def wake_all(self) -> None:
        """Wake every waiting reader (a notification too big to name its runs)."""
        for run_id in list(self._tails):
            self.wake(run_id)

    def cached(self, run_id: str, after_seq: int, limit: int) -> list[LoggedEvent] | None:
        """The events after ``after_seq`` from memory, or ``None`` when memory cannot tell."""
        tail = self._tails.get(run_id)
        if tail is None or not tail.events:
            return None
        first = tail.events[0].seq
        if after_seq + 1 < first:
            return None
        start = after_seq + 1 - first
        if start >= len(tail.events):
            return [] if tail.local else None
        out: list[LoggedEvent] = []
        for i in range(start, min(len(tail.events), start + limit)):
            out.append(tail.events[i])
        return out

    def is_local(self, run_id: str) -> bool:
        """True while this process is running ``run_id`` (every new event is published here)."""
        tail = self._tails.get(run_id)
        return tail is not None and tail.local

    def last_seq(self, run_id: str) -> int | None:
        tail = self._tails.get(run_id)
        return tail.events[-1].seq if tail is not None and tail.events else None

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """Wait until ``publish``/``wake`` for ``run_id`` or ``timeout``; True when woken."""
        last = self.last_seq(run_id)
        if last is not None and last > after_seq:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tail = self._tail(run_id)
        tail.waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            return False
        finally:
            if not waiter.done():
                waiter.cancel()
            with contextlib.suppress(ValueError):
                tail.waiters.remove(waiter)
            if not tail.waiters and not tail.events and not tail.local:
                self._tails.pop(run_id, None)
        return True
