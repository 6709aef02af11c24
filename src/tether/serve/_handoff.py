"""Handing a run on to another process: the recorder a process lets go of, and what a continued
run takes again (the decisions, when the stored tail is still the paused turn)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tether.agent import CompactedLog, DeferredResults, StoreRecorder
from tether.errors import Partial, StoreError
from tether.messages import Message, ToolCall
from tether.stores import CompactionRecord

__all__ = ["HeldRecorder", "pending_calls"]


class HeldRecorder(StoreRecorder):
    """A run's recorder that can be let go: after ``release()`` every write fails, so a run this
    process hands on (SIGTERM after the drain) stores nothing more and the process that
    continues it finds the store as the last completed step left it."""

    released = False
    on_stored: Callable[[Sequence[Message]], None] | None = None
    """Told each batch of messages once the store holds them (the run's event writer)."""

    def release(self) -> None:
        self.released = True

    def _check(self) -> None:
        if self.released:
            raise StoreError("the run was handed on to another process; this one stores nothing more")

    async def open(self, *, repair: bool) -> tuple[str, list[Message]]:
        opened = await super().open(repair=repair)
        self._closed()
        return opened

    async def open_compacted(self, *, repair: bool) -> CompactedLog:
        opened = await super().open_compacted(repair=repair)
        self._closed()
        return opened

    def _closed(self) -> None:
        if self.closed is not None and self.on_stored is not None:
            self.on_stored([self.closed])  # a closure the open stored: logged like the run's messages

    async def record(self, messages: Sequence[Message]) -> str:
        self._check()
        cid = await super().record(messages)
        if self.on_stored is not None:
            self.on_stored(messages)
        return cid

    async def failed(self, messages: Sequence[Message], partial: Partial | None) -> str:
        self._check()
        return await super().failed(messages, partial)

    async def tool_started(self, run_id: str, call: ToolCall) -> bool:
        self._check()
        return await super().tool_started(run_id, call)

    async def tool_finished(self, run_id: str, call: ToolCall, *, failed: bool) -> None:
        self._check()
        await super().tool_finished(run_id, call, failed=failed)

    async def record_compaction(self, record: CompactionRecord) -> None:
        self._check()
        await super().record_compaction(record)


def pending_calls(messages: Sequence[Message], deferred: DeferredResults | None) -> bool:
    """Whether the stored tail is still the paused turn whose calls ``deferred`` decides (then a
    continued run takes the decisions again; else they were applied and stored)."""
    if deferred is None or not messages or messages[-1].role != "assistant":
        return False
    decided = {*deferred.approvals, *deferred.results}
    return any(c.id in decided for c in messages[-1].tool_calls)
