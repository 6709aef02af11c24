"""``PostgresEventLog``: the service's runs, events, processes and users in PostgreSQL, shared
by every service process of one database.

Live events cross processes through ``LISTEN/NOTIFY`` (``_events_listen.py``): an append notifies
channel ``tether_serve_events`` with the run id in the same transaction (delivered on commit), and
each process's listener connection wakes its readers of that run, which then read the table. With
``notify="poll"`` readers poll the table every ``poll_interval`` seconds instead (bench/serve.py
measures both). A listener that loses its connection falls back to polling until it reconnects.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Self

from tether.errors import ConflictError, MissingExtra, NotFound, StoreError
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
from tether.stores._events_migrations import FAMILY, POSTGRES
from tether.stores._users import (
    UserInfo,
    check_user_name,
    new_token,
    token_digest,
    token_matches,
    well_formed,
)

try:  # the PostgreSQL modules import psycopg and psycopg_pool
    from tether.stores._events_listen import CHANNEL, Listener, payload
    from tether.stores._postgres_db import Conn, PostgresPool, apply_migrations, qmark
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("PostgresEventLog", "postgres", "psycopg[binary] psycopg-pool") from exc

__all__ = ["CHANNEL", "PostgresEventLog"]

_IN_FLIGHT = 4
"""Group commits running at once (each on its own pooled connection)."""

# a group commit in one statement; the event appends commit asynchronously (like SQLite's
# synchronous=NORMAL: safe when a service process dies; a crash of the database server itself may
# lose the last fraction of a second of events)
_APPEND_BATCH = """
WITH input AS (
    SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[], %s::text[], %s::text[], %s::bytea[])
        AS i(run_id, process_id, n, new_status, pause_id, pause)
), locked AS (
    SELECT r.run_id, r.last_seq, i.n, i.new_status, i.pause_id, i.pause
    FROM tether_serve_runs r JOIN input i ON r.run_id = i.run_id
    WHERE r.status = 'running' AND r.process_id = i.process_id
    FOR UPDATE OF r
), inserted AS (
    INSERT INTO tether_serve_events (run_id, seq, created_at, data)
    SELECT e.run_id, l.last_seq + e.k, %s, e.data
    FROM unnest(%s::text[], %s::bigint[], %s::bytea[]) AS e(run_id, k, data)
    JOIN locked l ON l.run_id = e.run_id
), updated AS (
    UPDATE tether_serve_runs r SET last_seq = l.last_seq + l.n, updated_at = %s,
        status = COALESCE(l.new_status, r.status), pause_id = l.pause_id, pause = l.pause
    FROM locked l WHERE r.run_id = l.run_id
)
SELECT l.run_id, l.last_seq,
    (SELECT set_config('synchronous_commit', 'off', true)),
    (SELECT pg_notify(%s, %s) WHERE %s)
FROM locked l
"""


class PostgresEventLog:
    """An ``EventLog`` and ``UserStore`` in PostgreSQL (tables made on first use, in ``schema``
    when given). ``notify``: ``"listen"`` (LISTEN/NOTIFY) or ``"poll"``."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        notify: Literal["listen", "poll"] | str = "listen",
        poll_interval: float = 0.05,
        min_size: int = 1,
        max_size: int = 10,
        open_timeout: float = 30.0,
        clock: Callable[[], float] = now,
    ) -> None:
        if schema is not None:
            check_id(schema, "schema")
        if notify not in ("listen", "poll"):
            raise StoreError(f"notify must be 'listen' or 'poll', not {notify!r}")
        self.schema = schema
        self.notify = notify
        self.poll_interval = poll_interval
        self._clock = clock
        self._pool = PostgresPool(
            dsn,
            schema=schema,
            label="PostgresEventLog",
            migrate=self._migrate,
            opened=self._listen if notify == "listen" else None,
            min_size=min_size,
            max_size=max_size,
            open_timeout=open_timeout,
        )
        self._tail = LiveTail()
        self._owners = OwnerCache()
        self._listener = Listener(dsn, self._tail)
        self._appends: list[Append] = []
        self._committing = 0
        self._commit_tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        await self._pool.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plumbing ---------------------------------------------------------------------------
    async def _migrate(self, conn: Conn) -> None:
        """Apply the missing ``serve_`` migrations in one transaction under the store's advisory lock."""
        async with conn.transaction():
            await apply_migrations(conn, self.schema, POSTGRES, family=FAMILY)

    def _listen(self) -> None:
        self._listener.start()

    def _tx(self) -> AbstractAsyncContextManager[Conn]:
        return self._pool.tx(unique=True)

    async def _one(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        async with self._tx() as conn:
            cursor = await conn.execute(qmark(query), params)
            return await cursor.fetchone()

    async def _all(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._tx() as conn:
            cursor = await conn.execute(qmark(query), params)
            return await cursor.fetchall()

    # -- runs -------------------------------------------------------------------------------
    async def start_run(
        self, owner: str, conversation_id: str, run_id: str, process_id: str, event: bytes
    ) -> RunRecord:
        """See ``EventLog.start_run``."""
        check_run_args(owner, conversation_id, run_id, process_id)
        check_events([event])
        t = self._clock()
        try:
            async with self._tx() as conn:
                await conn.execute(
                    qmark(
                        f"INSERT INTO tether_serve_runs ({RUN_COLUMNS}) "
                        "VALUES (?, ?, ?, 'running', ?, ?, 1, ?, NULL, NULL)"
                    ),
                    (run_id, owner, conversation_id, t, t, process_id),
                )
                await conn.execute(
                    qmark(
                        "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (?, 1, ?, ?)"
                    ),
                    (run_id, t, event),
                )
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))
        except ConflictError:
            active = await self.runs(owner, conversation_id, limit=1, active_only=True)
            raise busy(conversation_id, active[0].run_id if active else None) from None
        self._owners.put(run_id, owner)
        self._tail.publish(run_id, [LoggedEvent(1, event)], local=True, final=False)
        return RunRecord(
            run_id, owner, conversation_id, "running", to_datetime(t), to_datetime(t), 1, process_id
        )

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
        commit): one transaction, and one notification, for whatever arrived meanwhile."""
        check_events(events)
        if status is not None:
            check_status(status)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._appends.append(Append(run_id, process_id, list(events), status, pause_id, pause, future))
        if self._committing < _IN_FLIGHT:
            self._committing += 1
            task = loop.create_task(self._commit_appends())
            self._commit_tasks.add(task)
            task.add_done_callback(self._commit_tasks.discard)
        last = await future
        logged = [LoggedEvent(last + 1 + i, data) for i, data in enumerate(events)]
        self._tail.publish(run_id, logged, local=True, final=status not in (None, "running"))
        return last + len(events)

    async def _commit_appends(self) -> None:
        """One of up to ``_IN_FLIGHT`` concurrent committers: each takes whatever is waiting. A
        run has one append in flight at a time, so two batches never hold the same run."""
        try:
            while self._appends:
                batch, self._appends = self._appends, []
                try:
                    outcomes = await self._append_batch(batch)
                except Exception as exc:  # the transaction failed: every append of it did
                    settle(batch, [exc] * len(batch))
                    continue
                settle(batch, outcomes)
        finally:
            self._committing -= 1

    async def _append_batch(self, batch: list[Append]) -> list[int | Exception]:
        """One statement (one round trip, its own transaction) appends the whole batch: lock the
        runs that are running and held by the appending process, insert their events numbered
        after ``last_seq``, move ``last_seq`` and the status, notify. A run it did not lock was
        refused; a second query says why."""
        unique: list[Append] = []
        seen: set[str] = set()
        for item in batch:  # a run appears once per statement (its writer awaits each append)
            if item.run_id in seen:
                break
            seen.add(item.run_id)
            unique.append(item)
        rest = batch[len(unique) :]
        t = self._clock()
        runs = [item.run_id for item in unique]
        event_runs = [item.run_id for item in unique for _ in item.events]
        ks = [k for item in unique for k in range(1, len(item.events) + 1)]
        datas = [data for item in unique for data in item.events]
        paused = [item.status == "paused" for item in unique]
        params = (
            runs,
            [item.process_id for item in unique],
            [len(item.events) for item in unique],
            [item.status for item in unique],
            [item.pause_id if p else None for item, p in zip(unique, paused, strict=True)],
            [item.pause if p else None for item, p in zip(unique, paused, strict=True)],
            t,
            event_runs,
            ks,
            datas,
            t,
            CHANNEL,
            payload(runs),
            self.notify == "listen",
        )
        async with self._pool.tx(single=True) as conn:
            cursor = await conn.execute(_APPEND_BATCH, params)
            done = {str(r[0]): int(r[1]) for r in await cursor.fetchall()}
            missing = [r for r in runs if r not in done]
            why: dict[str, tuple[str, str | None]] = {}
            if missing:
                cursor = await conn.execute(
                    "SELECT run_id, status, process_id FROM tether_serve_runs WHERE run_id = ANY(%s)",
                    (missing,),
                )
                why = {str(r[0]): (str(r[1]), r[2]) for r in await cursor.fetchall()}
        outcomes: list[int | Exception] = []
        for item in unique:
            if item.run_id in done:
                outcomes.append(done[item.run_id])
            elif item.run_id in why:
                status, holder = why[item.run_id]
                outcomes.append(not_held(item.run_id, status, holder, item.process_id))
            else:
                outcomes.append(run_not_found(item.run_id))
        if rest:
            outcomes += await self._append_batch(rest)
        return outcomes

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
        async with self._tx() as conn:
            cursor = await conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = %s FOR UPDATE", (run_id,)
            )
            row = await cursor.fetchone()
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
            await conn.execute(
                "INSERT INTO tether_serve_events (run_id, seq, created_at, data) VALUES (%s, %s, %s, %s)",
                (run_id, seq, t, event),
            )
            await conn.execute(
                "UPDATE tether_serve_runs SET status = %s, process_id = %s, pause_id = NULL, pause = NULL, "
                "cancel_requested_at = NULL, last_seq = %s, updated_at = %s WHERE run_id = %s",
                (to_status, process_id if process_id is not None else before.process_id, seq, t, run_id),
            )
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))
        running = to_status == "running"
        self._tail.publish(
            run_id, [LoggedEvent(seq, event)], local=running and process_id is not None, final=not running
        )
        return before

    async def request_cancel(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.request_cancel``."""
        t = self._clock()
        async with self._tx() as conn:
            await conn.execute(
                "UPDATE tether_serve_runs SET cancel_requested_at = %s WHERE run_id = %s AND owner = %s "
                "AND status = 'running' AND cancel_requested_at IS NULL",
                (t, run_id, owner),
            )
            cursor = await conn.execute(
                f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = %s AND owner = %s",
                (run_id, owner),
            )
            row = await cursor.fetchone()
        if row is None:
            raise run_not_found(run_id)
        return to_record(row)

    async def cancel_requests(self, process_id: str) -> list[str]:
        """See ``EventLog.cancel_requests``."""
        rows = await self._all(
            "SELECT run_id FROM tether_serve_runs WHERE status = 'running' AND process_id = ? "
            "AND cancel_requested_at IS NOT NULL",
            (process_id,),
        )
        return [r[0] for r in rows]

    async def get_run(self, owner: str, run_id: str) -> RunRecord:
        """See ``EventLog.get_run``."""
        check_id(owner, "owner")
        check_id(run_id, "run_id")
        row = await self._one(
            f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE run_id = ? AND owner = ?", (run_id, owner)
        )
        if row is None:
            raise run_not_found(run_id)
        self._owners.put(run_id, owner)
        return to_record(row)

    async def runs(
        self, owner: str, conversation_id: str, *, limit: int = 50, active_only: bool = False
    ) -> list[RunRecord]:
        """See ``EventLog.runs``."""
        where = f" AND status IN {ACTIVE_SQL}" if active_only else ""
        rows = await self._all(
            f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE owner = ? AND conversation_id = ?{where} "
            "ORDER BY created_at DESC, run_id DESC LIMIT ?",
            (owner, conversation_id, limit),
        )
        return [to_record(r) for r in rows]

    async def active_count(self, owner: str) -> int:
        """See ``EventLog.active_count``."""
        row = await self._one(
            f"SELECT COUNT(*) FROM tether_serve_runs WHERE owner = ? AND status IN {ACTIVE_SQL}", (owner,)
        )
        return int(row[0]) if row is not None else 0

    async def active_runs(self) -> list[RunRecord]:
        """See ``EventLog.active_runs``."""
        rows = await self._all(
            f"SELECT {RUN_COLUMNS} FROM tether_serve_runs WHERE status = 'running' ORDER BY created_at"
        )
        return [to_record(r) for r in rows]

    async def read(self, owner: str, run_id: str, after_seq: int = 0, limit: int = 500) -> list[LoggedEvent]:
        """See ``EventLog.read``."""
        known = self._owners.get(run_id)
        if known is not None and known != owner:
            raise run_not_found(run_id)
        if known is not None:
            cached = self._tail.cached(run_id, after_seq, limit)
            if cached is not None:
                return cached
        async with self._pool.tx(single=True) as conn:  # no transaction
            if known is None:
                cursor = await conn.execute(
                    "SELECT 1 FROM tether_serve_runs WHERE run_id = %s AND owner = %s", (run_id, owner)
                )
                if await cursor.fetchone() is None:
                    raise run_not_found(run_id)
            cursor = await conn.execute(
                "SELECT seq, data FROM tether_serve_events WHERE run_id = %s AND seq > %s "
                "ORDER BY seq LIMIT %s",
                (run_id, after_seq, limit),
            )
            rows = await cursor.fetchall()
        self._owners.put(run_id, owner)
        return [LoggedEvent(int(seq), bytes(data)) for seq, data in rows]

    async def wait(self, run_id: str, after_seq: int, timeout: float) -> bool:
        """See ``EventLog.wait``: notifications wake readers of any process's runs; without a
        listener (``notify="poll"``, or while it reconnects) readers poll."""
        if self._tail.is_local(run_id) or timeout <= self.poll_interval:
            return await self._tail.wait(run_id, after_seq, timeout)
        if self._listener.listening:
            # a notification wakes us; the periodic re-read covers a notification sent while the
            # reader was between its read and this wait
            await self._tail.wait(run_id, after_seq, min(timeout, 1.0))
            return True
        await self._tail.wait(run_id, after_seq, self.poll_interval)
        return True

    async def delete_runs(self, owner: str, conversation_id: str) -> int:
        """See ``EventLog.delete_runs``."""
        async with self._tx() as conn:
            cursor = await conn.execute(
                "SELECT run_id, status FROM tether_serve_runs WHERE owner = %s AND "
                "conversation_id = %s FOR UPDATE",
                (owner, conversation_id),
            )
            rows = await cursor.fetchall()
            active = [r for r, s in rows if s in ACTIVE]
            if active:
                raise busy(conversation_id, active[0])
            ids = [r for r, _ in rows]
            await conn.execute("DELETE FROM tether_serve_events WHERE run_id = ANY(%s)", (ids,))
            await conn.execute("DELETE FROM tether_serve_runs WHERE run_id = ANY(%s)", (ids,))
        self._owners.drop(ids)
        return len(ids)

    # -- processes and secrets ------------------------------------------------------------------
    async def heartbeat(self, process_id: str, host: str, pid: int) -> None:
        """See ``EventLog.heartbeat``."""
        t = self._clock()
        async with self._tx() as conn:
            await conn.execute(
                "INSERT INTO tether_serve_processes (process_id, host, pid, started_at, heartbeat_at) "
                "VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (process_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
                (process_id, host, pid, t, t),
            )

    async def processes(self) -> list[ProcessInfo]:
        """See ``EventLog.processes``."""
        rows = await self._all(
            "SELECT process_id, host, pid, started_at, heartbeat_at FROM tether_serve_processes"
        )
        return [ProcessInfo(p, h, int(pid), float(s), float(b)) for p, h, pid, s, b in rows]

    async def forget_process(self, process_id: str) -> None:
        """See ``EventLog.forget_process``."""
        async with self._tx() as conn:
            await conn.execute("DELETE FROM tether_serve_processes WHERE process_id = %s", (process_id,))

    async def secret(self, name: str, size: int = 32) -> bytes:
        """See ``EventLog.secret``."""
        async with self._tx() as conn:
            await conn.execute(
                "INSERT INTO tether_serve_secrets (name, value) VALUES (%s, %s) ON "
                "CONFLICT (name) DO NOTHING",
                (name, secrets.token_bytes(size)),
            )
            cursor = await conn.execute("SELECT value FROM tether_serve_secrets WHERE name = %s", (name,))
            row = await cursor.fetchone()
        assert row is not None
        return bytes(row[0])

    # -- users --------------------------------------------------------------------------------
    async def add_user(self, name: str) -> str:
        """See ``UserStore.add_user``."""
        check_user_name(name)
        token = new_token()
        t = self._clock()
        try:
            async with self._tx() as conn:
                await conn.execute(
                    "INSERT INTO tether_serve_users (name, created_at) VALUES (%s, %s)", (name, t)
                )
                await conn.execute(
                    "INSERT INTO tether_serve_tokens (digest, name, created_at) VALUES (%s, %s, %s)",
                    (token_digest(token), name, t),
                )
        except ConflictError:
            raise ConflictError(
                f"user {name!r} exists (names are never reused)", expected=0, actual=1
            ) from None
        return token

    async def add_token(self, name: str) -> str:
        """See ``UserStore.add_token``."""
        check_user_name(name)
        token = new_token()
        t = self._clock()
        async with self._tx() as conn:
            cursor = await conn.execute(
                "SELECT 1 FROM tether_serve_users WHERE name = %s AND revoked_at IS NULL", (name,)
            )
            if await cursor.fetchone() is None:
                raise NotFound(f"no active user {name!r}")
            await conn.execute(
                "INSERT INTO tether_serve_tokens (digest, name, created_at) VALUES (%s, %s, %s)",
                (token_digest(token), name, t),
            )
        return token

    async def revoke_user(self, name: str) -> None:
        """See ``UserStore.revoke_user``."""
        t = self._clock()
        async with self._tx() as conn:
            cursor = await conn.execute(
                "UPDATE tether_serve_users SET revoked_at = COALESCE(revoked_at, %s) WHERE name = %s",
                (t, name),
            )
            if not cursor.rowcount:
                raise NotFound(f"no user {name!r}")
            await conn.execute(
                "UPDATE tether_serve_tokens SET revoked_at = %s WHERE name = %s AND revoked_at IS NULL",
                (t, name),
            )

    async def users(self) -> list[UserInfo]:
        """See ``UserStore.users``."""
        rows = await self._all(
            "SELECT u.name, u.created_at, u.revoked_at, "
            "(SELECT COUNT(*) FROM tether_serve_tokens t WHERE t.name = u.name AND t.revoked_at IS NULL) "
            "FROM tether_serve_users u ORDER BY u.name"
        )
        return [to_user(r) for r in rows]

    async def authenticate(self, token: str) -> str | None:
        """See ``UserStore.authenticate``."""
        if not isinstance(token, str) or not well_formed(token):  # pyright: ignore[reportUnnecessaryIsInstance]
            return None
        row = await self._one(
            "SELECT t.digest, t.name FROM tether_serve_tokens t JOIN tether_serve_users u ON u.name = t.name "
            "WHERE t.digest = ? AND t.revoked_at IS NULL AND u.revoked_at IS NULL",
            (token_digest(token),),
        )
        if row is None or not token_matches(token, row[0]):
            return None
        return str(row[1])

    async def close(self) -> None:
        """Close the pool and stop the listener. Idempotent."""
        await self._pool.close()
        await self._listener.stop()
