"""What an operator does to the service's runs from outside it (``tether runs``): list, show and
cancel run records in the service database, scoped to one owner like every other operation, and
see the service's processes (which are alive, how many runs each holds)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections import Counter
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast

from tether.stores import SQLiteStore, Store
from tether.stores import events as event_logs
from tether.stores.events import EventLog, LoggedEvent, ProcessInfo, RunRecord, SQLiteEventLog

from ._events import RunCanceledEvent, encode_event

__all__ = ["OPERATOR_REASON", "RunLog", "open_run_log"]

OPERATOR_REASON = "canceled by an operator (tether runs cancel)"


@dataclass(slots=True)
class RunLog:
    """The service's conversation store and event log, for one owner's runs."""

    store: Store
    events: EventLog

    async def list(self, owner: str, *, status: str | None = None, limit: int = 20) -> list[RunRecord]:
        """The owner's runs, newest first (``status``: only runs in it)."""
        found: list[RunRecord] = []
        for info in await self.store.conversations(owner):
            found.extend(await self.events.runs(owner, info.conversation_id, limit=limit))
        if status is not None:
            found = [r for r in found if r.status == status]
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found[:limit]

    async def show(self, owner: str, run_id: str) -> tuple[RunRecord, list[LoggedEvent]]:
        """A run and its events (``NotFound`` when absent or another owner's)."""
        record = await self.events.get_run(owner, run_id)
        events: list[LoggedEvent] = []
        while True:
            batch = await self.events.read(owner, run_id, events[-1].seq if events else 0)
            if not batch:
                return record, events
            events.extend(batch)

    async def processes(self) -> list[tuple[ProcessInfo, int]]:
        """The service processes registered in the database (alive, or dead and not yet noticed)
        with how many running runs each holds (counts only: no owner's runs are shown)."""
        held = Counter(r.process_id for r in await self.events.active_runs())
        listed = sorted(await self.events.processes(), key=lambda p: p.started_at)
        return [(p, held.get(p.process_id, 0)) for p in listed]

    async def cancel(self, owner: str, run_id: str, *, wait: float = 10.0) -> RunRecord:
        """Stop a run: a paused one here (compare and set), a running one through its process,
        which sees the request on its next heartbeat; waits up to ``wait`` s for it to end."""
        record = await self.events.get_run(owner, run_id)
        if record.status == "paused":
            event = encode_event(RunCanceledEvent(run_id, record.conversation_id, OPERATOR_REASON))
            await self.events.take_over(
                run_id, from_status="paused", to_status="canceled", event=event, pause_id=record.pause_id
            )
            return await self.events.get_run(owner, run_id)
        if record.status != "running":
            return record
        await self.events.request_cancel(owner, run_id)
        deadline = time.monotonic() + wait
        while record.status == "running" and time.monotonic() < deadline:
            await self.events.wait(run_id, record.last_seq, min(1.0, max(0.0, deadline - time.monotonic())))
            record = await self.events.get_run(owner, run_id)
            await asyncio.sleep(0)
        return record


@asynccontextmanager
async def open_run_log(
    *, db: str | None = None, postgres: str | None = None, schema: str | None = None
) -> AsyncGenerator[RunLog]:
    """The service database (SQLite file ``db`` or PostgreSQL ``postgres``) as a ``RunLog``."""
    if postgres is not None:  # the postgres extra loads here only (MissingExtra without it)
        stores = importlib.import_module("tether.stores")
        store = cast(Store, stores.PostgresStore(postgres, schema=schema))
        events = cast(EventLog, event_logs.PostgresEventLog(postgres, schema=schema))
    else:
        assert db is not None
        store, events = SQLiteStore(db), SQLiteEventLog(db)
    try:
        yield RunLog(store, events)
    finally:
        with contextlib.suppress(Exception):
            await events.close()
        await store.close()
