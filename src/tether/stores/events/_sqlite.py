"""``SQLiteEventLog``: the service's runs, events, processes and users in a SQLite file.

The same file as the ``SQLiteStore`` (its own connection and thread). Processes of one machine
share it: a reader of a run appended by this process is woken at once (``LiveTail``); a reader of
a run appended by another process polls the events table every ``poll_interval`` seconds.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence

from tether.errors import TetherError
from tether.stores._common import now
from tether.stores.events import _statements as sql
from tether.stores.events._common import Append, Start, TakeOver, refuse_active, to_record
from tether.stores.events._log import LoggedEvent, RunRecord, run_not_found
from tether.stores.events._migrations import FAMILY, SQLITE
from tether.stores.events._sql import SQLEventLog
from tether.stores.events._users_sqlite import SQLiteUsers
from tether.stores.sqlite._db import SQLiteThread, apply_migrations, enable_wal, write

__all__ = ["SQLiteEventLog"]


class SQLiteEventLog(SQLEventLog):
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
        db = SQLiteThread(
            self.path,
            lambda: _connect(self.path, busy_timeout),
            name="tether-sqlite-events",
            label="SQLiteEventLog",
        )
        self._thread = db
        super().__init__(
            db, _SQLiteRuns(db), SQLiteUsers(db), clock=clock, poll_interval=poll_interval, in_flight=1
        )

    async def _open(self) -> None:
        await self._thread.open()

    async def close(self) -> None:
        """Close the connection and its thread. Idempotent."""
        await self._thread.close()


class _SQLiteRuns:
    """The runs, events and secrets statements, in transactions on ``db``'s thread."""

    def __init__(self, db: SQLiteThread) -> None:
        self._db = db

    async def start_run(self, start: Start) -> None:
        """See ``RunTables.start_run``: the write transaction (``BEGIN IMMEDIATE``) holds the
        database's one write lock from the checks to the insert, whichever process runs it."""
        r = start.record
        t = start.t

        def tx(conn: sqlite3.Connection) -> None:
            deleted = conn.execute(sql.IS_DELETED, (r.owner, r.conversation_id)).fetchone() is not None
            active = conn.execute(sql.ACTIVE_COUNT, (r.owner,)).fetchone()[0] if start.max_active else 0
            busy_run = conn.execute(sql.ACTIVE_RUN, (r.owner, r.conversation_id)).fetchone()
            start.refuse(deleted=deleted, active=active, busy_run=busy_run[0] if busy_run else None)
            try:
                conn.execute(sql.INSERT_RUN, (r.run_id, r.owner, r.conversation_id, t, t, r.process_id))
            except sqlite3.IntegrityError:
                raise start.taken() from None
            conn.execute(sql.INSERT_FIRST_EVENT, (r.run_id, t, start.event))

        await self._db.write(tx)

    async def append_batch(self, batch: list[Append], t: float) -> Sequence[int | BaseException]:
        """See ``RunTables.append_batch``: one transaction, one run after the other."""
        return await self._db.write(lambda conn: [_append_one(conn, item, t) for item in batch])

    async def take_over(self, run_id: str, change: TakeOver, t: float) -> RunRecord | None:
        """See ``RunTables.take_over``."""

        def tx(conn: sqlite3.Connection) -> RunRecord | None:
            before = change.compare(conn.execute(sql.RUN, (run_id,)).fetchone())
            if before is None:
                return None
            seq = before.last_seq + 1
            conn.execute(sql.INSERT_EVENT, (run_id, seq, t, change.event))
            conn.execute(sql.TAKE_OVER, (change.to_status, change.holder_after(before), seq, t, run_id))
            return before

        return await self._db.write(tx)

    async def request_cancel(self, owner: str, run_id: str, t: float) -> RunRecord | None:
        """See ``RunTables.request_cancel``."""

        def tx(conn: sqlite3.Connection) -> RunRecord | None:
            conn.execute(sql.REQUEST_CANCEL, (t, run_id, owner))
            row = conn.execute(sql.OWNED_RUN, (run_id, owner)).fetchone()
            return to_record(row) if row is not None else None

        return await self._db.write(tx)

    async def read(self, owner: str | None, run_id: str, after_seq: int, limit: int) -> list[LoggedEvent]:
        """See ``RunTables.read``: one snapshot."""

        def tx(conn: sqlite3.Connection) -> list[LoggedEvent]:
            if owner is not None and conn.execute(sql.OWNS_RUN, (run_id, owner)).fetchone() is None:
                raise run_not_found(run_id)
            rows = conn.execute(sql.EVENTS_AFTER, (run_id, after_seq, limit)).fetchall()
            return [LoggedEvent(int(seq), bytes(data)) for seq, data in rows]

        return await self._db.read(tx)

    async def delete_runs(self, owner: str, conversation_id: str, t: float) -> list[str]:
        """See ``RunTables.delete_runs``."""

        def tx(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(sql.CONVERSATION_RUNS, (owner, conversation_id)).fetchall()
            ids = refuse_active(conversation_id, rows)
            conn.execute(sql.INSERT_DELETED, (owner, conversation_id, t))
            conn.executemany("DELETE FROM tether_serve_events WHERE run_id = ?", [(r,) for r in ids])
            conn.executemany("DELETE FROM tether_serve_runs WHERE run_id = ?", [(r,) for r in ids])
            return ids

        return await self._db.write(tx)

    async def secret(self, name: str, fresh: bytes) -> bytes:
        """See ``RunTables.secret``."""

        def tx(conn: sqlite3.Connection) -> bytes:
            conn.execute(sql.INSERT_SECRET, (name, fresh))
            return bytes(conn.execute(sql.SECRET, (name,)).fetchone()[0])

        return await self._db.write(tx)


def _append_one(conn: sqlite3.Connection, item: Append, t: float) -> int | TetherError:
    """One run's append inside a group transaction: its last seq before, or why it was refused
    (nothing of it written)."""
    row = conn.execute(
        "SELECT status, process_id, last_seq FROM tether_serve_runs WHERE run_id = ?", (item.run_id,)
    ).fetchone()
    current, holder, last = row if row is not None else (None, None, 0)
    refused = item.refusal(current, holder)
    if refused is not None:
        return refused
    rows = [(item.run_id, last + 1 + i, t, data) for i, data in enumerate(item.events)]
    conn.executemany(sql.INSERT_EVENT, rows)
    conn.execute(
        "UPDATE tether_serve_runs SET last_seq = ?, updated_at = ?, status = ?, pause_id = ?, pause = ? "
        "WHERE run_id = ?",
        (last + len(item.events), t, item.status_after, item.pause_id, item.pause, item.run_id),
    )
    return int(last)


def _connect(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, the ``serve_``
    migrations applied."""
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        enable_wal(conn, busy_timeout)
        conn.execute("PRAGMA synchronous = NORMAL")
        write(conn, lambda c: apply_migrations(c, SQLITE, family=FAMILY))
    except BaseException:
        conn.close()
        raise
    return conn
