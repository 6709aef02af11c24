"""What the event logs share: the queries (``?`` placeholders; PostgreSQL swaps them for
``%s``), the row → record mapping, the argument checks and the take-over rule."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from tether.errors import ConflictError, UserError
from tether.stores._common import check_id, to_datetime
from tether.stores._events import ACTIVE, LiveTail, LoggedEvent, RunRecord, RunStatus
from tether.stores._users import UserInfo

__all__ = [
    "ACTIVE_SQL",
    "RUN_COLUMNS",
    "Append",
    "OwnerCache",
    "TakeOver",
    "check_events",
    "check_run_args",
    "check_status",
    "not_held",
    "publish_appended",
    "settle",
    "to_record",
    "to_user",
]

RUN_COLUMNS = (
    "run_id, owner, conversation_id, status, created_at, updated_at, last_seq, process_id, pause_id, pause"
)
ACTIVE_SQL = "('running', 'paused')"
_STATUSES = frozenset({"running", "paused", "completed", "failed", "canceled", "interrupted"})
assert set(ACTIVE) < _STATUSES


def to_record(row: Sequence[Any]) -> RunRecord:
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


def to_user(row: Sequence[Any]) -> UserInfo:
    name, created, revoked, tokens = row
    return UserInfo(
        name=name,
        created_at=to_datetime(created),
        revoked_at=to_datetime(revoked) if revoked is not None else None,
        tokens=int(tokens),
    )


def check_status(status: object) -> RunStatus:
    if status not in _STATUSES:
        raise UserError(f"unknown run status {status!r}; expected one of {', '.join(sorted(_STATUSES))}")
    return cast(RunStatus, status)


def check_events(events: Sequence[bytes]) -> None:
    for i, data in enumerate(events):
        if not isinstance(data, bytes):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"event {i} must be the JSON bytes of one object, not {type(data).__name__}")


def not_held(run_id: str, status: str, holder: str | None, process_id: str) -> ConflictError:
    """The error of an append by a process that no longer holds the run."""
    held = f"is held by process {holder!r}, not {process_id!r}"
    why = f"is {status}" if status != "running" else held
    return ConflictError(f"run {run_id!r} {why}: nothing was appended", expected=0, actual=1)


def publish_appended(
    tail: LiveTail, run_id: str, last: int, events: Sequence[bytes], status: RunStatus | None
) -> int:
    """Publish the committed ``events`` appended after seq ``last`` (the run left the running
    state when ``status`` says so); return the seq of the last one."""
    logged = [LoggedEvent(last + 1 + i, data) for i, data in enumerate(events)]
    tail.publish(run_id, logged, local=True, final=status not in (None, "running"))
    return last + len(events)


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


@dataclass(slots=True)
class Append:
    """One run's append waiting for the next group commit."""

    run_id: str
    process_id: str
    events: list[bytes]
    status: RunStatus | None
    pause_id: str | None
    pause: bytes | None
    future: asyncio.Future[int]


def settle(batch: Sequence[Append], outcomes: Sequence[int | BaseException]) -> None:
    """Hand each append of a group commit its last seq before, or its error."""
    for item, outcome in zip(batch, outcomes, strict=True):
        if item.future.done():
            continue
        if isinstance(outcome, BaseException):
            item.future.set_exception(outcome)
        else:
            item.future.set_result(outcome)


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


def check_run_args(owner: str, conversation_id: str, run_id: str, process_id: str) -> None:
    for value, what in (
        (owner, "owner"),
        (conversation_id, "conversation_id"),
        (run_id, "run_id"),
        (process_id, "process_id"),
    ):
        check_id(value, what)
