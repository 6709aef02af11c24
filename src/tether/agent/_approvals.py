"""Deferred results: calls that wait for a person's approval or an external executor.

An approval that arrives in client-held history attests nothing by itself. With an
``approval_secret`` every pending call carries an HMAC-SHA256 token bound to the conversation id,
the call id, the tool name and the exact argument text; a decision is accepted only with the
token minted for exactly that call in exactly that conversation.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from tether.messages import ToolCall

__all__ = [
    "Approve",
    "Deferred",
    "DeferredResults",
    "Deny",
    "ExternalResult",
    "PendingCall",
    "approval_token",
    "check_token",
]

_TOKEN_VERSION = "v1"


def approval_token(secret: bytes, conversation_id: str, call: ToolCall) -> str:
    """The token for ``call`` in ``conversation_id``: ``v1.`` + base64url(HMAC-SHA256)."""
    payload = msgspec.json.encode([_TOKEN_VERSION, conversation_id, call.id, call.name, call.arguments])
    digest = hmac.new(secret, payload, hashlib.sha256).digest()
    return f"{_TOKEN_VERSION}.{base64.urlsafe_b64encode(digest).rstrip(b'=').decode()}"


def check_token(secret: bytes, conversation_id: str, call: ToolCall, token: object) -> str | None:
    """``None`` when ``token`` is valid for the call; otherwise why it is not."""
    if token is None or token == "":
        return "the decision carries no approval token"
    if not isinstance(token, str):
        return f"the approval token must be a string, not {type(token).__name__}"
    expected = approval_token(secret, conversation_id, call)
    if not hmac.compare_digest(expected.encode(), token.encode()):
        return (
            "the approval token does not match this call (forged, or bound to another "
            "conversation, call, tool or arguments)"
        )
    return None


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call the run did not execute. ``kind`` says what it waits for; ``token`` is the HMAC
    token to send back with the decision (``None`` without an ``approval_secret``)."""

    call: ToolCall
    kind: Literal["approval", "external"]
    token: str | None = None


@dataclass(frozen=True, slots=True)
class Deferred:
    """What a run left pending: ``result.deferred``. The history ends at the assistant turn that
    asked; resume with ``agent.run(history=result.messages, deferred=DeferredResults(...))``."""

    calls: tuple[PendingCall, ...]

    @property
    def approvals(self) -> tuple[PendingCall, ...]:
        return tuple(c for c in self.calls if c.kind == "approval")

    @property
    def external(self) -> tuple[PendingCall, ...]:
        return tuple(c for c in self.calls if c.kind == "external")

    def approve_all(self) -> DeferredResults:
        """Approve every pending approval with its token (external calls still need results)."""
        return DeferredResults(approvals={c.call.id or "": Approve(c.token) for c in self.approvals})


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call. ``token`` is the pending call's token (required with an approval secret)."""

    token: str | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; the model receives a failed result saying ``reason``."""

    reason: str = "the user denied this tool call"
    token: str | None = None


@dataclass(frozen=True, slots=True)
class ExternalResult:
    """The outcome of a call executed outside the run (a client-side tool)."""

    value: Any
    token: str | None = None
    failed: bool = False


@dataclass(frozen=True, slots=True)
class DeferredResults:
    """Decisions for the calls a run deferred, keyed by call id.

    ``approvals`` maps to ``Approve``/``Deny`` (or ``True``/``False``, which carry no token);
    ``results`` maps external calls to an ``ExternalResult`` (or a bare value, no token).
    """

    approvals: Mapping[str, Approve | Deny | bool] = field(default_factory=lambda: {})
    results: Mapping[str, ExternalResult | Any] = field(default_factory=lambda: {})
