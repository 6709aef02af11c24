"""Checking the decisions of ``DeferredResults`` against the turn that asked for them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from tether.errors import ApprovalError
from tether.messages import Message, Text, ToolCall, ToolResult

from ._approvals import Approve, DeferredResults, Deny, ExternalResult, pause_digest, read_token, turn_digest
from ._tools import Tool, result_content

__all__ = ["Resolution", "resolve_decisions"]


@dataclass(frozen=True, slots=True)
class Resolution:
    """Decided calls: each id maps to its fixed result (denied, external) or ``None`` (approved:
    run it); calls needing no decision are absent. ``claim`` is the replay-guard key of the signed
    pause and its expiry, claimed just before anything runs (``None`` without a secret)."""

    decided: dict[str, ToolResult | None]
    claim: tuple[str, float] | None


def _reject(call_id: str, name: str, why: str) -> ApprovalError:
    return ApprovalError(f"decision for call {call_id!r} ({name}) rejected: {why}", stage="approval")


class _Signed:
    """Token checks of one resume: every token must cover this conversation, its own call, this
    exact pending turn and one pause, and must not have expired."""

    def __init__(self, secret: bytes, conversation_id: str, turn: Message, now: float) -> None:
        self.secret = secret
        self.conversation_id = conversation_id
        self.turn = turn_digest(turn)
        self.now = now
        self.pause_id: str | None = None
        self.expires_at = 0.0

    def check(self, call: ToolCall, token: object) -> None:
        cid = call.id or ""
        claims = read_token(self.secret, token)
        if isinstance(claims, str):
            raise _reject(cid, call.name, claims)
        if claims.call_id != cid or claims.conversation_id != self.conversation_id:
            raise _reject(cid, call.name, "the approval token was minted for another call or conversation")
        if claims.turn != self.turn:
            raise _reject(
                cid,
                call.name,
                "the approval token does not match the pending turn (its calls, arguments or "
                "text were changed after the pause)",
            )
        if claims.expires_at <= self.now:
            when = datetime.fromtimestamp(claims.expires_at, UTC).isoformat(timespec="seconds")
            raise _reject(cid, call.name, f"the approval token expired at {when}")
        if self.pause_id is None:
            self.pause_id, self.expires_at = claims.pause_id, float(claims.expires_at)
        elif claims.pause_id != self.pause_id:
            raise _reject(cid, call.name, "the approval tokens belong to different pauses")


def resolve_decisions(
    turn: Message,
    deferred: DeferredResults,
    tools: Mapping[str, Tool[Any]],
    secret: bytes | None,
    conversation_id: str,
    now: float,
) -> Resolution:
    """Check ``deferred`` against the pending ``turn``; raise ``ApprovalError`` for a missing
    decision, a decision for a call that is not pending, a turn that no run paused, or (with an
    ``approval_secret``) a token that is missing, forged, expired or bound to anything else."""
    for field_name in ("approvals", "results"):
        mapping: object = getattr(deferred, field_name)
        if not isinstance(mapping, Mapping):
            raise ApprovalError(
                f"DeferredResults.{field_name} must be a mapping of call id to decision, not "
                f"{type(mapping).__name__}",
                stage="approval",
            )
    calls = {c.id: c for c in turn.tool_calls if c.id}
    if len(calls) != len(turn.tool_calls):
        raise ApprovalError(
            "the pending assistant turn has a tool call without an id or two calls sharing one; "
            "its results could not be paired",
            stage="approval",
        )
    for cid in (*deferred.approvals, *deferred.results):
        if cid not in calls:
            raise ApprovalError(
                f"a decision names call {cid!r}, which is not pending in the last assistant turn",
                stage="approval",
            )
    gated = [
        c
        for c in calls.values()
        if (t := tools.get(c.name)) is not None and (t.requires_approval or t.external)
    ]
    if not gated:
        raise ApprovalError(
            "the last assistant turn has no call that waits for an approval or an external result, "
            "so no run paused there; continue the conversation with a prompt instead",
            stage="approval",
        )
    signed = _Signed(secret, conversation_id, turn, now) if secret is not None else None
    out: dict[str, ToolResult | None] = {}
    for cid, call in calls.items():
        tool = tools.get(call.name)
        if tool is not None and tool.external:
            if cid not in deferred.results:
                raise _reject(cid, call.name, "the external tool's result is missing")
            given: Any = deferred.results[cid]
            if signed is not None:
                signed.check(call, given.token if isinstance(given, ExternalResult) else None)
            value = given.value if isinstance(given, ExternalResult) else given
            content, failed = result_content(value)
            failed = failed or (isinstance(given, ExternalResult) and given.failed)
            out[cid] = ToolResult(cid, call.name, content, failed=failed)
            continue
        if cid not in deferred.approvals:
            if tool is not None and tool.requires_approval:
                raise _reject(cid, call.name, "no approve/deny decision was given")
            continue
        decision = cast(object, deferred.approvals[cid])
        if not isinstance(decision, Approve | Deny | bool):
            raise _reject(
                cid,
                call.name,
                f"a decision must be Approve, Deny, True or False, not {type(decision).__name__}",
            )
        if signed is not None:
            signed.check(call, decision.token if isinstance(decision, Approve | Deny) else None)
        if isinstance(decision, Approve) or decision is True:
            out[cid] = None
        else:
            reason = decision.reason if isinstance(decision, Deny) else "the user denied this tool call"
            out[cid] = ToolResult(cid, call.name, (Text(f"denied: {reason}"),), failed=True)
    claim = None
    if signed is not None and signed.pause_id is not None:
        claim = (pause_digest(signed.pause_id), signed.expires_at)
    return Resolution(out, claim)
