"""``SQLEventLog``: the ``EventLog`` both SQL databases share, over the statements of one
database (``RunTables``, ``Queries``).

What is the same on SQLite and PostgreSQL lives here (the contract and its checks are
``BaseEventLog``'s): the group commit of appends, the owner cache and the live tail (readers of
this process's runs are served from memory), the records built from rows, and the reads that are
one statement. A backend
(``SQLiteEventLog``, ``PostgresEventLog``) supplies its transactions, its connection and how a
reader of another process's run learns of new events (``_follow_interval``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Protocol, Self

from tether.stores.events import _statements as sql
from tether.stores.events._base import BaseEventLog
from tether.stores.events._common import Append, GroupCommit, OwnerCache, Queries, Start, TakeOver, to_record
from tether.stores.events._log import LiveTail, LoggedEvent, ProcessInfo, RunRecord, run_not_found
from tether.stores.events._users_sql import SQLUserStore, UserTables

__all__ = ["RunTables", "SQLEventLog"]


class RunTables(Protocol):
    """The transactions of the runs, events and secrets tables in one database (its SQL)."""

    async def start_run(self, start: Start) -> None:
        """Insert ``start.record`` and its event 1, in one transaction that first checks
        (serialized per owner, across processes) what ``start.refuse`` refuses; ``start.taken``
        when the run id is taken."""
        ...

    async def append_batch(self, batch: list[Append], t: float) -> Sequence[int | BaseException]:
        """One group commit at ``t``: for each append its run's last seq before, or why it was
        refused (nothing of that append written)."""
        ...

    async def take_over(self, run_id: str, change: TakeOver, t: float) -> RunRecord | None:
        """Apply ``change`` if it accepts the run: the record before, or ``None``."""
        ...

    async def request_cancel(self, owner: str, run_id: str, t: float) -> RunRecord | None:
        """Mark the cancel request of a running run of ``owner``; the run as it is then."""
        ...

    async def read(self, owner: str | None, run_id: str, after_seq: int, limit: int) -> list[LoggedEvent]:
        """Events after ``after_seq``; ``NotFound`` if ``owner`` is given and the run is not its."""
        ...

    async def delete_runs(self, owner: str, conversation_id: str, t: float) -> list[str]:
        """Delete a conversation's runs and events (``refuse_active``) and record it as deleted
        at ``t``, serialized with ``start_run``; the deleted run ids."""
        ...

    async def secret(self, name: str, fresh: bytes) -> bytes:
        """The stored secret ``name``, stored as ``fresh`` if absent."""
        ...


class SQLEventLog(SQLUserStore, BaseEventLog):
    """An ``EventLog`` and ``UserStore`` over ``db`` (single statements) and the transactions
    of ``runs`` and ``users``. Up to ``in_flight`` group commits run at once."""

    def __init__(
        self,
        db: Queries,
        runs: RunTables,
        users: UserTables,
        *,
        clock: Callable[[], float],
        poll_interval: float,
        in_flight: int,
    ) -> None:
        super().__init__(db, users, clock)
        self.poll_interval = poll_interval
        self._run_tables = runs
        self._tail = LiveTail()
        self._owners = OwnerCache()
        self._commits = GroupCommit(self._commit, in_flight)

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abstractmethod
    async def _open(self) -> None:
        """Connect (and migrate) now rather than on the first call."""

    def _follow_interval(self, timeout: float) -> float:
        """How long a reader of a run held elsewhere waits before it reads again."""
        return self.poll_interval

    # -- runs: the hooks --------------------------------------------------------------------
    async def _start_run(self, start: Start) -> None:
        await self._run_tables.start_run(start)
        self._owners.put(start.record.run_id, start.record.owner)

    async def _append(self, item: Append) -> int:
        """Appends of concurrent runs are committed together (group commit): one transaction
        carries whatever arrived while the previous one committed."""
        return await self._commits.submit(item)

    async def _commit(self, batch: list[Append]) -> Sequence[int | BaseException]:
        return await self._run_tables.append_batch(batch, self._clock())

    async def _take_over(self, run_id: str, change: TakeOver, t: float) -> RunRecord | None:
        return await self._run_tables.take_over(run_id, change, t)

    async def _request_cancel(self, owner: str, run_id: str) -> RunRecord | None:
        return await self._run_tables.request_cancel(owner, run_id, self._clock())

    async def _get_run(self, owner: str, run_id: str) -> RunRecord | None:
        row = await self._db.one(sql.OWNED_RUN, (run_id, owner))
        if row is None:
            return None
        self._owners.put(run_id, owner)
        return to_record(row)

    async def _delete_runs(self, owner: str, conversation_id: str) -> int:
        deleted = await self._run_tables.delete_runs(owner, conversation_id, self._clock())
        self._owners.drop(deleted)
        return len(deleted)

    # -- runs: the reads --------------------------------------------------------------------
    async def cancel_requests(self, process_id: str) -> list[str]:
        """See ``EventLog.cancel_requests``."""
        rows = await self._db.all(
            "SELECT run_id FROM tether_serve_runs WHERE status = 'running' AND process_id = ? "
            "AND cancel_requested_at IS NOT NULL",
            (process_id,),
        )
        return [r[0] for r in rows]

    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]:
        """See ``EventLog.runs``."""
        where = f" AND status IN {sql.ACTIVE_SQL}" if active_only else ""
        rows = await self._db.all(
            f"SELECT {sql.RUN_COLUMNS} FROM tether_serve_runs WHERE owner = ? AND conversation_id = ?{where} "
            "ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (owner, conversation_id, limit),
        )
        return [to_record(r) for r in rows]

    async def active_count(self, owner: str) -> int:
        """See ``EventLog.active_count``."""
        row = await self._db.one(
            f"SELECT COUNT(*) FROM tether_serve_runs WHERE owner = ? AND status IN {sql.ACTIVE_SQL}", (owner,)
        )
        return int(row[0]) if row is not None else 0

    async def active_runs(self) -> list[RunRecord]:
        """See ``EventLog.active_runs``."""
        rows = await self._db.all(
            f"SELECT {sql.RUN_COLUMNS} FROM tether_serve_runs WHERE status = 'running' ORDER BY created_at"
        )
        return [to_record(r) for r in rows]

    # -- events -----------------------------------------------------------------------------
    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        """See ``EventLog.read``. The events of a run this process appends come from memory."""
        known = self._owners.get(run_id)
        if known is not None and known != owner:
            raise run_not_found(run_id)
        if known is not None:
            cached = self._tail.cached(run_id, after_seq, limit)
            if cached is not None:
                return cached
        events = await self._run_tables.read(None if known is not None else owner, run_id, after_seq, limit)
        self._owners.put(run_id, owner)
        return events

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """See ``EventLog.wait``: woken at once for runs of this process; for runs of another
        process, True after ``_follow_interval`` (read to know)."""
        if self._tail.is_local(run_id) or timeout <= self.poll_interval:
            return await self._tail.wait(run_id, after_seq, timeout)
        await self._tail.wait(run_id, after_seq, self._follow_interval(timeout))
        return True

    # -- processes and secrets ------------------------------------------------------------------
    async def _heartbeat(self, process_id: str, host: str, pid: int, t: float) -> None:
        await self._db.execute(
            "INSERT INTO tether_serve_processes (process_id, host, pid, started_at, heartbeat_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (process_id) DO UPDATE SET "
            "heartbeat_at = excluded.heartbeat_at",
            (process_id, host, pid, t, t),
        )

    async def processes(self) -> list[ProcessInfo]:
        """See ``EventLog.processes``."""
        rows = await self._db.all(
            "SELECT process_id, host, pid, started_at, heartbeat_at FROM tether_serve_processes"
        )
        return [ProcessInfo(p, h, int(pid), float(s), float(b)) for p, h, pid, s, b in rows]

    async def forget_process(self, process_id: str) -> None:
        """See ``EventLog.forget_process``."""
        await self._db.execute("DELETE FROM tether_serve_processes WHERE process_id = ?", (process_id,))

    async def _secret(self, name: str, fresh: bytes) -> bytes:
        return await self._run_tables.secret(name, fresh)
