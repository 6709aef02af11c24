"""``MemoryEventLog``: the ``EventLog`` and ``UserStore`` in memory, for tests and for one
process that needs no durability (nothing survives the process)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tether.stores._common import now, to_datetime
from tether.stores.events._base import BaseEventLog
from tether.stores.events._common import Append, Start, TakeOver, refuse_active
from tether.stores.events._log import (
    ACTIVE,
    LiveTail,
    LoggedEvent,
    ProcessInfo,
    RunRecord,
    RunStatus,
    run_not_found,
)
from tether.stores.events._users import UserInfo, no_active_user, no_user, user_exists

__all__ = ["MemoryEventLog"]


@dataclass
class _Run:
    record: RunRecord
    events: list[bytes] = field(default_factory=lambda: [])
    cancel_requested: bool = False


@dataclass
class _User:
    created_at: float
    revoked_at: float | None = None


class MemoryEventLog(BaseEventLog):
    """An ``EventLog`` and ``UserStore`` held in this process's memory."""

    def __init__(self, *, clock: Callable[[], float] = now) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._runs_by_id: dict[str, _Run] = {}
        self._processes: dict[str, ProcessInfo] = {}
        self._secrets: dict[str, bytes] = {}
        self._users: dict[str, _User] = {}
        self._tokens: dict[str, tuple[str, float | None]] = {}  # digest -> (name, revoked_at)
        self._tail = LiveTail()
        self._deleted: set[tuple[str, str]] = set()

    def _find(self, owner: str | None, run_id: str) -> _Run | None:
        run = self._runs_by_id.get(run_id)
        return None if run is None or (owner is not None and run.record.owner != owner) else run

    def _mine(self, owner: str, conversation_id: str | None = None) -> list[RunRecord]:
        return [
            run.record
            for run in self._runs_by_id.values()
            if run.record.owner == owner
            and (conversation_id is None or run.record.conversation_id == conversation_id)
        ]

    @staticmethod
    def _stamp(
        run: _Run,
        t: float,
        status: RunStatus,
        process_id: str | None,
        pause_id: str | None = None,
        pause: bytes | None = None,
    ) -> None:
        run.record = replace(
            run.record,
            updated_at=to_datetime(t),
            last_seq=len(run.events),
            status=status,
            process_id=process_id,
            pause_id=pause_id,
            pause=pause,
        )

    # -- runs: the hooks --------------------------------------------------------------------
    async def _start_run(self, start: Start) -> None:
        r = start.record
        with self._lock:
            mine = [x for x in self._mine(r.owner) if x.status in ACTIVE]
            start.refuse(
                deleted=(r.owner, r.conversation_id) in self._deleted,
                active=len(mine),
                busy_run=next((x.run_id for x in mine if x.conversation_id == r.conversation_id), None),
            )
            if r.run_id in self._runs_by_id:
                raise start.taken()
            self._runs_by_id[r.run_id] = _Run(r, [start.event])

    async def _append(self, item: Append) -> int:
        with self._lock:
            run = self._find(None, item.run_id)
            if run is None:
                raise run_not_found(item.run_id)
            r = run.record
            refused = item.refusal(r.status, r.process_id)
            if refused is not None:
                raise refused
            last = len(run.events)
            run.events.extend(item.events)
            self._stamp(run, self._clock(), item.status_after, r.process_id, item.pause_id, item.pause)
        return last

    async def _take_over(self, run_id: str, change: TakeOver, t: float) -> RunRecord | None:
        with self._lock:
            run = self._runs_by_id.get(run_id)
            if run is None or not change.accepts(run.record):
                return None
            before = run.record
            run.events.append(change.event)
            run.cancel_requested = False
            self._stamp(run, t, change.to_status, change.holder_after(before))
        return before

    async def _request_cancel(self, owner: str, run_id: str) -> RunRecord | None:
        with self._lock:
            run = self._find(owner, run_id)
            if run is not None and run.record.status == "running":
                run.cancel_requested = True
            return run.record if run is not None else None

    async def _get_run(self, owner: str, run_id: str) -> RunRecord | None:
        with self._lock:
            run = self._find(owner, run_id)
            return run.record if run is not None else None

    async def _delete_runs(self, owner: str, conversation_id: str) -> int:
        with self._lock:
            ids = refuse_active(
                conversation_id, [(r.run_id, r.status) for r in self._mine(owner, conversation_id)]
            )
            for run_id in ids:
                del self._runs_by_id[run_id]
            self._deleted.add((owner, conversation_id))
        return len(ids)

    # -- runs: the reads --------------------------------------------------------------------
    async def cancel_requests(self, process_id: str) -> list[str]:
        """See ``EventLog.cancel_requests``."""
        with self._lock:
            return [
                run_id
                for run_id, run in self._runs_by_id.items()
                if run.cancel_requested
                and run.record.status == "running"
                and run.record.process_id == process_id
            ]

    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]:
        """See ``EventLog.runs``."""
        with self._lock:
            found = [r for r in self._mine(owner, conversation_id) if not active_only or r.status in ACTIVE]
        found.sort(key=lambda r: (r.created_at, r.run_id), reverse=True)
        return found[:limit]

    async def active_count(self, owner: str) -> int:
        """See ``EventLog.active_count``."""
        with self._lock:
            return sum(1 for r in self._mine(owner) if r.status in ACTIVE)

    async def active_runs(self) -> list[RunRecord]:
        """See ``EventLog.active_runs``."""
        with self._lock:
            return sorted(
                (run.record for run in self._runs_by_id.values() if run.record.status == "running"),
                key=lambda r: r.created_at,
            )

    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        """See ``EventLog.read``."""
        with self._lock:
            run = self._find(owner, run_id)
            if run is None:
                raise run_not_found(run_id)
            chunk = run.events[after_seq : after_seq + limit]
        return [LoggedEvent(after_seq + 1 + i, data) for i, data in enumerate(chunk)]

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """See ``EventLog.wait``."""
        with self._lock:
            run = self._runs_by_id.get(run_id)
            if run is not None and len(run.events) > after_seq:
                return True
        return await self._tail.wait(run_id, after_seq, timeout)

    # -- processes and secrets ------------------------------------------------------------------
    async def _heartbeat(self, process_id: str, host: str, pid: int, t: float) -> None:
        with self._lock:
            known = self._processes.get(process_id)
            started = known.started_at if known is not None else t
            self._processes[process_id] = ProcessInfo(process_id, host, pid, started, t)

    async def processes(self) -> list[ProcessInfo]:
        """See ``EventLog.processes``."""
        with self._lock:
            return list(self._processes.values())

    async def forget_process(self, process_id: str) -> None:
        """See ``EventLog.forget_process``."""
        with self._lock:
            self._processes.pop(process_id, None)

    async def _secret(self, name: str, fresh: bytes) -> bytes:
        with self._lock:
            return self._secrets.setdefault(name, fresh)

    # -- users: the hooks and the read ---------------------------------------------------------
    async def _add_user(self, name: str, digest: str, t: float) -> None:
        with self._lock:
            if name in self._users:
                raise user_exists(name)
            self._users[name] = _User(t)
            self._tokens[digest] = (name, None)

    async def _add_token(self, name: str, digest: str, t: float) -> None:
        with self._lock:
            user = self._users.get(name)
            if user is None or user.revoked_at is not None:
                raise no_active_user(name)
            self._tokens[digest] = (name, None)

    async def _revoke_user(self, name: str, t: float) -> None:
        with self._lock:
            user = self._users.get(name)
            if user is None:
                raise no_user(name)
            user.revoked_at = user.revoked_at or t
            for digest, (owner, revoked) in list(self._tokens.items()):
                if owner == name and revoked is None:
                    self._tokens[digest] = (owner, t)

    async def users(self) -> list[UserInfo]:
        """See ``UserStore.users``."""
        with self._lock:
            return [
                UserInfo(
                    name,
                    to_datetime(u.created_at),
                    to_datetime(u.revoked_at) if u.revoked_at is not None else None,
                    sum(1 for n, r in self._tokens.values() if n == name and r is None),
                )
                for name, u in sorted(self._users.items())
            ]

    async def _active_token(self, digest: str) -> tuple[str, str] | None:
        with self._lock:
            found = self._tokens.get(digest)
            if found is None or found[1] is not None:
                return None
            user = self._users.get(found[0])
            return (digest, found[0]) if user is not None and user.revoked_at is None else None

    async def close(self) -> None:
        """Nothing to release."""
