"""``MemoryEventLog``: the ``EventLog`` and ``UserStore`` in memory, for tests and for one
process that needs no durability (nothing survives the process)."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from tether.errors import ConflictError, NotFound
from tether.stores._common import check_id, now, to_datetime
from tether.stores.events._common import (
    TakeOver,
    check_events,
    check_run_args,
    check_status,
    not_held,
    publish_appended,
)
from tether.stores.events._log import (
    ACTIVE,
    ActiveRunLimit,
    LiveTail,
    LoggedEvent,
    ProcessInfo,
    RunRecord,
    RunStatus,
    busy,
    conversation_deleted,
    run_not_found,
)
from tether.stores.events._users import (
    UserInfo,
    check_new_user_name,
    check_user_name,
    new_token,
    token_digest,
    well_formed,
)

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


class MemoryEventLog:
    """An ``EventLog`` and ``UserStore`` held in this process's memory."""

    def __init__(self, *, clock: Callable[[], float] = now) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._processes: dict[str, ProcessInfo] = {}
        self._secrets: dict[str, bytes] = {}
        self._users: dict[str, _User] = {}
        self._tokens: dict[str, tuple[str, float | None]] = {}  # digest -> (name, revoked_at)
        self._tail = LiveTail()
        self._deleted: set[tuple[str, str]] = set()

    def _get(self, owner: str | None, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None or (owner is not None and run.record.owner != owner):
            raise run_not_found(run_id)
        return run

    def _stamp(
        self, run: _Run, status: RunStatus, process_id: str | None, pause_id: str | None, pause: bytes | None
    ) -> None:
        run.record = replace(
            run.record,
            updated_at=to_datetime(self._clock()),
            last_seq=len(run.events),
            status=status,
            process_id=process_id,
            pause_id=pause_id,
            pause=pause,
        )

    # -- runs -------------------------------------------------------------------------------
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
        """See ``EventLog.start_run``."""
        check_run_args(owner, conversation_id, run_id, process_id)
        check_events([event])
        t = to_datetime(self._clock())
        with self._lock:
            if (owner, conversation_id) in self._deleted:
                raise conversation_deleted(conversation_id)
            mine = [run.record for run in self._runs.values() if run.record.owner == owner]
            if max_active and sum(1 for r in mine if r.status in ACTIVE) >= max_active:
                raise ActiveRunLimit(owner, max_active)
            for r in mine:
                if r.conversation_id == conversation_id and r.status in ACTIVE:
                    raise busy(conversation_id, r.run_id)
            if run_id in self._runs:
                raise ConflictError(f"run id {run_id!r} is taken", expected=0, actual=1)
            record = RunRecord(run_id, owner, conversation_id, "running", t, t, 1, process_id)
            self._runs[run_id] = _Run(record, [event])
        self._tail.publish(run_id, [LoggedEvent(1, event)], local=True, final=False)
        return record

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
        """See ``EventLog.append``."""
        check_events(events)
        if status is not None:
            check_status(status)
        with self._lock:
            run = self._get(None, run_id)
            r = run.record
            if r.status != "running" or r.process_id != process_id:
                raise not_held(run_id, r.status, r.process_id, process_id)
            last = len(run.events)
            run.events.extend(events)
            paused = status == "paused"
            self._stamp(
                run, status or r.status, r.process_id, pause_id if paused else None, pause if paused else None
            )
        return publish_appended(self._tail, run_id, last, events, status)

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
        """See ``EventLog.take_over``."""
        change = TakeOver(from_status, to_status, event, process_id, holder, pause_id)
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or not change.accepts(run.record):
                return None
            before = run.record
            run.events.append(event)
            run.cancel_requested = False
            self._stamp(run, to_status, change.holder_after(before), None, None)
            seq = len(run.events)
        change.publish(self._tail, run_id, seq)
        return before

    async def request_cancel(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.request_cancel``."""
        with self._lock:
            run = self._get(owner, run_id)
            if run.record.status == "running":
                run.cancel_requested = True
            return run.record

    async def cancel_requests(self, process_id: str) -> list[str]:
        """See ``EventLog.cancel_requests``."""
        with self._lock:
            return [
                run_id
                for run_id, run in self._runs.items()
                if run.cancel_requested
                and run.record.status == "running"
                and run.record.process_id == process_id
            ]

    async def get_run(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.get_run``."""
        check_id(owner, "owner")
        check_id(run_id, "run_id")
        with self._lock:
            return self._get(owner, run_id).record

    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]:
        """See ``EventLog.runs``."""
        with self._lock:
            found = [
                run.record
                for run in self._runs.values()
                if run.record.owner == owner
                and run.record.conversation_id == conversation_id
                and (not active_only or run.record.status in ACTIVE)
            ]
        found.sort(key=lambda r: (r.created_at, r.run_id), reverse=True)
        return found[:limit]

    async def active_count(self, owner: str) -> int:
        """See ``EventLog.active_count``."""
        with self._lock:
            return sum(
                1 for run in self._runs.values() if run.record.owner == owner and run.record.status in ACTIVE
            )

    async def active_runs(self) -> list[RunRecord]:
        """See ``EventLog.active_runs``."""
        with self._lock:
            return sorted(
                (run.record for run in self._runs.values() if run.record.status == "running"),
                key=lambda r: r.created_at,
            )

    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        """See ``EventLog.read``."""
        with self._lock:
            run = self._get(owner, run_id)
            chunk = run.events[after_seq : after_seq + limit]
        return [LoggedEvent(after_seq + 1 + i, data) for i, data in enumerate(chunk)]

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """See ``EventLog.wait``."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None and len(run.events) > after_seq:
                return True
        return await self._tail.wait(run_id, after_seq, timeout)

    async def delete_runs(self, owner: str, conversation_id: str) -> int:
        """See ``EventLog.delete_runs``."""
        check_id(owner, "owner")
        check_id(conversation_id, "conversation_id")
        with self._lock:
            mine = [
                run.record
                for run in self._runs.values()
                if run.record.owner == owner and run.record.conversation_id == conversation_id
            ]
            active = [r.run_id for r in mine if r.status in ACTIVE]
            if active:
                raise busy(conversation_id, active[0])
            for r in mine:
                del self._runs[r.run_id]
            self._deleted.add((owner, conversation_id))
        return len(mine)

    # -- processes and secrets ------------------------------------------------------------------
    async def heartbeat(self, process_id: str, host: str, pid: int) -> None:
        """See ``EventLog.heartbeat``."""
        t = self._clock()
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

    async def secret(self, name: str, size: int = 32) -> bytes:
        """See ``EventLog.secret``."""
        with self._lock:
            return self._secrets.setdefault(name, secrets.token_bytes(size))

    # -- users --------------------------------------------------------------------------------
    async def add_user(self, name: str) -> str:
        """See ``UserStore.add_user``."""
        check_new_user_name(name)
        token = new_token()
        with self._lock:
            if name in self._users:
                raise ConflictError(f"user {name!r} exists (names are never reused)", expected=0, actual=1)
            self._users[name] = _User(self._clock())
            self._tokens[token_digest(token)] = (name, None)
        return token

    async def add_token(self, name: str) -> str:
        """See ``UserStore.add_token``."""
        check_user_name(name)
        token = new_token()
        with self._lock:
            user = self._users.get(name)
            if user is None or user.revoked_at is not None:
                raise NotFound(f"no active user {name!r}")
            self._tokens[token_digest(token)] = (name, None)
        return token

    async def revoke_user(self, name: str) -> None:
        """See ``UserStore.revoke_user``."""
        t = self._clock()
        with self._lock:
            user = self._users.get(name)
            if user is None:
                raise NotFound(f"no user {name!r}")
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

    async def authenticate(self, token: str) -> str | None:
        """See ``UserStore.authenticate``."""
        if not isinstance(token, str) or not well_formed(token):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        digest = token_digest(token)
        with self._lock:
            found = self._tokens.get(digest)
            if found is None or found[1] is not None:
                return None
            user = self._users.get(found[0])
            if user is None or user.revoked_at is not None:
                return None
        return found[0]  # found by its digest: the comparison was the dictionary's

    async def close(self) -> None:
        """Nothing to release."""
