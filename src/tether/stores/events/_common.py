"""What the event logs share: the argument checks, the row → record mapping, the run-state rules
(``Start``, ``Append``, ``TakeOver``: a checked request and what it allows), the group commit of
appends, and what runs a statement (``Queries``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from tether.errors import ConflictError, TetherError, UserError
from tether.stores._common import check_id, to_datetime
from tether.stores.events._log import (
    ACTIVE,
    ActiveRunLimit,
    LiveTail,
    LoggedEvent,
    RunRecord,
    RunStatus,
    busy,
    conversation_deleted,
    run_not_found,
)

__all__ = [
    "Append",
    "GroupCommit",
    "OwnerCache",
    "Queries",
    "Row",
    "Start",
    "TakeOver",
    "check_events",
    "check_run_args",
    "check_status",
    "not_held",
    "refuse_active",
    "to_record",
]

_STATUSES = frozenset({"running", "paused", "completed", "failed", "canceled", "interrupted"})
assert set(ACTIVE) < _STATUSES

Row = tuple[Any, ...]


class Queries(Protocol):
    """One statement (``?`` placeholders) in its own transaction, on one database."""

    async def one(self, query: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a read."""
        ...

    async def all(self, query: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a read."""
        ...

    async def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        """A write."""
        ...


def to_record(row: Sequence[Any]) -> RunRecord:
    """A run from a row of ``_statements.RUN_COLUMNS``."""
    run_id, owner, cid, status, created, updated, last_seq, process_id, pause_id, pause = row
    return RunRecord(
        run_id=run_id,
        owner=owner,
        conversation_id=cid,
        status=status,
        created_at=to_datetime(created),
        updated_at=to_datetime(updated),
        last_seq=int(last_seq),
        process_id=process_id,
        pause_id=pause_id,
        pause=bytes(pause) if pause is not None else None,
    )


def check_status(status: object) -> RunStatus:
    if status not in _STATUSES:
        raise UserError(f"unknown run status {status!r}; expected one of {', '.join(sorted(_STATUSES))}")
    return cast(RunStatus, status)


def check_events(events: Sequence[bytes]) -> None:
    for i, data in enumerate(events):
        if not isinstance(data, bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"event {i} must be the JSON bytes of one object, not {type(data).__name__}")


def check_run_args(owner: str, conversation_id: str, run_id: str, process_id: str) -> None:
    for value, what in (
        (owner, "owner"),
        (conversation_id, "conversation_id"),
        (run_id, "run_id"),
        (process_id, "process_id"),
    ):
        check_id(value, what)


def not_held(run_id: str, status: str, holder: str | None, process_id: str) -> ConflictError:
    """The error of an append by a process that no longer holds the run."""
    held = f"is held by process {holder!r}, not {process_id!r}"
    why = f"is {status}" if status != "running" else held
    return ConflictError(f"run {run_id!r} {why}: nothing was appended", expected=0, actual=1)


def refuse_active(conversation_id: str, rows: Sequence[Row]) -> list[str]:
    """The run ids of ``(run_id, status)`` rows of a conversation whose runs are to be deleted;
    ``ConflictError`` (``busy``) when one of them is active."""
    active = [r for r, s in rows if s in ACTIVE]
    if active:
        raise busy(conversation_id, active[0])
    return [r for r, _ in rows]


@dataclass(frozen=True, slots=True)
class Start:
    """A checked ``start_run``: the new ``running`` run (``record``, made at ``t``), its event 1,
    and the owner's limit of active runs (0: none)."""

    record: RunRecord
    event: bytes
    t: float
    max_active: int

    def refuse(self, *, deleted: bool, active: int, busy_run: str | None) -> None:
        """Raise why the run may not start: its conversation was deleted, the owner has
        ``active`` runs (the limit), or ``busy_run`` is the conversation's active run."""
        if deleted:
            raise conversation_deleted(self.record.conversation_id)
        if self.max_active and active >= self.max_active:
            raise ActiveRunLimit(self.record.owner, self.max_active)
        if busy_run is not None:
            raise busy(self.record.conversation_id, busy_run)

    def taken(self) -> ConflictError:
        """The error of a run id already used."""
        return ConflictError(f"run id {self.record.run_id!r} is taken", expected=0, actual=1)

    def publish(self, tail: LiveTail) -> None:
        """Publish the committed event 1."""
        tail.publish(self.record.run_id, [LoggedEvent(1, self.event)], local=True, final=False)


@dataclass(frozen=True, slots=True)
class TakeOver:
    """A checked ``take_over``: the compare (``from_status``, held by ``holder``, paused as
    ``pause_id``) and the set (``to_status``, held by ``process_id``, ``event`` appended)."""

    from_status: RunStatus
    to_status: RunStatus
    event: bytes
    process_id: str | None = None
    holder: str | None = None
    pause_id: str | None = None

    def __post_init__(self) -> None:
        check_status(self.from_status)
        check_status(self.to_status)
        check_events([self.event])

    def accepts(self, before: RunRecord) -> bool:
        """True when the run as it is matches the compare."""
        return (
            before.status == self.from_status
            and (self.holder is None or before.process_id == self.holder)
            and (self.pause_id is None or before.pause_id == self.pause_id)
        )

    def compare(self, row: Sequence[Any] | None) -> RunRecord | None:
        """The run of ``row`` (``RUN_COLUMNS``; ``None``: no such run) when it matches the
        compare, else ``None``."""
        if row is None:
            return None
        before = to_record(row)
        return before if self.accepts(before) else None

    def holder_after(self, before: RunRecord) -> str | None:
        """The process holding the run after the take-over (the same one unless given)."""
        return self.process_id if self.process_id is not None else before.process_id

    def publish(self, tail: LiveTail, run_id: str, seq: int) -> None:
        """Publish the committed take-over event, numbered ``seq``."""
        running = self.to_status == "running"
        tail.publish(
            run_id,
            [LoggedEvent(seq, self.event)],
            local=running and self.process_id is not None,
            final=not running,
        )


@dataclass(frozen=True, slots=True)
class Append:
    """A checked ``append``: ``events`` for a run held by ``process_id``, moving it to ``status``
    when given; ``pause_id`` and ``pause`` are kept only when that is ``paused``."""

    run_id: str
    process_id: str
    events: Sequence[bytes]
    status: RunStatus | None = None
    pause_id: str | None = None
    pause: bytes | None = None

    @classmethod
    def checked(
        cls,
        run_id: str,
        process_id: str,
        events: Sequence[bytes],
        status: RunStatus | None,
        pause_id: str | None,
        pause: bytes | None,
    ) -> Append:
        check_events(events)
        if status is not None:
            check_status(status)
        if status != "paused":
            pause_id = pause = None
        return cls(run_id, process_id, list(events), status, pause_id, pause)

    def refusal(self, status: str | None, holder: str | None) -> TetherError | None:
        """Why the run (``status`` ``None``: no such run) refuses this append, or ``None``."""
        if status is None:
            return run_not_found(self.run_id)
        if status != "running" or holder != self.process_id:
            return not_held(self.run_id, status, holder, self.process_id)
        return None

    @property
    def status_after(self) -> RunStatus:
        """The run's status once appended (it was ``running``: nothing else is appended to)."""
        return self.status or "running"

    def publish(self, tail: LiveTail, last: int) -> int:
        """Publish the committed events, appended after seq ``last`` (the run left the running
        state when ``status`` says so); return the seq of the last one."""
        logged = [LoggedEvent(last + 1 + i, data) for i, data in enumerate(self.events)]
        tail.publish(self.run_id, logged, local=True, final=self.status not in (None, "running"))
        return last + len(self.events)


def _settle(futures: Sequence[asyncio.Future[int]], outcomes: Sequence[int | BaseException]) -> None:
    """Hand each append of a group commit its last seq before, or its error."""
    for future, outcome in zip(futures, outcomes, strict=True):
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


class GroupCommit:
    """Appends of concurrent runs committed together: up to ``in_flight`` committers run at once,
    each taking whatever appends are waiting and handing them to ``commit`` (one transaction,
    which returns each append's last seq before, or why it was refused)."""

    def __init__(
        self, commit: Callable[[list[Append]], Awaitable[Sequence[int | BaseException]]], in_flight: int
    ) -> None:
        self._commit = commit
        self._in_flight = in_flight
        self._waiting: list[tuple[Append, asyncio.Future[int]]] = []
        self._committers = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: Append) -> int:
        """Wait for the commit of one append; its run's last seq before it."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._waiting.append((item, future))
        if self._committers < self._in_flight:
            self._committers += 1
            task = loop.create_task(self._committer())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return await future

    async def _committer(self) -> None:
        try:
            while self._waiting:
                waiting, self._waiting = self._waiting, []
                futures = [future for _, future in waiting]
                try:
                    outcomes = await self._commit([item for item, _ in waiting])
                except Exception as exc:  # the transaction failed: every append of it did
                    _settle(futures, [exc] * len(futures))
                    continue
                _settle(futures, outcomes)
        finally:
            self._committers -= 1


class OwnerCache:
    """Run id → owner for runs already looked up (an owner never changes), bounded."""

    def __init__(self, size: int = 50_000) -> None:
        self._owners: dict[str, str] = {}
        self._size = size

    def get(self, run_id: str) -> str | None:
        return self._owners.get(run_id)

    def put(self, run_id: str, owner: str) -> None:
        if len(self._owners) >= self._size:
            self._owners.clear()
        self._owners[run_id] = owner

    def drop(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            self._owners.pop(run_id, None)
