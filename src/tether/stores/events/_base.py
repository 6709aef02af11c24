"""``BaseEventLog``: the ``EventLog`` contract written once. Every public method checks its
arguments (the same ``TetherError`` for the same bad input on every backend), turns them into a
checked request (``Start``, ``Append``, ``TakeOver``: the run-state rules) and calls the backend's
underscored hook; after a commit it publishes the new events to the live tail and builds the
result. ``BaseUserStore`` does the same for ``UserStore`` (names checked, tokens made and
compared here). A backend (``MemoryEventLog``, ``SQLiteEventLog``, ``PostgresEventLog``) is its
storage."""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from tether.stores._common import check_id, to_datetime
from tether.stores.events._common import Append, Start, TakeOver, check_events, check_run_args
from tether.stores.events._log import LiveTail, LoggedEvent, ProcessInfo, RunRecord, RunStatus, run_not_found
from tether.stores.events._users import (
    UserInfo,
    check_new_user_name,
    check_user_name,
    new_token,
    token_digest,
    token_matches,
    well_formed,
)

__all__ = ["BaseEventLog", "BaseUserStore"]


class BaseUserStore(ABC):
    """The checked ``UserStore`` methods over a backend's hooks. A subclass sets ``_clock``."""

    _clock: Callable[[], float]

    async def add_user(self, name: str) -> str:
        """See ``UserStore.add_user``."""
        check_new_user_name(name)
        token = new_token()
        await self._add_user(name, token_digest(token), self._clock())
        return token

    async def add_token(self, name: str) -> str:
        """See ``UserStore.add_token``."""
        check_user_name(name)
        token = new_token()
        await self._add_token(name, token_digest(token), self._clock())
        return token

    async def revoke_user(self, name: str) -> None:
        """See ``UserStore.revoke_user``."""
        await self._revoke_user(name, self._clock())

    async def authenticate(self, token: str) -> str | None:
        """See ``UserStore.authenticate``: a token of the wrong shape is looked up nowhere; the
        stored digest is compared in constant time."""
        if not isinstance(token, str) or not well_formed(token):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        found = await self._active_token(token_digest(token))
        if found is None or not token_matches(token, found[0]):
            return None
        return found[1]

    @abstractmethod
    async def users(self) -> list[UserInfo]:
        """See ``UserStore.users``."""

    @abstractmethod
    async def close(self) -> None:
        """Release connections and threads. Idempotent."""

    @abstractmethod
    async def _add_user(self, name: str, digest: str, t: float) -> None:
        """Insert user ``name`` made at ``t`` with its first token; ``ConflictError`` if the name exists."""

    @abstractmethod
    async def _add_token(self, name: str, digest: str, t: float) -> None:
        """Insert a token of ``name``; ``NotFound`` unless ``name`` is an active user."""

    @abstractmethod
    async def _revoke_user(self, name: str, t: float) -> None:
        """Revoke ``name`` (if not already) and its active tokens at ``t``; ``NotFound`` for an
        unknown name."""

    @abstractmethod
    async def _active_token(self, digest: str) -> tuple[str, str] | None:
        """(stored digest, user name) of the token with ``digest`` when it and its user are active."""


class BaseEventLog(BaseUserStore):
    """The checked ``EventLog`` methods over a backend's hooks (``_start_run``, ``_append``, ...):
    each hook receives validated arguments and does the storage part only. A subclass sets
    ``_clock`` and ``_tail`` (this process's ``LiveTail``)."""

    _clock: Callable[[], float]
    _tail: LiveTail

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
        t = self._clock()
        at = to_datetime(t)
        start = Start(
            RunRecord(run_id, owner, conversation_id, "running", at, at, 1, process_id), event, t, max_active
        )
        await self._start_run(start)
        start.publish(self._tail)
        return start.record

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
        item = Append.checked(run_id, process_id, events, status, pause_id, pause)
        return item.publish(self._tail, await self._append(item))

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
        before = await self._take_over(run_id, change, self._clock())
        if before is not None:
            change.publish(self._tail, run_id, before.last_seq + 1)
        return before

    async def request_cancel(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.request_cancel``."""
        record = await self._request_cancel(owner, run_id)
        if record is None:
            raise run_not_found(run_id)
        return record

    async def get_run(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.get_run``."""
        check_id(owner, "owner")
        check_id(run_id, "run_id")
        record = await self._get_run(owner, run_id)
        if record is None:
            raise run_not_found(run_id)
        return record

    async def delete_runs(self, owner: str, conversation_id: str) -> int:
        """See ``EventLog.delete_runs``."""
        check_id(owner, "owner")
        check_id(conversation_id, "conversation_id")
        return await self._delete_runs(owner, conversation_id)

    # -- processes and secrets --------------------------------------------------------------
    async def heartbeat(self, process_id: str, host: str, pid: int) -> None:
        """See ``EventLog.heartbeat``."""
        await self._heartbeat(process_id, host, pid, self._clock())

    async def secret(self, name: str, size: int = 32) -> bytes:
        """See ``EventLog.secret``."""
        return await self._secret(name, secrets.token_bytes(size))

    # -- what has nothing to check: the backend's own -----------------------------------------
    @abstractmethod
    async def cancel_requests(self, process_id: str) -> list[str]: ...

    @abstractmethod
    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]: ...

    @abstractmethod
    async def active_count(self, owner: str) -> int: ...

    @abstractmethod
    async def active_runs(self) -> list[RunRecord]: ...

    @abstractmethod
    async def read(
        self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500
    ) -> list[LoggedEvent]: ...

    @abstractmethod
    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool: ...

    @abstractmethod
    async def processes(self) -> list[ProcessInfo]: ...

    @abstractmethod
    async def forget_process(self, process_id: str) -> None: ...

    # -- the backend's hooks: arguments checked ------------------------------------------------
    @abstractmethod
    async def _start_run(self, start: Start) -> None:
        """Store ``start.record`` and its event 1 in one step that first refuses what
        ``start.refuse`` refuses (serialized per owner, across processes) and a taken run id
        (``start.taken``)."""

    @abstractmethod
    async def _append(self, item: Append) -> int:
        """Append ``item`` unless ``item.refusal`` refuses it (raised); the run's last seq before."""

    @abstractmethod
    async def _take_over(self, run_id: str, change: TakeOver, t: float) -> RunRecord | None:
        """Apply ``change`` at ``t`` (event numbered after ``last_seq``, pause and cancel request
        cleared) if it accepts the run: the record before, or ``None``."""

    @abstractmethod
    async def _request_cancel(self, owner: str, run_id: str) -> RunRecord | None:
        """Mark the cancel request of the run if it is ``running``; the run of ``owner`` as it
        is then, or ``None``."""

    @abstractmethod
    async def _get_run(self, owner: str, run_id: str) -> RunRecord | None: ...

    @abstractmethod
    async def _delete_runs(self, owner: str, conversation_id: str) -> int:
        """Delete the runs (``refuse_active``) and remember the conversation as deleted, in one
        step serialized with ``_start_run``; how many runs went."""

    @abstractmethod
    async def _heartbeat(self, process_id: str, host: str, pid: int, t: float) -> None: ...

    @abstractmethod
    async def _secret(self, name: str, fresh: bytes) -> bytes:
        """The stored secret ``name``, stored as ``fresh`` if absent."""
