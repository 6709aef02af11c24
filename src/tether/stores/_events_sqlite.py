"""``SQLiteEventLog``: the service's runs, events, processes and users in a SQLite file.

The same file as the ``SQLiteStore`` (its own connection and thread). Processes of one machine
share it: a reader of a run appended by this process is woken at once (``LiveTail``); a reader of
a run appended by another process polls the events table every ``poll_interval`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Self

from tether.errors import ConflictError, NotFound, TetherError
from tether.stores._common import check_id, now, to_datetime
from tether.stores._events import (
    ACTIVE,
    LiveTail,
    LoggedEvent,
    ProcessInfo,
    RunRecord,
    RunStatus,
    busy,
    run_not_found,
)
from tether.stores._events_common import (
    ACTIVE_SQL,
    RUN_COLUMNS,
    Append,
    OwnerCache,
    check_events,
    check_run_args,
    check_status,
    not_held,
    settle,
    to_record,
    to_user,
)
from tether.stores._events_migrations import FAMILY, SQLITE
from tether.stores._sqlite_db import SQLiteThread, apply_migrations, write
from tether.stores._users import (
    UserInfo,
    check_user_name,
    new_token,
    token_digest,
    token_matches,
    well_formed,
)

__all__ = ["SQLiteEventLog"]


class SQLiteEventLog:
    """An ``EventLog`` and ``UserStore`` in the SQLite file at ``path`` (tables made on first use)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        poll_interval: float = 0.05,
        clock: Callable[[], float] = now,
    ) -> None:
        self.path = os.fspath(path)
        self.poll_interval = poll_interval
        self._clock = clock
        self._db = SQLiteThread(
            self.path,
            lambda: _connect(self.path, busy_timeout),
            name="tether-sqlite-events",
            label="SQLiteEventLog",
        )
        self._tail = LiveTail()
        self._owners = OwnerCache()
        self._appends: list[Append] = []
        self._committing = False
        self._commit_task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        await self._db.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- runs -------------------------------------------------------------------------------
    async def start_run(
        self, owner: str, conversation_id: str, run_id: str, process_id: str, event: bytes
    ) -> RunRecord:
        """See ``EventLog.start_run``."""
        check_run_args(owner, conversation_id, run_id, process_id)
        check_events([event])
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> RunRecord:
            active = conn.execute(
                f"SELECT run_id FROM tether_serve_runs WHERE owner = ? AND conversation_id = ? "
                f"AND status IN {ACTIVE_SQL}",
                (owner, conversation_id),
            ).fetchone()
            if active is not None:
                raise busy(conversation_id, active[0])
            try:
                conn.execute(
                    f"INSERT INTO tether_serve_runs ({RUN_COLUMNS}) VALUES (?, ?, ?, "
                    "'running', ?, ?, 1, ?, NULL, NULL)",
                    (run_id, owner, conversation_id, t, t, process_id),
                )
            except sqlite3.IntegrityError:
                raise ConflictError(f"run id {run_id!r} is taken", expected=0, actual=1) from None
            conn.execute(
                "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (?, 1, ?, ?)",
                (run_id, t, event),
            )
            return RunRecord(run_id, owner, conversation_id, "running", *_times(t), 1, process_id)

        record = await self._db.write(tx)
        self._owners.put(run_id, owner)
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
        """See ``EventLog.append``. Appends of concurrent runs are committed together (group
        commit): one transaction carries whatever arrived while the previous one committed."""
        check_events(events)
        if status is not None:
            check_status(status)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._appends.append(Append(run_id, process_id, list(events), status, pause_id, pause, future))
        if not self._committing:
            self._committing = True
            self._commit_task = asyncio.get_running_loop().create_task(self._commit_appends())
        last = await future
        logged = [LoggedEvent(last + 1 + i, data) for i, data in enumerate(events)]
        self._tail.publish(run_id, logged, local=True, final=status not in (None, "running"))
        return last + len(events)

    async def _commit_appends(self) -> None:
        try:
            while self._appends:
                batch, self._appends = self._appends, []
                t = self._clock()

                def tx(
                    conn: sqlite3.Connection, batch: list[Append] = batch, t: float = t
                ) -> list[int | TetherError]:
                    return [_append_one(conn, item, t) for item in batch]

                try:
                    outcomes = await self._db.write(tx)
                except Exception as exc:  # the transaction failed: every append of it did
                    settle(batch, [exc] * len(batch))
                    continue
                settle(batch, outcomes)
        finally:
            self._committing = False

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
        check_status(from_status)
        check_status(to_status)
        check_events([event])
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                return None
            before = to_record(row)
            if (
                before.status != from_status
                or (holder is not None and before.process_id != holder)
                or (pause_id is not None and before.pause_id != pause_id)
            ):
                return None
            seq = before.last_seq + 1
            conn.execute(
                "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (?, ?, ?, ?)",
                (run_id, seq, t, event),
            )
            conn.execute(
                "UPDATE tether_serve_runs SET status = ?, process_id = ?, pause_id = NULL, pause = NULL, "
                "cancel_requested_at = NULL, last_seq = ?, updated_at = ? WHERE run_id = ?",
                (to_status, process_id if process_id is not None else before.process_id, seq, t, run_id),
            )
            return before

        before = await self._db.write(tx)
        if before is not None:
            running = to_status == "running"
            self._tail.publish(
                run_id,
                [LoggedEvent(before.last_seq + 1, event)],
                local=running and process_id is not None,
                final=not running,
            )
        return before

    async def request_cancel(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.request_cancel``."""
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> RunRecord:
            conn.execute(
                "UPDATE tether_serve_runs SET cancel_requested_at = ? WHERE run_id = ? AND owner = ? "
                "AND status = 'running' AND cancel_requested_at IS NULL",
                (t, run_id, owner),
            )
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = ? AND owner = ?", (run_id, owner)
            ).fetchone()
            if row is None:
                raise run_not_found(run_id)
            return to_record(row)

        return await self._db.write(tx)

    async def cancel_requests(self, process_id: str) -> list[str]:
        """See ``EventLog.cancel_requests``."""

        def read(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT run_id FROM tether_serve_runs WHERE status = 'running' AND process_id = ? "
                "AND cancel_requested_at IS NOT NULL",
                (process_id,),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._db.read(read)

    async def get_run(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.get_run``."""
        check_id(owner, "owner")
        check_id(run_id, "run_id")

        def read(conn: sqlite3.Connection) -> RunRecord:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = ? AND owner = ?", (run_id, owner)
            ).fetchone()
            if row is None:
                raise run_not_found(run_id)
            return to_record(row)

        record = await self._db.read(read)
        self._owners.put(run_id, owner)
        return record

    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]:
        """See ``EventLog.runs``."""
        where = f" AND status IN {ACTIVE_SQL}" if active_only else ""

        def read(conn: sqlite3.Connection) -> list[RunRecord]:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE owner = ? AND conversation_id = ?{where} "
                "ORDER BY created_at DESC, run_id DESC LIMIT ?",
                (owner, conversation_id, limit),
            ).fetchall()
            return [to_record(r) for r in rows]

        return await self._db.read(read)

    async def active_count(self, owner: str) -> int:
        """See ``EventLog.active_count``."""

        def read(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                f"SELECT COUNT(*) FROM tether_serve_runs WHERE owner = ? AND status IN {ACTIVE_SQL}", (owner,)
            ).fetchone()
            return int(row[0])

        return await self._db.read(read)

    async def active_runs(self) -> list[RunRecord]:
        """See ``EventLog.active_runs``."""

        def read(conn: sqlite3.Connection) -> list[RunRecord]:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE status = 'running' ORDER BY created_at"
            ).fetchall()
            return [to_record(r) for r in rows]

        return await self._db.read(read)

    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        """See ``EventLog.read``."""
        known = self._owners.get(run_id)
        if known is not None and known != owner:
            raise run_not_found(run_id)
        if known is not None:
            cached = self._tail.cached(run_id, after_seq, limit)
            if cached is not None:
                return cached

        def read(conn: sqlite3.Connection) -> list[LoggedEvent]:
            if known is None:
                row = conn.execute(
                    "SELECT 1 FROM tether_serve_runs WHERE run_id = ? AND owner = ?", (run_id, owner)
                ).fetchone()
                if row is None:
                    raise run_not_found(run_id)
            rows = conn.execute(
                "SELECT seq, data FROM tether_serve_events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                (run_id, after_seq, limit),
            ).fetchall()
            return [LoggedEvent(int(seq), bytes(data)) for seq, data in rows]

        events = await self._db.read(read)
        self._owners.put(run_id, owner)
        return events

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """See ``EventLog.wait``: woken at once for runs of this process, else polling."""
        if self._tail.is_local(run_id) or timeout <= self.poll_interval:
            return await self._tail.wait(run_id, after_seq, timeout)
        await self._tail.wait(run_id, after_seq, self.poll_interval)
        return True

    async def delete_runs(self, owner: str, conversation_id: str) -> int:
        """See ``EventLog.delete_runs``."""

        def tx(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT run_id, status FROM tether_serve_runs WHERE owner = ? AND conversation_id = ?",
                (owner, conversation_id),
            ).fetchall()
            active = [r for r, s in rows if s in ACTIVE]
            if active:
                raise busy(conversation_id, active[0])
            ids = [(r,) for r, _ in rows]
            conn.executemany("DELETE FROM tether_serve_events WHERE run_id = ?", ids)
            conn.executemany("DELETE FROM tether_serve_runs WHERE run_id = ?", ids)
            return [r for r, _ in rows]

        deleted = await self._db.write(tx)
        self._owners.drop(deleted)
        return len(deleted)

    # -- processes and secrets ------------------------------------------------------------------
    async def heartbeat(self, process_id: str, host: str, pid: int) -> None:
        """See ``EventLog.heartbeat``."""
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO tether_serve_processes (process_id, host, pid, started_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (process_id) DO UPDATE SET "
                "heartbeat_at = excluded.heartbeat_at",
                (process_id, host, pid, t, t),
            )

        await self._db.write(tx)

    async def processes(self) -> list[ProcessInfo]:
        """See ``EventLog.processes``."""

        def read(conn: sqlite3.Connection) -> list[ProcessInfo]:
            rows = conn.execute(
                "SELECT process_id, host, pid, started_at, heartbeat_at FROM tether_serve_processes"
            ).fetchall()
            return [ProcessInfo(p, h, int(pid), float(s), float(b)) for p, h, pid, s, b in rows]

        return await self._db.read(read)

    async def forget_process(self, process_id: str) -> None:
        """See ``EventLog.forget_process``."""

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM tether_serve_processes WHERE process_id = ?", (process_id,))

        await self._db.write(tx)

    async def secret(self, name: str, size: int = 32) -> bytes:
        """See ``EventLog.secret``."""
        fresh = secrets.token_bytes(size)

        def tx(conn: sqlite3.Connection) -> bytes:
            conn.execute(
                "INSERT INTO tether_serve_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (name, fresh),
            )
            return bytes(
                conn.execute("SELECT value FROM tether_serve_secrets WHERE name = ?", (name,)).fetchone()[0]
            )

        return await self._db.write(tx)

    # -- users --------------------------------------------------------------------------------
    async def add_user(self, name: str) -> str:
        """See ``UserStore.add_user``."""
        check_user_name(name)
        token = new_token()
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM tether_serve_users WHERE name = ?", (name,)).fetchone():
                raise ConflictError(f"user {name!r} exists (names are never reused)", expected=0, actual=1)
            conn.execute("INSERT INTO tether_serve_users (name, created_at) VALUES (?, ?)", (name, t))
            conn.execute(
                "INSERT INTO tether_serve_tokens (digest, name, created_at) VALUES (?, ?, ?)",
                (token_digest(token), name, t),
            )

        await self._db.write(tx)
        return token

    async def add_token(self, name: str) -> str:
        """See ``UserStore.add_token``."""
        check_user_name(name)
        token = new_token()
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT 1 FROM tether_serve_users WHERE name = ? AND revoked_at IS NULL", (name,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no active user {name!r}")
            conn.execute(
                "INSERT INTO tether_serve_tokens (digest, name, created_at) VALUES (?, ?, ?)",
                (token_digest(token), name, t),
            )

        await self._db.write(tx)
        return token

    async def revoke_user(self, name: str) -> None:
        """See ``UserStore.revoke_user``."""
        t = self._clock()

        def tx(conn: sqlite3.Connection) -> None:
            found = conn.execute(
                "UPDATE tether_serve_users SET revoked_at = COALESCE(revoked_at, ?) WHERE name = ?", (t, name)
            ).rowcount
            if not found:
                raise NotFound(f"no user {name!r}")
            conn.execute(
                "UPDATE tether_serve_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
                (t, name),
            )

        await self._db.write(tx)

    async def users(self) -> list[UserInfo]:
        """See ``UserStore.users``."""

        def read(conn: sqlite3.Connection) -> list[UserInfo]:
            rows = conn.execute(
                "SELECT u.name, u.created_at, u.revoked_at, "
                "(SELECT COUNT(*) FROM tether_serve_tokens t WHERE t.name = u.name AND t.revoked_at IS NULL) "
                "FROM tether_serve_users u ORDER BY u.name"
            ).fetchall()
            return [to_user(r) for r in rows]

        return await self._db.read(read)

    async def authenticate(self, token: str) -> str | None:
        """See ``UserStore.authenticate``."""
        if not isinstance(token, str) or not well_formed(token):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        digest = token_digest(token)

        def read(conn: sqlite3.Connection) -> tuple[str, str] | None:
            return conn.execute(
                "SELECT t.digest, t.name FROM tether_serve_tokens t JOIN "
                "tether_serve_users u ON u.name = t.name "
                "WHERE t.digest = ? AND t.revoked_at IS NULL AND u.revoked_at IS NULL",
                (digest,),
            ).fetchone()

        row = await self._db.read(read)
        if row is None or not token_matches(token, row[0]):
            return None
        return row[1]

    async def close(self) -> None:
        """Close the connection and its thread. Idempotent."""
        await self._db.close()


def _append_one(conn: sqlite3.Connection, item: Append, t: float) -> int | TetherError:
    """One run's append inside a group transaction: its last seq before, or why it was refused
    (nothing of it written)."""
    row = conn.execute(
        "SELECT status, process_id, last_seq FROM tether_serve_runs WHERE run_id = ?", (item.run_id,)
    ).fetchone()
    if row is None:
        return run_not_found(item.run_id)
    current, holder, last = row
    if current != "running" or holder != item.process_id:
        return not_held(item.run_id, current, holder, item.process_id)
    conn.executemany(
        "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (?, ?, ?, ?)",
        [(item.run_id, last + 1 + i, t, data) for i, data in enumerate(item.events)],
    )
    paused = item.status == "paused"
    conn.execute(
        "UPDATE tether_serve_runs SET last_seq = ?, updated_at = ?, status = ?, pause_id = ?, pause = ? "
        "WHERE run_id = ?",
        (
            last + len(item.events),
            t,
            item.status or current,
            item.pause_id if paused else None,
            item.pause if paused else None,
            item.run_id,
        ),
    )
    return int(last)


def _times(t: float) -> tuple[datetime, datetime]:
    return to_datetime(t), to_datetime(t)


def _connect(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, the ``serve_``
    migrations applied."""
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        write(conn, lambda c: apply_migrations(c, SQLITE, family=FAMILY))
    except BaseException:
        conn.close()
        raise
    return conn
