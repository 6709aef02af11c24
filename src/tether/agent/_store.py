"""Running against a store: load, run, append the new messages; the tool-effect ledger.

A run appends its new messages in one batch with ``expected_version``. A tool with side effects
(``idempotent=False``) forces a checkpoint first: the messages so far (the requesting assistant
turn included) are appended, then a "started" ledger entry is written, then the tool runs, and
the batch's results are appended as soon as it ends. If the process dies before the result is
stored, the next run over the conversation closes that call with a result saying the outcome is
unknown and the tool may have run; it is never re-executed. A log ending mid-batch is closed by
one stored tool message, so the stored conversation always passes ``check_history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.errors import NotFound, Partial, RunError, StoreError
from tether.messages import Message, Text, ToolCall, ToolResult

from ._batch import UNKNOWN_OUTCOME_TEXT, interrupted
from ._result import Result
from ._run import Run

if TYPE_CHECKING:
    from tether.stores import Store, ToolEffect

__all__ = ["StoreBinding", "ledger_closures", "tail_closure"]


def _effect_text(effect: ToolEffect) -> str:
    if not effect.finished:
        return UNKNOWN_OUTCOME_TEXT
    how = "with a failure" if effect.failed else "successfully"
    return (
        f"the tool finished {how}, but the run stopped before its result was stored; the result "
        "is lost and the tool was not run again"
    )


EffectKey = tuple[str, str]
"""A ledger entry's ``(run_id, call_id)``: call ids repeat across runs, so the run is part of it."""


def _take(remaining: dict[EffectKey, ToolEffect], run_id: str | None, call_id: str) -> ToolEffect | None:
    """The open entry of ``call_id`` made by the run of the turn (any run when the turn carries
    no run id), removed from ``remaining``."""
    if run_id is not None:
        return remaining.pop((run_id, call_id), None)
    key = next((k for k in remaining if k[1] == call_id), None)
    return remaining.pop(key) if key is not None else None


def _closing(effect: ToolEffect | None, call: ToolCall) -> ToolResult:
    if effect is None:
        return interrupted(call)
    failed = effect.finished and effect.failed
    return ToolResult(
        call.id or "", call.name, (Text(_effect_text(effect)),), failed=failed, synthesized=True
    )


def ledger_closures(history: list[Message], effects: Sequence[ToolEffect]) -> list[tuple[int, Message]]:
    """Tool messages closing the calls of unfinished ledger entries: ``(insert_at, message)``
    pairs, where ``insert_at`` is the index right after the call's block of tool messages.
    An entry belongs to the turn of its run that made the call; calls answered in the tool
    messages right after their turn are left alone. Walks back only as far as needed."""
    remaining = {(e.run_id, e.call_id): e for e in effects}
    block: set[str] = set()  # call ids answered by the tool messages after the turn being looked at
    out: list[tuple[int, Message]] = []
    n = len(history)
    for i in range(n - 1, -1, -1):
        if not remaining:
            break
        m = history[i]
        if m.role == "tool":
            block.update(r.call_id for r in m.tool_results)
            continue
        answered, block = block, set[str]()
        if m.role != "assistant":
            continue
        results: list[ToolResult] = []
        for call in m.tool_calls:
            effect = _take(remaining, m.run_id, call.id or "") if call.id else None
            if effect is not None and call.id not in answered:
                results.append(_closing(effect, call))
        if results:
            end = i + 1
            while end < n and history[end].role == "tool":
                end += 1
            out.append((end, Message("tool", tuple(results))))
    return out


def tail_closure(
    history: Sequence[Message], effects: Sequence[ToolEffect], *, repair: bool
) -> tuple[Message | None, list[ToolEffect]]:
    """One tool message closing every unanswered call of the log's last turn, and the effects
    it did not use.

    The last turn is an assistant turn with tool calls followed only by tool messages (none, or
    a partial batch). Results come in call order: a ledger closure for a call with an open entry,
    the neutral repair result for any other call. Nothing is closed (``None``) unless the turn
    has an open entry, a partial batch follows it, or ``repair`` (the run would repair it
    anyway): a bare pending turn may still be answered with ``deferred=``."""
    end = len(history)
    a = end - 1
    while a >= 0 and history[a].role == "tool":
        a -= 1
    if a < 0 or history[a].role != "assistant" or not history[a].tool_calls:
        return None, list(effects)
    turn = history[a]
    answered = {r.call_id for m in history[a + 1 :] for r in m.tool_results}
    remaining = {(e.run_id, e.call_id): e for e in effects}
    closing: list[tuple[ToolEffect | None, ToolCall]] = []
    for call in turn.tool_calls:
        if not call.id or call.id in answered:
            continue
        answered.add(call.id)
        closing.append((_take(remaining, turn.run_id, call.id), call))
    used = any(effect is not None for effect, _ in closing)
    if not closing or not (used or a + 1 < end or repair):
        return None, list(effects)
    return Message("tool", tuple(_closing(e, c) for e, c in closing)), list(remaining.values())


class StoreBinding:
    """One run's view of a stored conversation. Implements the run's ``RunHooks``."""

    def __init__(self, store: Store, owner: str, conversation_id: str) -> None:
        self.store = store
        self.owner = owner
        self.conversation_id = conversation_id
        self.version = 0
        self.flushed = 0

    async def load(self, *, repair: bool = True) -> list[Message]:
        """The stored history, with unfinished side effects closed.

        When the log ends with a turn whose calls are not all answered (a crash mid-batch), one
        closing tool message is appended to the store (``tail_closure``), so the stored log
        passes ``check_history`` and the run needs no repair. ``repair=False`` (a run resuming
        ``deferred=`` decisions) keeps a bare pending turn open unless a call of it was started.
        Closures of older turns are inserted in the returned history only."""
        store, owner, cid = self.store, self.owner, self.conversation_id
        try:
            loaded = await store.load(owner, cid)
        except NotFound:
            await store.create(owner, cid, exist_ok=True)
            loaded = await store.load(owner, cid)
        self.version = loaded.version
        history = list(loaded.messages)
        effects = await store.pending_tool_effects(owner, cid)
        closing, effects = tail_closure(history, effects, repair=repair)
        if effects:
            for at, m in sorted(ledger_closures(history, effects), key=lambda x: -x[0]):
                history.insert(at, m)
        if closing is not None:
            self.version = await store.append(owner, cid, [closing], expected_version=self.version)
            history.append(closing)
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
