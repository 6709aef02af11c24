"""Running against a store: load, run, append the new messages; the tool-effect ledger.

A run appends its new messages in one batch with ``expected_version``. A tool with side effects
(``idempotent=False``) forces a checkpoint first: the messages so far (the requesting assistant
turn included) are appended, then a "started" ledger entry is written, then the tool runs. If the
process dies before the result is stored, the next run over the conversation closes that call
with a result saying the outcome is unknown and the tool may have run; it is never re-executed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.errors import NotFound, Partial, RunError, StoreError
from tether.messages import Message, Text, ToolCall, ToolResult

from ._result import Result
from ._run import Run

if TYPE_CHECKING:
    from tether.stores import Store, ToolEffect

__all__ = ["UNKNOWN_OUTCOME_TEXT", "StoreBinding", "ledger_closures"]

UNKNOWN_OUTCOME_TEXT = (
    "outcome unknown: the run stopped after this tool started and before its result was stored; "
    "the tool may have run. It was not run again."
)


def _effect_text(effect: ToolEffect) -> str:
    if not effect.finished:
        return UNKNOWN_OUTCOME_TEXT
    how = "with a failure" if effect.failed else "successfully"
    return (
        f"the tool finished {how}, but the run stopped before its result was stored; the result "
        "is lost and the tool was not run again"
    )


def ledger_closures(history: list[Message], effects: Sequence[ToolEffect]) -> list[tuple[int, Message]]:
    """Tool messages closing the calls of unfinished ledger entries: ``(insert_at, message)``
    pairs, where ``insert_at`` is the index right after the call's block of tool messages.
    Calls that already have a result are left alone. Walks back only as far as needed."""
    remaining = {e.call_id: e for e in effects}
    answered: set[str] = set()
    out: list[tuple[int, Message]] = []
    n = len(history)
    for i in range(n - 1, -1, -1):
        if not remaining:
            break
        m = history[i]
        if m.role == "tool":
            answered.update(r.call_id for r in m.tool_results)
            continue
        if m.role != "assistant":
            continue
        results: list[ToolResult] = []
        for call in m.tool_calls:
            effect = remaining.pop(call.id or "", None)
            if effect is None or call.id in answered:
                continue
            text = _effect_text(effect)
            failed = effect.finished and effect.failed
            results.append(
                ToolResult(call.id or "", call.name, (Text(text),), failed=failed, synthesized=True)
            )
        if results:
            end = i + 1
            while end < n and history[end].role == "tool":
                end += 1
            out.append((end, Message("tool", tuple(results))))
    return out


class StoreBinding:
    """One run's view of a stored conversation. Implements the run's ``RunHooks``."""

    def __init__(self, store: Store, owner: str, conversation_id: str) -> None:
        self.store = store
        self.owner = owner
        self.conversation_id = conversation_id
        self.version = 0
        self.flushed = 0

    async def load(self) -> list[Message]:
        """The stored history, with unfinished side effects closed (and those closures stored
        when they fall at the end of the log)."""
        store, owner, cid = self.store, self.owner, self.conversation_id
        try:
            loaded = await store.load(owner, cid)
        except NotFound:
            await store.create(owner, cid, exist_ok=True)
            loaded = await store.load(owner, cid)
        self.version = loaded.version
        history = list(loaded.messages)
        effects = await store.pending_tool_effects(owner, cid)
        if not effects:
            return history
        closures = ledger_closures(history, effects)
        tail = [m for at, m in closures if at == len(history)]
        for at, m in sorted(((at, m) for at, m in closures if at != len(history)), key=lambda x: -x[0]):
            history.insert(at, m)
        if tail:
            self.version = await store.append(owner, cid, tail, expected_version=self.version)
            history.extend(tail)
        return history

    async def checkpoint(self, run: Run) -> None:
        await self._flush(run.new)

    async def tool_started(self, run: Run, call: ToolCall) -> bool:
        return await self.store.record_tool_started(
            self.owner, self.conversation_id, run.run_id, call.id or "", call.name, call.arguments
        )

    async def tool_finished(self, run: Run, call: ToolCall, failed: bool) -> None:
        await self.store.record_tool_finished(
            self.owner, self.conversation_id, run.run_id, call.id or "", failed=failed
        )

    async def _flush(self, new: Sequence[Message]) -> None:
        batch = new[self.flushed :]
        if batch:
            self.version = await self.store.append(
                self.owner, self.conversation_id, batch, expected_version=self.version
            )
            self.flushed = len(new)

    async def finish(self, result: Result[object]) -> None:
        """Append what the run added since the last checkpoint."""
        try:
            await self._flush(result.new_messages)
        except StoreError as exc:
            partial = Partial(
                result.messages,
                result.new_messages,
                result.usage,
                result.requests,
                result.tool_executions,
                result.run_id,
                result.conversation_id,
            )
            raise RunError(
                f"the run finished but its messages could not be stored: {exc}",
                stage="store",
                partial=partial,
            ) from exc

    async def fail(self, error: RunError) -> None:
        """Append the failed run's evidence (``partial.new_messages``) so it can be resumed."""
        if error.partial is None:
            return
        try:
            await self._flush(error.partial.new_messages)
        except StoreError as exc:
            error.add_note(f"the partial evidence could not be stored: {exc}")
