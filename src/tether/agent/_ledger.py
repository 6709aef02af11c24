"""The tool-effect ledger's closures: tool messages that close calls a crashed run left open.

A tool with side effects (``idempotent=False``) gets a "started" ledger entry before it runs. If
the process dies before its result is stored, the next run over the conversation closes that call
with a result saying the outcome is unknown and the tool may have run; it is never re-executed.
A log ending mid-batch is closed by one stored tool message, so the stored conversation always
passes ``check_history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.messages import Message, Text, ToolCall, ToolResult

from ._batch import UNKNOWN_OUTCOME_TEXT, interrupted

if TYPE_CHECKING:
    from tether.stores import ToolEffect

__all__ = ["ledger_closures", "tail_closure"]


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
