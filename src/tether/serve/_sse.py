"""Server-Sent Events over the event log: ``id:`` is the event's sequence number.

The stream reads only the log: first every event after the client's ``Last-Event-ID`` (or
``?after=``), then live ones as they are committed, each exactly once and in order. It ends after
the run's last event (completed, failed, canceled, interrupted); a comment line every
``ping_interval`` seconds keeps proxies from closing an idle stream. The caller's token is
checked again at most every ``ping_interval`` seconds: an open stream of a revoked user (or token)
ends instead of delivering for ever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from tether.errors import NotFound, StoreError
from tether.stores.events import TERMINAL, EventLog, LoggedEvent, RunRecord

from ._errors import ApiError
from ._events import TERMINAL_TYPES, RunDeletedEvent, encode_event, event_type
from ._numbers import parse_count

__all__ = [
    "DELETED",
    "REVOKED",
    "SSE_HEADERS",
    "UNAVAILABLE",
    "Allowed",
    "Slot",
    "StreamSlots",
    "check_resume_point",
    "event_stream",
    "follow_log",
    "resume_point",
]

SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
REVOKED = "access revoked: the token or its user was revoked while the stream was open"
DELETED = "the conversation was deleted, with its runs and their events, while the stream was open"
UNAVAILABLE = "the event log failed; reconnect with Last-Event-ID"
log = logging.getLogger("tether.serve")

Allowed = Callable[[], Awaitable[bool]]
"""Asks again whether the stream's caller may still read (a revoked token answers False)."""
_RUN_PREFIX = b'{"type":"run.'


class _Slot:
    """One open stream's place in its user's count; released once, however the stream ends."""

    __slots__ = ("_owner", "_slots")

    def __init__(self, slots: StreamSlots, owner: str) -> None:
        self._slots: StreamSlots | None = slots
        self._owner = owner

    def release(self) -> None:
        if self._slots is not None:
            self._slots.give_back(self._owner)
            self._slots = None


Slot = _Slot
"""One open stream's place (``StreamSlots.take``)."""


class StreamSlots:
    """Open event streams per user in this process: at most ``limit`` each, 429 past it (a
    token holder cannot pin the process with thousands of idle streams). ``limit`` 0: no limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def take(self, owner: str) -> _Slot:
        held = self._open.get(owner, 0)
        if self.limit and held >= self.limit:
            raise ApiError(
                429,
                f"{held} event streams of yours are open on this server (at most {self.limit}): "
                "close one (a stream ends with its run) and try again",
                headers={"Retry-After": "5"},
            )
        self._open[owner] = held + 1
        return _Slot(self, owner)

    def give_back(self, owner: str) -> None:
        left = self._open.get(owner, 0) - 1
        if left > 0:
            self._open[owner] = left
        else:
            self._open.pop(owner, None)


class SlotStream(StreamingResponse):
    """An SSE response that gives its slot back when the response ends, whether the stream ran
    to its end, the client went away or the body raised."""

    def __init__(self, body: AsyncIterator[bytes], slot: _Slot) -> None:
        super().__init__(body, media_type="text/event-stream", headers=SSE_HEADERS)
        self._slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slot.release()


def check_resume_point(after: int, record: RunRecord) -> None:
    """400 for a resume point past the run's last event: no client can have seen it (an event is
    committed before any reader gets it), and a stream waiting for it would never end."""
    if after > record.last_seq:
        raise ApiError(
            400,
            f"Last-Event-ID (or after) {after} is past the last event of run {record.run_id!r} "
            f"({record.last_seq}); resume from an id the stream sent",
        )


def resume_point(request: Request) -> int:
    """The last sequence number the client has: ``Last-Event-ID``, else ``?after=``, else 0."""
    raw = request.headers.get("last-event-id")
    if raw is not None and raw.strip():  # an empty one is a browser's first connect
        return parse_count(raw.strip(), "Last-Event-ID header (an event id)")
    after = request.query_params.get("after")
    return 0 if after is None else parse_count(after, "query parameter 'after' (an event id)")


async def follow_log(
    events: EventLog,
    record: RunRecord,
    after: int,
    *,
    ping_interval: float = 15.0,
    batch: int = 500,
    until: frozenset[str] = TERMINAL_TYPES,
    allowed: Allowed | None = None,
) -> AsyncIterator[list[LoggedEvent] | None]:
    """The run's events after ``after`` in batches, then live ones as they are committed, each
    once and in order, up to and including the first whose type is in ``until``; ``None`` after
    ``ping_interval`` seconds without one (time for a keep-alive). ``allowed`` is asked again at
    most once per ``ping_interval``; when it answers False the stream raises ``ApiError(401)``
    (the response has started: the stream writes its own last words and ends). A run deleted
    under the stream (with its conversation) raises ``ApiError(404, DELETED)`` the same way."""
    owner, run_id = record.owner, record.run_id
    if record.status in TERMINAL and after >= record.last_seq:
        return
    last = after
    quiet_since = checked = time.monotonic()
    while True:
        if allowed is not None and time.monotonic() - checked >= ping_interval:
            if not await allowed():
                raise ApiError(401, REVOKED)
            checked = time.monotonic()
        try:
            found = await events.read(owner, run_id, last, batch)
        except NotFound:
            raise ApiError(404, DELETED) from None
        if found:
            out: list[LoggedEvent] = []
            done = False
            for event in found:
                out.append(event)
                last = event.seq
                if event.data.startswith(_RUN_PREFIX) and event_type(event.data) in until:
                    done = True
                    break
            yield out
            if done:
                return
            quiet_since = time.monotonic()
            continue
        left = ping_interval - (time.monotonic() - quiet_since)
        if left <= 0:
            yield None
            quiet_since = time.monotonic()
            if await _ended_before(events, record, last):
                return
            continue
        await events.wait(run_id, last, left)


async def _ended_before(events: EventLog, record: RunRecord, last: int) -> bool:
    """True when the run ended (or is gone) and has no event after ``last``: a reader waiting
    past its last event stops instead of pinging for ever (checked once per keep-alive)."""
    try:
        now = await events.get_run(record.owner, record.run_id)
    except NotFound:
        raise ApiError(404, DELETED) from None
    return now.status in TERMINAL and last >= now.last_seq


async def event_stream(
    events: EventLog,
    record: RunRecord,
    after: int,
    *,
    ping_interval: float = 15.0,
    batch: int = 500,
    allowed: Allowed | None = None,
) -> AsyncIterator[bytes]:
    """The SSE body; a revoked caller's stream ends with a comment saying so (a reconnect
    gets the 401), a deleted run's with a ``run.deleted`` event (no ``id:``: nothing was stored)."""
    yield b"retry: 1000\n\n"
    try:
        async for found in follow_log(
            events, record, after, ping_interval=ping_interval, batch=batch, allowed=allowed
        ):
            if found is None:
                yield b": ping\n\n"
            else:
                yield b"".join(b"id: %d\ndata: %s\n\n" % (e.seq, e.data) for e in found)
    except ApiError as exc:
        if exc.status == 404:
            gone = RunDeletedEvent(record.run_id, record.conversation_id, exc.message)
            yield b"data: %s\n\n" % encode_event(gone)
        else:
            yield b": %s\n\n" % exc.message.encode()
    except StoreError as exc:  # the database went away: the client reconnects with Last-Event-ID
        log.error("event stream of run %s: the event log failed: %s", record.run_id, exc)
        yield b": %s\n\n" % UNAVAILABLE.encode()
