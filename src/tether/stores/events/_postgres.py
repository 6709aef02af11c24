"""``PostgresEventLog``: the service's runs, events, processes and users in PostgreSQL, shared
by every service process of one database.

Live events cross processes through ``LISTEN/NOTIFY`` (``_listen.py``): an append notifies
channel ``tether_serve_events`` with the run id in the same transaction (delivered on commit), and
each process's listener connection wakes its readers of that run, which then read the table. With
``notify="poll"`` readers poll the table every ``poll_interval`` seconds instead (bench/serve.py
measures both). A listener that loses its connection falls back to polling until it reconnects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from tether.errors import ConflictError, MissingExtra, StoreError
from tether.stores._common import check_id, now
from tether.stores.events import _statements as sql
from tether.stores.events._common import Append, Row, Start, TakeOver, not_held, refuse_active, to_record
from tether.stores.events._log import ActiveRunLimit, LoggedEvent, RunRecord, busy, run_not_found
from tether.stores.events._migrations import FAMILY, POSTGRES
from tether.stores.events._sql import SQLEventLog

try:  # the PostgreSQL modules import psycopg and psycopg_pool
    from tether.stores.events._listen import CHANNEL, Listener, payload
    from tether.stores.events._users_postgres import PostgresUsers
    from tether.stores.postgres._db import Conn, PostgresPool, apply_migrations, qmark
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("PostgresEventLog", "postgres", "psycopg[binary] psycopg-pool") from exc

__all__ = ["CHANNEL", "PostgresEventLog"]

_OWNER_LOCK = "SELECT pg_advisory_xact_lock(hashtext('tether_serve_runs'), hashtext(%s))"
"""Serializes one owner's run starts and deletes, on every process, until the transaction ends."""

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


class PostgresEventLog(SQLEventLog):
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
        pool = PostgresPool(
            dsn,
            schema=schema,
            label="PostgresEventLog",
            migrate=self._migrate,
            opened=self._listen if notify == "listen" else None,
            min_size=min_size,
            max_size=max_size,
            open_timeout=open_timeout,
        )
        self._pool = pool
        runs = _PostgresRuns(pool, notify == "listen", clock)
        super().__init__(
            runs, runs, PostgresUsers(pool), clock=clock, poll_interval=poll_interval, in_flight=_IN_FLIGHT
        )
        self._listener = Listener(dsn, self._tail)

    async def _migrate(self, conn: Conn) -> None:
        """Apply the missing ``serve_`` migrations in one transaction under the store's advisory lock."""
        async with conn.transaction():
            await apply_migrations(conn, self.schema, POSTGRES, family=FAMILY)

    def _listen(self) -> None:
        self._listener.start()

    async def _open(self) -> None:
        await self._pool.open()

    def _follow_interval(self, timeout: float) -> float:
        """Notifications wake readers of any process's runs; without a listener (``notify="poll"``,
        or while it reconnects) readers poll."""
        if self._listener.listening:
            # a notification wakes us; the periodic re-read covers a notification sent while the
            # reader was between its read and this wait
            return min(timeout, 1.0)
        return self.poll_interval

    async def close(self) -> None:
        """Close the pool and stop the listener. Idempotent."""
        await self._pool.close()
        await self._listener.stop()


class _PostgresRuns:
    """The runs, events and secrets statements, each call one transaction of ``pool`` (and the
    single statements of ``Queries``). ``notify``: appends notify ``CHANNEL``; ``clock`` dates
    the part of a batch that needs a second statement."""

    def __init__(self, pool: PostgresPool, notify: bool, clock: Callable[[], float]) -> None:
        self._pool = pool
        self._notify = notify
        self._clock = clock

    # -- Queries ------------------------------------------------------------------------------
    async def one(self, query: str, params: Sequence[object] = ()) -> Row | None:
        """See ``Queries.one``."""
        async with self._pool.tx(unique=True) as conn:
            cursor = await conn.execute(qmark(query), params)
            return await cursor.fetchone()

    async def all(self, query: str, params: Sequence[object] = ()) -> list[Row]:
        """See ``Queries.all``."""
        async with self._pool.tx(unique=True) as conn:
            cursor = await conn.execute(qmark(query), params)
            return await cursor.fetchall()

    async def execute(self, query: str, params: Sequence[object] = ()) -> None:
        """See ``Queries.execute``."""
        async with self._pool.tx(unique=True) as conn:
            await conn.execute(qmark(query), params)

    # -- RunTables ----------------------------------------------------------------------------
    async def start_run(self, start: Start) -> None:
        """See ``RunTables.start_run``: the owner's advisory lock (taken by every process's
        ``start_run`` and ``delete_runs``) makes the checks and the insert one step; the
        partial unique index refuses a second active run in any case."""
        r = start.record
        t = start.t
        try:
            async with self._pool.tx(unique=True) as conn:
                await conn.execute(_OWNER_LOCK, (r.owner,))
                cursor = await conn.execute(qmark(sql.IS_DELETED), (r.owner, r.conversation_id))
                deleted = await cursor.fetchone() is not None
                active = 0
                if start.max_active and not deleted:
                    cursor = await conn.execute(qmark(sql.ACTIVE_COUNT), (r.owner,))
                    row = await cursor.fetchone()
                    active = int(row[0]) if row is not None else 0
                start.refuse(deleted=deleted, active=active, busy_run=None)
                await conn.execute(
                    qmark(sql.INSERT_RUN), (r.run_id, r.owner, r.conversation_id, t, t, r.process_id)
                )
                await conn.execute(qmark(sql.INSERT_FIRST_EVENT), (r.run_id, t, start.event))
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, r.run_id))
        except ActiveRunLimit:
            raise
        except ConflictError:
            active_run = await self.one(sql.ACTIVE_RUN, (r.owner, r.conversation_id))
            raise busy(r.conversation_id, active_run[0] if active_run is not None else None) from None

    async def append_batch(self, batch: list[Append], t: float) -> Sequence[int | BaseException]:
        """See ``RunTables.append_batch``. One statement (one round trip, its own transaction)
        appends the whole batch: lock the runs that are running and held by the appending
        process, insert their events numbered after ``last_seq``, move ``last_seq`` and the
        status, notify. A run it did not lock was refused; a second query says why."""
        unique: list[Append] = []
        seen: set[str] = set()
        for item in batch:  # a run appears once per statement (its writer awaits each append)
            if item.run_id in seen:
                break
            seen.add(item.run_id)
            unique.append(item)
        rest = batch[len(unique) :]
        runs = [item.run_id for item in unique]
        params = (
            runs,
            [item.process_id for item in unique],
            [len(item.events) for item in unique],
            [item.status for item in unique],
            [item.pause_id for item in unique],
            [item.pause for item in unique],
            t,
            [item.run_id for item in unique for _ in item.events],
            [k for item in unique for k in range(1, len(item.events) + 1)],
            [data for item in unique for data in item.events],
            t,
            CHANNEL,
            payload(runs),
            self._notify,
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
        outcomes: list[int | BaseException] = []
        for item in unique:
            if item.run_id in done:
                outcomes.append(done[item.run_id])
            elif item.run_id in why:
                status, holder = why[item.run_id]
                outcomes.append(not_held(item.run_id, status, holder, item.process_id))
            else:
                outcomes.append(run_not_found(item.run_id))
        if rest:
            outcomes += await self.append_batch(rest, self._clock())
        return outcomes

    async def take_over(self, run_id: str, change: TakeOver, t: float) -> RunRecord | None:
        """See ``RunTables.take_over``: the run's row locked for the compare."""
        async with self._pool.tx(unique=True) as conn:
            cursor = await conn.execute(qmark(sql.RUN + " FOR UPDATE"), (run_id,))
            before = change.compare(await cursor.fetchone())
            if before is None:
                return None
            seq = before.last_seq + 1
            await conn.execute(qmark(sql.INSERT_EVENT), (run_id, seq, t, change.event))
            await conn.execute(
                qmark(sql.TAKE_OVER), (change.to_status, change.holder_after(before), seq, t, run_id)
            )
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))
        return before

    async def request_cancel(self, owner: str, run_id: str, t: float) -> RunRecord | None:
        """See ``RunTables.request_cancel``."""
        async with self._pool.tx(unique=True) as conn:
            await conn.execute(qmark(sql.REQUEST_CANCEL), (t, run_id, owner))
            cursor = await conn.execute(qmark(sql.OWNED_RUN), (run_id, owner))
            row = await cursor.fetchone()
        return to_record(row) if row is not None else None

    async def read(self, owner: str | None, run_id: str, after_seq: int, limit: int) -> list[LoggedEvent]:
        """See ``RunTables.read``: one connection, no transaction."""
        async with self._pool.tx(single=True) as conn:
            if owner is not None:
                cursor = await conn.execute(qmark(sql.OWNS_RUN), (run_id, owner))
                if await cursor.fetchone() is None:
                    raise run_not_found(run_id)
            cursor = await conn.execute(qmark(sql.EVENTS_AFTER), (run_id, after_seq, limit))
            rows = await cursor.fetchall()
        return [LoggedEvent(int(seq), bytes(data)) for seq, data in rows]

    async def delete_runs(self, owner: str, conversation_id: str, t: float) -> list[str]:
        """See ``RunTables.delete_runs``: under the owner's advisory lock (no ``start_run`` in
        between), the conversation's runs locked too."""
        async with self._pool.tx(unique=True) as conn:
            await conn.execute(_OWNER_LOCK, (owner,))
            locked = qmark(sql.CONVERSATION_RUNS + " FOR UPDATE")
            cursor = await conn.execute(locked, (owner, conversation_id))
            ids = refuse_active(conversation_id, await cursor.fetchall())
            await conn.execute(qmark(sql.INSERT_DELETED), (owner, conversation_id, t))
            await conn.execute("DELETE FROM tether_serve_events WHERE run_id = ANY(%s)", (ids,))
            await conn.execute("DELETE FROM tether_serve_runs WHERE run_id = ANY(%s)", (ids,))
        return ids

    async def secret(self, name: str, fresh: bytes) -> bytes:
        """See ``RunTables.secret``."""
        async with self._pool.tx(unique=True) as conn:
            await conn.execute(qmark(sql.INSERT_SECRET), (name, fresh))
            cursor = await conn.execute(qmark(sql.SECRET), (name,))
            row = await cursor.fetchone()
        assert row is not None
        return bytes(row[0])
