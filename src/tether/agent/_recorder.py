"""Persistence of a run: the ``RunRecorder`` protocol, the ``StoreRecorder`` that implements it
over a ``Store``, and ``settle``, which keeps a write from being torn by cancellation.

A run talks to its recorder in plain values: it opens the conversation (history in), hands over
new messages in order (each exactly once), says which side-effecting call starts and finishes,
and, when it fails, hands over what is left with the failure's ``Partial``. The run decides
*when* to write (a checkpoint before a side effect, the end of the run, the failure); the
recorder decides *how* (versions, conflicts, forks, what to keep of an unfinished turn).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar, cast, runtime_checkable

from msgspec.structs import replace

from tether.errors import ConflictError, NotFound, Partial, StoreError, UserError
from tether.messages import Message, ToolCall, new_id
from tether.telemetry import traced_store

from ._ledger import ledger_closures, tail_closure

if TYPE_CHECKING:
    from tether.stores import CompactionRecord, Store

__all__ = [
    "NO_RECORDER",
    "CompactedLog",
    "NoRecorder",
    "OnConflict",
    "RunRecorder",
    "StoreRecorder",
    "settle",
]

T = TypeVar("T")
OnConflict = Literal["fail", "fork"]
DEFAULT_WRITE_TIMEOUT = 30.0


async def settle(work: Awaitable[T], timeout: float) -> T:
    """Await ``work`` to its end even when the caller is cancelled meanwhile, then deliver the
    cancellation: a write is never left half-known. Bounded: after ``timeout`` seconds the write
    is abandoned (cancelled) and ``StoreError`` is raised (or the pending cancellation)."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    cancelled = False
    while not task.done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            task.cancel()
            if cancelled:
                raise asyncio.CancelledError
            raise StoreError(f"the store did not answer within {timeout:g} s (write_timeout)")
        try:
            await asyncio.wait((task,), timeout=remaining)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation below is what the caller sees
        raise asyncio.CancelledError
    return task.result()


@dataclass(frozen=True, slots=True)
class CompactedLog:
    """What ``RunRecorder.open_compacted`` gives a run with compaction: the conversation id, the
    latest compaction ``record`` (``None``: none) and the ``history`` after its boundary, where
    ``history[i]`` is the message stored at seq ``offset + i + 1``. ``exact`` is False when the
    recorder inserted messages it did not store (closures of older turns' unfinished side
    effects): positions no longer match seqs, so the run stores no new record."""

    conversation_id: str
    history: list[Message]
    offset: int = 0
    record: CompactionRecord | None = None
    exact: bool = True


@runtime_checkable
class RunRecorder(Protocol):
    """Where a run's conversation comes from and where what it adds goes. Every method is async;
    the run awaits each write, and the open, to its end (``settle``) within ``write_timeout``
    seconds."""

    @property
    def write_timeout(self) -> float: ...

    async def open(self, *, repair: bool) -> tuple[str, list[Message]]:
        """The conversation id and its history (``repair``: the run will repair the history, so
        calls a crash left open may be closed now)."""
        ...

    async def record(self, messages: Sequence[Message]) -> str:
        """Durably append ``messages`` (new, in order, each once); return the conversation id they
        are stored under (another one when the recorder forked on a conflict)."""
        ...

    async def tool_started(self, run_id: str, call: ToolCall) -> bool:
        """A side-effecting call is about to run; False when this run started it before and its
        result was never stored (it may have run: do not run it again)."""
        ...

    async def tool_finished(self, run_id: str, call: ToolCall, *, failed: bool) -> None:
        """The side-effecting call returned."""
        ...

    async def failed(self, messages: Sequence[Message], partial: Partial | None) -> str:
        """The run failed or was stopped: store ``messages`` (its new messages not yet recorded)
        and whatever of ``partial`` the recorder's policy keeps; return the conversation id."""
        ...

    # -- compaction (called only by runs of an agent with ``compaction=``) --------------------------
    async def open_compacted(self, *, repair: bool) -> CompactedLog:
        """``open`` for a run with compaction: the latest compaction record and only the
        messages after its boundary (the whole history when there is no record)."""
        ...

    async def record_compaction(self, record: CompactionRecord) -> None:
        """Keep a compaction record beside the log. The run hands it over after the messages it
        stands for were recorded; the recorder stamps it with the conversation it now writes to."""
        ...

    async def load_log(self) -> Sequence[Message]:
        """The conversation's whole stored log, from seq 1 (what ``recall`` searches)."""
        ...


class StoreRecorder:
    """A run's conversation in a ``Store``, for one owner.

    - ``conversation_id=None`` starts a new conversation (a new UUIDv7); a given id that does not
      exist yet is created (the caller chose the id). Either is created with the first write, so
      a run that fails before anything is recorded leaves nothing behind.
    - ``on_conflict``: another writer appended after this run loaded the conversation. ``"fail"``
      (the default) raises ``ConflictError`` (the run fails with stage ``"store"``); ``"fork"``
      copies the conversation as this run saw it into a new one, stores the run there, and the
      run continues under the new id (``result.conversation_id``), so two answers to one history
      never interleave.
    - ``at_version``: the version the caller's view of the conversation ends at (what its user
      saw). The run continues from there; if another writer appended since, that is a conflict,
      settled by ``on_conflict`` (a chat window does this, so its turn never lands after a turn
      its user did not see).
    - ``keep_unfinished``: a stopped run's partly streamed model turn (``Partial.unfinished``, stop
      reason ``"canceled"``) is stored too (the default: the user saw it).
    - ``write_timeout``: seconds a write (or the open of the conversation) may take before the
      run gives up on it.
    """

    def __init__(
        self,
        store: Store,
        owner: str,
        conversation_id: str | None = None,
        *,
        on_conflict: OnConflict = "fail",
        at_version: int | None = None,
        keep_unfinished: bool = True,
        write_timeout: float = DEFAULT_WRITE_TIMEOUT,
    ) -> None:
        if not isinstance(owner, str) or not owner:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError("a run with a store needs owner= (the authenticated caller or tenant)")
        if conversation_id is not None and (not isinstance(conversation_id, str) or not conversation_id):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"conversation_id must be a non-empty string, got {conversation_id!r}")
        if on_conflict not in ("fail", "fork"):
            raise UserError(f"on_conflict must be 'fail' or 'fork', not {on_conflict!r}")
        if at_version is not None and (type(at_version) is not int or at_version < 0):
            raise UserError(f"at_version must be an int >= 0, not {at_version!r}")
        given_timeout = cast(object, write_timeout)
        if (
            not isinstance(given_timeout, int | float)
            or isinstance(given_timeout, bool)
            or not given_timeout > 0
        ):
            raise UserError(f"write_timeout must be a positive number of seconds, not {write_timeout!r}")
        self.store = store
        self.owner = owner
        self.conversation_id = conversation_id
        self.on_conflict: OnConflict = on_conflict
        self.keep_unfinished = keep_unfinished
        self.at_version = at_version
        self._write_timeout = float(write_timeout)
        self.version = 0
        """The conversation's version after this recorder's last write (its load, before any)."""
        self.closed: Message | None = None
        """The tool message the open appended to close a turn a crash left unanswered (ledger
        closures, ``tail_closure``), else ``None``: stored, though the run never added it."""
        self._exists = False

    @property
    def write_timeout(self) -> float:
        return self._write_timeout

    @property
    def _db(self) -> Store:
        """The store; inside a traced run its calls are client spans of the run."""
        return traced_store(self.store)

    def _cid(self) -> str:
        if self.conversation_id is None:
            raise UserError("the recorder was not opened")
        return self.conversation_id

    async def open(self, *, repair: bool) -> tuple[str, list[Message]]:
        """The stored history, with unfinished side effects closed.

        When the log ends with a turn whose calls are not all answered (a crash mid-batch), one
        closing tool message is appended to the store (``tail_closure``), so the stored log
        passes ``check_history`` and the run needs no repair. ``repair=False`` (a run resuming
        ``deferred=`` decisions) keeps a bare pending turn open unless a call of it was started.
        Closures of older turns are inserted in the returned history only."""
        opened = await self._open(repair, None)
        return opened.conversation_id, opened.history

    async def open_compacted(self, *, repair: bool) -> CompactedLog:
        """``open`` from the latest compaction record: the messages after its boundary. With
        ``at_version``, the latest record whose boundary the caller's view reaches."""
        if self.conversation_id is None:
            return await self._open(repair, None)
        store, owner, cid = self._db, self.owner, self.conversation_id
        try:
            record = await store.latest_record(owner, cid)
            pinned = self.at_version
            if record is not None and pinned is not None and record.boundary > pinned:
                seen = [r for r in await store.records(owner, cid) if r.boundary <= pinned]
                record = seen[-1] if seen else None
        except NotFound:
            record = None
        return await self._open(repair, record)

    async def _open(self, repair: bool, record: CompactionRecord | None) -> CompactedLog:
        store, owner = self._db, self.owner
        if self.conversation_id is None:
            self.conversation_id = new_id()
            return CompactedLog(self.conversation_id, [])
        cid = self.conversation_id
        since = record.boundary if record is not None else 0
        try:
            loaded = await store.load(owner, cid, since=since or None)
        except NotFound:
            return CompactedLog(cid, [])
        self._exists = True
        self.version = loaded.version
        history = list(loaded.messages)
        pinned = self.at_version
        if pinned is not None and pinned < loaded.version:
            # others appended after what the caller saw: run on its view; the first write conflicts
            self.version = pinned
            return CompactedLog(cid, history[: pinned - since], since, record)
        effects = await store.pending_tool_effects(owner, cid)
        closing, effects = tail_closure(history, effects, repair=repair)
        inserted = 0
        if effects:
            for at, m in sorted(ledger_closures(history, effects), key=lambda x: -x[0]):
                history.insert(at, m)
                inserted += 1
        if closing is not None:
            await settle(self._append([closing]), self._write_timeout)
            history.append(closing)
            self.closed = closing
        return CompactedLog(cid, history, since, record, exact=not inserted)

    async def _append(self, messages: Sequence[Message]) -> None:
        if not self._exists:
            await self._db.create(self.owner, self._cid(), exist_ok=True)
            self._exists = True
        self.version = await self._db.append(self.owner, self._cid(), messages, expected_version=self.version)

    async def record(self, messages: Sequence[Message]) -> str:
        if not messages:
            return self._cid()
        try:
            await self._append(messages)
        except ConflictError:
            if self.on_conflict != "fork":
                raise
            await self._fork_and_append(messages)
        return self._cid()

    async def _fork_and_append(self, messages: Sequence[Message]) -> None:
        """Another writer appended after this run's last write: continue in a copy of the
        conversation as this run knew it (``version``), with the run's messages re-stamped."""
        old, base = self._cid(), self.version
        fork_id = await self._db.fork(self.owner, old, at_version=base)
        moved = [replace(m, conversation_id=fork_id) if m.conversation_id == old else m for m in messages]
        self.conversation_id = fork_id
        self._exists = True
        await self._append(moved)

    async def tool_started(self, run_id: str, call: ToolCall) -> bool:
        return await self._db.record_tool_started(
            self.owner, self._cid(), run_id, call.id or "", call.name, call.arguments
        )

    async def tool_finished(self, run_id: str, call: ToolCall, *, failed: bool) -> None:
        await self._db.record_tool_finished(self.owner, self._cid(), run_id, call.id or "", failed=failed)

    async def failed(self, messages: Sequence[Message], partial: Partial | None) -> str:
        batch = list(messages)
        if self.keep_unfinished and partial is not None and partial.unfinished is not None:
            batch.append(partial.unfinished)
        return await self.record(batch)

    async def record_compaction(self, record: CompactionRecord) -> None:
        cid = self._cid()
        if record.conversation_id != cid:  # the run moved to a fork: the record is the fork's
            record = replace(record, conversation_id=cid)
        await self._db.append_record(self.owner, record)

    async def load_log(self) -> Sequence[Message]:
        try:
            return (await self._db.load(self.owner, self._cid())).messages
        except NotFound:  # nothing stored yet
            return ()


class NoRecorder:
    """The recorder of a run without a store: it keeps nothing and holds nothing. A run asks it
    for nothing either (``Run.stored`` is False: no open, no write, no ledger); it is there so the
    run's recorder is never ``None``."""

    __slots__ = ()

    @property
    def write_timeout(self) -> float:
        return DEFAULT_WRITE_TIMEOUT

    async def open(self, *, repair: bool) -> tuple[str, list[Message]]:
        return "", []

    async def record(self, messages: Sequence[Message]) -> str:
        return ""

    async def tool_started(self, run_id: str, call: ToolCall) -> bool:
        return True

    async def tool_finished(self, run_id: str, call: ToolCall, *, failed: bool) -> None:
        pass

    async def failed(self, messages: Sequence[Message], partial: Partial | None) -> str:
        return ""

    async def open_compacted(self, *, repair: bool) -> CompactedLog:
        return CompactedLog("", [])

    async def record_compaction(self, record: CompactionRecord) -> None:
        pass

    async def load_log(self) -> Sequence[Message]:
        return ()


NO_RECORDER = NoRecorder()
