"""Checking the decisions of ``DeferredResults`` against the turn that asked for them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from tether.errors import ApprovalError
from tether.messages import Message, Text, ToolResult

from ._approvals import Approve, DeferredResults, Deny, ExternalResult, check_token
from ._tools import Tool, result_content

__all__ = ["resolve_decisions"]


def _reject(call_id: str, name: str, why: str) -> ApprovalError:
    return ApprovalError(f"decision for call {call_id!r} ({name}) rejected: {why}", stage="approval")


def resolve_decisions(
    turn: Message,
    deferred: DeferredResults,
    tools: Mapping[str, Tool[Any]],
    secret: bytes | None,
    conversation_id: str,
) -> dict[str, ToolResult | None]:
    """Map each decided call id to its fixed result (denied, external) or ``None`` (approved: run
    it). Calls needing no decision are absent. Raises ``ApprovalError`` for a missing decision,
    a decision for a call that is not pending, or a token that is missing, forged or bound
    elsewhere (with an ``approval_secret``)."""
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
    out: dict[str, ToolResult | None] = {}
    for cid, call in calls.items():
        tool = tools.get(call.name)
        needs_approval = tool is not None and tool.requires_approval
        external = tool is not None and tool.external
        if external:
            if cid not in deferred.results:
                raise _reject(cid, call.name, "the external tool's result is missing")
            given: Any = deferred.results[cid]
            token = given.token if isinstance(given, ExternalResult) else None
            if secret is not None:
                why = check_token(secret, conversation_id, call, token)
                if why is not None:
                    raise _reject(cid, call.name, why)
            value = given.value if isinstance(given, ExternalResult) else given
            content, failed = result_content(value)
            failed = failed or (isinstance(given, ExternalResult) and given.failed)
            out[cid] = ToolResult(cid, call.name, content, failed=failed)
            continue
        if cid not in deferred.approvals:
            if needs_approval:
                raise _reject(cid, call.name, "no approve/deny decision was given")
            continue
        decision = cast(object, deferred.approvals[cid])
        if not isinstance(decision, Approve | Deny | bool):
            raise _reject(
                cid,
                call.name,
                f"a decision must be Approve, Deny, True or False, not {type(decision).__name__}",
            )
        token = decision.token if isinstance(decision, Approve | Deny) else None
        if secret is not None:
            why = check_token(secret, conversation_id, call, token)
            if why is not None:
                raise _reject(cid, call.name, why)
        approved = isinstance(decision, Approve) or decision is True
        if approved:
            out[cid] = None
        else:
            reason = decision.reason if isinstance(decision, Deny) else "the user denied this tool call"
            out[cid] = ToolResult(cid, call.name, (Text(f"denied: {reason}"),), failed=True)
    return out
