"""How readers of one process learn of events appended by another on PostgreSQL: ``LISTEN``.

An append notifies channel ``tether_serve_events`` (``CHANNEL``) with the ids of its runs in the
same transaction (delivered on commit). The ``Listener`` holds one connection listening on it and
wakes this process's readers of those runs (``LiveTail.wake``), which then read the table. A
payload of ``*`` wakes every reader (the ids did not fit). A listener that loses its connection
logs it and reconnects; meanwhile ``listening`` is False and readers poll.

Imported only by modules that have checked the ``postgres`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import psycopg

from tether.stores.events._log import LiveTail

__all__ = ["CHANNEL", "Listener", "payload"]

CHANNEL = "tether_serve_events"
log = logging.getLogger("tether.serve")


def payload(run_ids: Sequence[str]) -> str:
    """The NOTIFY payload naming the runs of a batch; ``*`` (wake every reader) when the ids do
    not fit PostgreSQL's 8000-byte limit."""
    joined = ",".join(sorted(set(run_ids)))
    return joined if len(joined.encode()) <= 7900 else "*"


class Listener:
    """Wakes the readers of ``tail`` on every notification of ``CHANNEL`` on the database at ``dsn``."""

    def __init__(self, dsn: str, tail: LiveTail) -> None:
        self._dsn = dsn
        self._tail = tail
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.listening = False
        """True while the connection is listening (a notification will come)."""

    def start(self) -> None:
        """Start listening in a task of the running loop (once; never after ``stop``)."""
        if self._task is None and not self._stopped:
            self._task = asyncio.create_task(self._listen(), name="tether-serve-listen")

    async def stop(self) -> None:
        """Stop listening and close the connection. Idempotent."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _listen(self) -> None:
        """Wake local readers on every notification; reconnect after a failure."""
        while not self._stopped:
            try:
                conn = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
                try:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening = True
                    async for note in conn.notifies():
                        if note.payload == "*":
                            self._tail.wake_all()
                            continue
                        for run_id in note.payload.split(","):
                            self._tail.wake(run_id)
                finally:
                    self.listening = False
                    await conn.close()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event listener lost its connection (%s); polling until it reconnects", exc)
                await asyncio.sleep(1.0)
