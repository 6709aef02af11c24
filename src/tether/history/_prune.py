"""``prune_history``: drop reasoning and old tool exchanges before the last N turns, pair-safe.

A turn starts at a user message. Before the cutoff, reasoning parts go (``reasoning=True``) and
tool exchanges go whole (``tool_calls=True``): a call leaves its assistant message together with
its results in the tool messages right after it, so no call or result is ever orphaned. Messages
left empty disappear. Everything else passes through untouched; the report names each removal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from msgspec.structs import replace

from tether.errors import UserError
from tether.history._input import as_messages
from tether.history._normalize import CallRef
from tether.messages import Message, Reasoning, ToolCall, ToolResult

__all__ = ["PruneReport", "prune_history"]

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What ``prune_history`` removed, by index in the history passed in.

    ``reasoning``: (message, part) of each reasoning part dropped. ``tool_calls``: each call
    dropped with its results (``message`` is the assistant message). ``results``: (message,
    call id) of each result dropped with its call. ``removed``: messages left empty.
    """

    reasoning: tuple[tuple[int, int], ...] = ()
    tool_calls: tuple[CallRef, ...] = ()
    results: tuple[tuple[int, str], ...] = ()
    removed: tuple[int, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.reasoning or self.tool_calls or self.removed)

    def to_json(self) -> bytes:
        """The report as JSON (``changed`` included)."""
        return _encoder.encode(
            {
                "changed": self.changed,
                "reasoning": self.reasoning,
                "tool_calls": self.tool_calls,
                "results": self.results,
                "removed": self.removed,
            }
        )


def prune_history(
    history: Iterable[Message], *, keep_turns: int = 1, reasoning: bool = True, tool_calls: bool = True
) -> tuple[list[Message], PruneReport]:
    """Drop reasoning parts and/or whole tool exchanges from messages before the last
    ``keep_turns`` turns (a turn starts at a user message). Pair-safe and reported."""
    if type(keep_turns) is not int or keep_turns < 1:
        raise UserError(f"prune_history needs keep_turns >= 1, not {keep_turns!r}")
    msgs = as_messages(history, "prune_history")
    cutoff = _cutoff(msgs, keep_turns)
    if cutoff == 0 or not (reasoning or tool_calls):
        return list(msgs), PruneReport()
    out: list[Message] = []
    dropped_reasoning: list[tuple[int, int]] = []
    dropped_calls: list[CallRef] = []
    dropped_results: list[tuple[int, str]] = []
    removed: list[int] = []
    pruned_ids: set[str] = set()  # ids of calls dropped from the current assistant turn
    for i in range(cutoff):
        m = msgs[i]
        role = m.role
        if role == "assistant":
            pruned_ids = set()
            keep: list[object] = []
            for k, part in enumerate(m.parts):
                tp = type(part)
                if reasoning and tp is Reasoning:
                    dropped_reasoning.append((i, k))
                elif tool_calls and tp is ToolCall:
                    call: ToolCall = part  # type: ignore[assignment]
                    dropped_calls.append(CallRef(i, call.id, call.name))
                    if call.id:
                        pruned_ids.add(call.id)
                else:
                    keep.append(part)
            _emit(out, removed, m, i, keep)
        elif role == "tool" and pruned_ids:
            keep = []
            for part in m.parts:
                if type(part) is ToolResult and part.call_id in pruned_ids:
                    dropped_results.append((i, part.call_id))
                else:
                    keep.append(part)
            _emit(out, removed, m, i, keep)
        else:
            if role != "tool":
                pruned_ids = set()
            out.append(m)
    out.extend(msgs[cutoff:])
    report = PruneReport(
        tuple(dropped_reasoning), tuple(dropped_calls), tuple(dropped_results), tuple(removed)
    )
    return out, report


def _emit(out: list[Message], removed: list[int], m: Message, i: int, keep: list[object]) -> None:
    if len(keep) == len(m.parts):
        out.append(m)
    elif keep:
        out.append(replace(m, parts=tuple(keep)))
    else:
        removed.append(i)


def _cutoff(msgs: list[Message] | tuple[Message, ...], keep_turns: int) -> int:
    """Index of the user message opening the ``keep_turns``-th turn from the end (0: keep all)."""
    seen = 0
    for i in range(len(msgs) - 1, -1, -1):
        m = msgs[i]
        if m.role == "user":
            seen += 1
            if seen == keep_turns:
                return i
    return 0
