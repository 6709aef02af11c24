"""Pairing repair: ``normalize_history`` and the ``close_calls`` helper.

The pairing rule (ADR 0002): for every assistant message with tool calls, the run of consecutive
``tool`` messages right after it holds exactly one result for each of its calls, and nothing else.
Repair walks the history once, left to right, and never rewrites content: it only drops results,
drops tool messages that end up empty, and inserts one synthesized tool message after a block.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import msgspec
from msgspec.structs import replace

from tether.errors import UserError
from tether.history._input import as_messages
from tether.messages import Message, Text, ToolCall, ToolResult

__all__ = [
    "INTERRUPTED_TEXT",
    "CallRef",
    "DropReason",
    "HistoryRepair",
    "UnpairedReason",
    "close_calls",
    "normalize_history",
]

INTERRUPTED_TEXT = "interrupted before execution; no result was produced"
"""The content of every result repair synthesizes: it states the absence of an outcome, not a
failure, so the model may call the tool again."""

DropReason: TypeAlias = Literal["duplicate", "before-call", "not-after-call", "no-call"]
"""Why a result was dropped: a second result for one call; a result placed before its call; a
result whose call exists earlier but not in the assistant message right before its block; a
result whose call does not exist at all."""

UnpairedReason: TypeAlias = Literal["no-id", "duplicate-id"]
"""Why a call cannot be paired: it has no id (``None`` or ``""``), or an earlier call of the same
assistant message already uses its id."""

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class CallRef:
    """One call or result named by a report.

    ``message`` is the index in the history that was passed in (for a synthesized result: the
    assistant message that made the call; for a dropped result: the tool message that held it).
    ``reason`` is a ``DropReason`` for dropped results, an ``UnpairedReason`` for unpaired calls
    and ``""`` otherwise.
    """

    message: int
    call_id: str | None
    name: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class HistoryRepair:
    """What ``normalize_history`` changed, by original message index.

    ``synthesized``: calls that received the neutral ``INTERRUPTED_TEXT`` result. ``dropped``:
    results removed (orphans, misplaced, duplicates). ``removed``: indexes of tool messages that
    disappeared because they held no result after the drops. ``truncated`` and ``unpaired`` are
    detections, not changes: they are listed again on every pass.
    """

    synthesized: tuple[CallRef, ...] = ()
    dropped: tuple[CallRef, ...] = ()
    removed: tuple[int, ...] = ()
    truncated: tuple[CallRef, ...] = ()
    unpaired: tuple[CallRef, ...] = ()

    @property
    def changed(self) -> bool:
        """True when the returned history differs from the one passed in."""
        return bool(self.synthesized or self.dropped or self.removed)

    def to_dict(self) -> dict[str, object]:
        """The report as plain JSON-ready data (``changed`` included)."""
        return {
            "changed": self.changed,
            "synthesized": self.synthesized,
            "dropped": self.dropped,
            "removed": self.removed,
            "truncated": self.truncated,
            "unpaired": self.unpaired,
        }

    def to_json(self) -> bytes:
        """The report as JSON, for logs or to show a client which turns were repaired."""
        return _encoder.encode(self.to_dict())


_EMPTY = HistoryRepair()


def close_calls(
    assistant_message: Message,
    answered_ids: Collection[str] = (),
    *,
    text: str = INTERRUPTED_TEXT,
    failed: bool = False,
    run_id: str | None = None,
    conversation_id: str | None = None,
) -> Message | None:
    """A tool message closing every call of ``assistant_message`` whose id is not in
    ``answered_ids``, or ``None`` when nothing is left open.

    Each result is ``ToolResult(synthesized=True, failed=failed)`` with ``text`` as its only
    content, in call order; calls without an id are skipped (they cannot be paired) and a repeated
    id is closed once. The defaults give exactly what repair synthesizes. A run closing calls it
    gave up on passes its own text (e.g. ``"not run (step limit)"`` with ``failed=True``) and
    may stamp its ids.
    """
    if type(assistant_message) is not Message or assistant_message.role != "assistant":
        raise UserError("close_calls needs an assistant message")
    if isinstance(answered_ids, str):
        raise UserError("close_calls takes a collection of answered call ids, not one string")
    results = _closing_results(assistant_message, answered_ids, text, failed)
    if not results:
        return None
    return Message("tool", results, run_id=run_id, conversation_id=conversation_id)


def _closing_results(
    assistant_message: Message, answered_ids: Collection[str], text: str, failed: bool
) -> tuple[ToolResult, ...]:
    content = (Text(text),)
    seen = set(answered_ids)
    results: list[ToolResult] = []
    for part in assistant_message.parts:
        if type(part) is ToolCall and part.id and part.id not in seen:
            seen.add(part.id)
            results.append(ToolResult(part.id, part.name, content, failed=failed, synthesized=True))
    return tuple(results)


def normalize_history(history: Iterable[Message]) -> tuple[list[Message], HistoryRepair]:
    """Repair the pairing of tool calls and results; see the module docstring and ADR 0002.

    Returns a new list holding the very same message objects wherever nothing changed, and a
    ``HistoryRepair``. Deterministic and idempotent; never rewrites content.
    """
    msgs = as_messages(history, "normalize_history")
    out: list[Message] = []
    append = out.append
    synthesized: list[CallRef] = []
    dropped: list[CallRef] = []
    duplicate_at: set[int] = set()  # indexes into ``dropped`` of duplicates (reason known inline)
    removed: list[int] = []
    truncated: list[CallRef] = []
    unpaired: list[CallRef] = []
    n = len(msgs)
    i = 0
    while i < n:
        m = msgs[i]
        role = m.role
        if role == "tool":  # a tool message that does not follow a call block: all orphans
            dropped.extend(CallRef(i, r.call_id, r.name) for r in m.parts if type(r) is ToolResult)
            removed.append(i)
            i += 1
            continue
        append(m)
        i += 1
        if role != "assistant":
            continue
        pending: dict[str, ToolCall] | None = None
        for part in m.parts:
            if type(part) is not ToolCall:
                continue
            if part.truncated:
                truncated.append(CallRef(i - 1, part.id, part.name))
            cid = part.id
            if not cid:
                unpaired.append(CallRef(i - 1, cid, part.name, "no-id"))
            elif pending is None:
                pending = {cid: part}
            elif cid in pending:
                unpaired.append(CallRef(i - 1, cid, part.name, "duplicate-id"))
            else:
                pending[cid] = part
        if pending is None:
            continue  # following tool messages, if any, are orphans: the loop head drops them
        a_index = i - 1
        # ``pending`` keeps the calls still waiting for a result, in call order.
        while i < n:
            t = msgs[i]
            if t.role != "tool":
                break
            keep: list[ToolResult] | None = None
            parts: tuple[ToolResult, ...] = t.parts  # type: ignore[assignment]  # a tool message
            pop = pending.pop
            for r in parts:
                if pop(r.call_id, None) is not None:
                    if keep is not None:
                        keep.append(r)
                    continue
                if _calls(m, r.call_id):  # its call is right here: an earlier result answered it
                    duplicate_at.add(len(dropped))
                dropped.append(CallRef(i, r.call_id, r.name))
                if keep is None:
                    keep = list(parts[: _position(parts, r)])
            if keep is None and parts:
                append(t)
            elif keep:
                append(replace(t, parts=tuple(keep)))
            else:
                removed.append(i)
            i += 1
        if pending:
            content = (Text(INTERRUPTED_TEXT),)
            results = tuple(
                ToolResult(c.id or "", c.name, content, synthesized=True) for c in pending.values()
            )
            append(Message("tool", results))
            synthesized.extend(CallRef(a_index, r.call_id, r.name) for r in results)
    if not (synthesized or dropped or removed or truncated or unpaired):
        return out, _EMPTY
    if dropped:
        dropped = _explain_drops(msgs, dropped, duplicate_at)
    return out, HistoryRepair(
        tuple(synthesized), tuple(dropped), tuple(removed), tuple(truncated), tuple(unpaired)
    )


def _position(parts: tuple[ToolResult, ...], part: ToolResult) -> int:
    return next(k for k, p in enumerate(parts) if p is part)


def _calls(assistant_message: Message, call_id: str) -> bool:
    return any(type(p) is ToolCall and p.id == call_id for p in assistant_message.parts)


def _explain_drops(msgs: Sequence[Message], dropped: list[CallRef], duplicate_at: set[int]) -> list[CallRef]:
    """Fill in each drop's reason (slow path: runs only when something was dropped)."""
    first_call: dict[str, int] = {}
    for index, m in enumerate(msgs):
        if m.role == "assistant":
            for part in m.parts:
                if type(part) is ToolCall and part.id and part.id not in first_call:
                    first_call[part.id] = index
    explained: list[CallRef] = []
    for at, ref in enumerate(dropped):
        call_index = first_call.get(ref.call_id or "")
        reason: DropReason
        if at in duplicate_at:
            reason = "duplicate"
        elif call_index is None:
            reason = "no-call"
        elif call_index > ref.message:
            reason = "before-call"
        else:
            reason = "not-after-call"
        explained.append(CallRef(ref.message, ref.call_id, ref.name, reason))
    return explained
