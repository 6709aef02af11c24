"""A run's pause as the service keeps it: the calls waiting and their tokens (the only authority
a decision is checked against), and the decisions a client sends, checked against it."""

from __future__ import annotations

import msgspec

from tether.agent import Approve, DeferredResults, Deny, ExternalResult
from tether.messages import ToolCall

from ._errors import ApiError, check_part_bytes
from ._events import PendingCall
from ._schemas import Decision, DecisionsIn

__all__ = ["StoredCall", "StoredPause", "decisions_for", "decode_pause", "public_calls"]

_encoder = msgspec.json.Encoder()


class StoredCall(msgspec.Struct, frozen=True):
    call: ToolCall
    kind: str
    token: str | None = None


class StoredPause(msgspec.Struct, frozen=True):
    """The server-side record of a pause: the only authority a decision is checked against."""

    pause_id: str
    expires_at: float
    calls: list[StoredCall]


_pause_decoder = msgspec.json.Decoder(StoredPause)


def decode_pause(data: bytes) -> StoredPause:
    return _pause_decoder.decode(data)


def public_calls(pause: StoredPause) -> list[PendingCall]:
    """The pending calls as a client sees them: no tokens."""
    return [PendingCall(c.call.id or "", c.call.name, c.call.arguments, c.kind) for c in pause.calls]


def _check_size(decision: Decision, where: str, limit: int) -> None:
    """413 for a ``reason`` or ``value`` over ``limit`` bytes: it becomes a tool result the
    conversation keeps, bounded like a prompt or an imported part."""
    if not limit:
        return
    if decision.reason is not None:
        check_part_bytes(decision.reason, limit, f"{where}.reason")
    if decision.value is not None and len(_encoder.encode(decision.value)) > limit:
        raise ApiError(413, f"{where}.value: over the limit (max_part_bytes={limit})")


def decisions_for(
    pause: StoredPause, body: DecisionsIn, limit: int = 0
) -> tuple[DeferredResults, dict[str, str]]:
    """The ``DeferredResults`` for ``body`` with the tokens of the stored pause; 422 for a
    decision on an unknown call, a repeated one, a wrong kind, or a pending call left undecided;
    413 for a reason or value over ``limit`` bytes."""
    calls = {c.call.id: c for c in pause.calls}
    approvals: dict[str, Approve | Deny] = {}
    results: dict[str, ExternalResult] = {}
    summary: dict[str, str] = {}
    for i, d in enumerate(body.decisions):
        where = f"$.decisions[{i}]"
        stored = calls.get(d.call_id)
        if stored is None:
            raise ApiError(422, f"{where}.call_id: call {d.call_id[:100]!r} is not pending in this pause")
        if d.call_id in summary:
            raise ApiError(422, f"{where}.call_id: call {d.call_id!r} is decided twice")
        if stored.kind == "external" and d.decision != "result":
            raise ApiError(422, f"{where}.decision: call {d.call_id!r} is external and needs a result")
        if stored.kind == "approval" and d.decision == "result":
            raise ApiError(422, f"{where}.decision: call {d.call_id!r} needs approve or deny")
        _check_size(d, where, limit)
        if d.decision == "approve":
            approvals[d.call_id] = Approve(stored.token)
        elif d.decision == "deny":
            approvals[d.call_id] = Deny(d.reason or "the user denied this tool call", stored.token)
        else:
            results[d.call_id] = ExternalResult(d.value, stored.token, d.failed)
        summary[d.call_id] = d.decision
    missing = [cid for cid in calls if cid not in summary]
    if missing:
        raise ApiError(422, f"$.decisions: no decision for pending call(s) {', '.join(map(repr, missing))}")
    return DeferredResults(approvals=approvals, results=results), summary
