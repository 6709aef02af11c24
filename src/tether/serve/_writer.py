"""One run's events on their way into the event log: batched, and gated on the store.

While one append commits, the next events queue and go in the next append. A
``message.completed`` is held until its message is stored (``stored``, called by the run's
recorder once a write returns), and every event after it waits behind it, so the log never
says a message exists that a crash could lose: a run's ``message.completed`` events are always
a prefix of its stored messages, in order (a process that continues the run logs the rest).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tether.messages import Message
from tether.stores.events import EventLog, RunStatus

__all__ = ["EventWriter"]


@dataclass(slots=True)
class _Held:
    data: bytes
    message: Message | None = None
    """The message a ``message.completed`` announces (``None``: any other event)."""
    stored: bool = False


class EventWriter:
    """Appends one run's events in batches, each ``message.completed`` once its message is stored."""

    def __init__(
        self,
        events: EventLog,
        run_id: str,
        process_id: str,
        *,
        on_error: Callable[[BaseException], None],
        completed: Callable[[Message], bytes],
    ) -> None:
        self._log = events
        self._run_id = run_id
        self._process_id = process_id
        self._pending: list[bytes] = []
        self._held: list[_Held] = []
        self._flushing: asyncio.Task[None] | None = None
        self._on_error = on_error
        self._completed = completed
        """Encodes the ``message.completed`` of a stored message the run never announced."""
        self.failed: BaseException | None = None

    def add(self, data: bytes, message: Message | None = None) -> None:
        """Queue an event; ``message``: it announces that message (held until it is stored)."""
        if message is None and not self._held:
            self._pending.append(data)
            self._kick()
        else:
            self._held.append(_Held(data, message))

    def stored(self, messages: Sequence[Message]) -> None:
        """The store holds ``messages`` now: release what waited for them."""
        for message in messages:
            held = next((h for h in self._held if not h.stored and h.message == message), None)
            if held is None:  # stored without being announced (a stopped run's partial turn)
                self._held.append(_Held(self._completed(message), message, stored=True))
            else:
                held.stored = True
        while self._held and (self._held[0].message is None or self._held[0].stored):
            self._pending.append(self._held.pop(0).data)
        self._kick()

    def _kick(self) -> None:
        if self._pending and self._flushing is None and self.failed is None:
            self._flushing = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        batch: list[bytes] = []
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                await self._log.append(self._run_id, self._process_id, batch)
                batch = []
        except Exception as exc:  # the log refused (run taken over) or failed: stop the run
            self._pending[:0] = batch  # not written: finish tries them again, in order, with run.failed
            self.failed = exc
            self._on_error(exc)
        finally:
            self._flushing = None

    async def drain(self) -> None:
        """Wait for the append in flight (its outcome is the log's business)."""
        flushing = self._flushing
        if flushing is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(flushing)

    async def finish(
        self, events: list[bytes], status: RunStatus, pause_id: str | None = None, pause: bytes | None = None
    ) -> None:
        """The run's last events, with its new status; announcements of messages that were
        never stored are dropped (the log says only what the store holds)."""
        await self.drain()
        kept = [h.data for h in self._held if h.message is None or h.stored]
        batch, self._pending, self._held = [*self._pending, *kept, *events], [], []
        await self._log.append(
            self._run_id, self._process_id, batch, status=status, pause_id=pause_id, pause=pause
        )
