"""Pairing repair: ``normalize_history`` and the ``close_calls`` helper.

The pairing rule (ADR 0002): for every assistant message with tool calls, the run of consecutive
``tool`` messages right after it holds exactly one result for each of its calls, and nothing else.
Repair walks the history once, left to right, and never rewrites content: it only drops results,
drops tool messages that end up empty, and inserts one synthesized tool message after a block.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

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
    "repair_pairing",
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
_NOBODY = Message("assistant")


# The test of ``ToolCall.truncated`` without the property call, once per call of the pass.
_object_checker = msgspec.json.Decoder(dict[str, Any])


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
    return repair_pairing(as_messages(history, "normalize_history"))


def repair_pairing(msgs: Sequence[Message]) -> tuple[list[Message], HistoryRepair]:
    """``normalize_history`` on messages already checked by ``as_messages``: one pass, left to
    right. ``block`` holds the calls of the last assistant message still waiting for a result
    while the tool messages right after it are read; the next other message closes it. The
    output list is built from the first change on (until then it is ``msgs[:i]``)."""
    check_arguments = _object_checker.decode
    out: list[Message] | None = None
    synthesized: list[CallRef] = []
    dropped: list[CallRef] = []
    duplicate_at: set[int] = set()  # indexes into ``dropped`` of duplicates (reason known inline)
    removed: list[int] = []
    truncated: list[CallRef] = []
    unpaired: list[CallRef] = []
    block: dict[str, ToolCall] | None = None  # call id -> call, in call order; None: no block
    caller = _NOBODY  # the assistant message of the block
    caller_at = 0
    for i, m in enumerate(msgs):
        role = m.role
        if role == "tool":
            parts: tuple[ToolResult, ...] = m.parts  # type: ignore[assignment]  # a tool message
            if block is None:  # a tool message that does not follow a call block: all orphans
                dropped.extend(CallRef(i, r.call_id, r.name) for r in parts if type(r) is ToolResult)
                removed.append(i)
                if out is None:
                    out = list(msgs[:i])
                continue
            pop = block.pop
            for r in parts:
                if pop(r.call_id, None) is None:  # not a result the block waits for
                    keep = _drop_results(parts, r, block, caller, i, dropped, duplicate_at)
                    break
            else:
                if parts:  # every result answers a call of the block: kept as it is
                    if out is not None:
                        out.append(m)
                    continue
                keep = []
            if out is None:
                out = list(msgs[:i])
            if keep:
                out.append(replace(m, parts=tuple(keep)))
            else:
                removed.append(i)
            continue
        if block:  # the block just ended with calls unanswered
            if out is None:
                out = list(msgs[:i])
            out.append(_synthesize(block, caller_at, synthesized))
        block = None
        if out is not None:
            out.append(m)
        if role != "assistant":
            continue
        for part in m.parts:
            if type(part) is not ToolCall:
                continue
            try:
                check_arguments(part.arguments)
            except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):  # = ToolCall.truncated
                truncated.append(CallRef(i, part.id, part.name))
            cid = part.id
            if not cid:
                unpaired.append(CallRef(i, cid, part.name, "no-id"))
            elif block is None:
                block = {cid: part}
                caller, caller_at = m, i
            elif cid in block:
                unpaired.append(CallRef(i, cid, part.name, "duplicate-id"))
            else:
                block[cid] = part
    if out is None:
        out = list(msgs)
    if block:
        out.append(_synthesize(block, caller_at, synthesized))
    if not (synthesized or dropped or removed or truncated or unpaired):
        return out, _EMPTY
    if dropped:
        dropped = _explain_drops(msgs, dropped, duplicate_at)
    return out, HistoryRepair(
        tuple(synthesized), tuple(dropped), tuple(removed), tuple(truncated), tuple(unpaired)
    )


def _drop_results(
    parts: tuple[ToolResult, ...],
    stray: ToolResult,
    block: dict[str, ToolCall],
    caller: Message,
    i: int,
    dropped: list[CallRef],
    duplicate_at: set[int],
) -> list[ToolResult]:
    """The results of tool message ``i`` kept once ``stray`` turned out not to answer a call the
    block waits for (the results before it did); the others are recorded as dropped."""
    first = next(k for k, r in enumerate(parts) if r is stray)
    keep = list(parts[:first])
    pop = block.pop
    for k in range(first, len(parts)):
        r = parts[k]
        if k > first and pop(r.call_id, None) is not None:
            keep.append(r)
            continue
        if _calls(caller, r.call_id):  # its call is right here: an earlier result answered it
            duplicate_at.add(len(dropped))
        dropped.append(CallRef(i, r.call_id, r.name))
    return keep


def _synthesize(waiting: dict[str, ToolCall], caller_at: int, synthesized: list[CallRef]) -> Message:
    """The tool message closing the calls still waiting, in call order (rule 1 of ADR 0002)."""
    content = (Text(INTERRUPTED_TEXT),)
    results = tuple(ToolResult(c.id or "", c.name, content, synthesized=True) for c in waiting.values())
    synthesized.extend(CallRef(caller_at, r.call_id, r.name) for r in results)
    return Message("tool", results)


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
