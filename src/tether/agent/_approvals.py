"""Deferred results: calls that wait for a person's approval or an external executor.

An approval that arrives in client-held history attests nothing by itself. With an
``approval_secret`` a run that pauses *signs the pause*: it mints a pause id, and every pending
call carries a v2 token, an HMAC-SHA256 over

    (pause id, conversation id, the call id it decides, a digest of the whole pending turn, expiry)

The digest covers the canonical JSON of the pending assistant turn, so a resume whose turn differs
in any byte (another argument, another call, an added ungated call) is refused before anything
runs; a turn that no run paused has no token and is refused too. A pause is single-use: the
resume claims ``sha256(pause id)`` in a replay guard (:class:`ReplayGuard`), so replaying the same
decisions runs nothing twice. ADR 0011 records the format and which guarantee holds where.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from tether.messages import Message, ToolCall, dumps_message

__all__ = [
    "Approve",
    "Deferred",
    "DeferredResults",
    "Deny",
    "ExternalResult",
    "MemoryReplayGuard",
    "PendingCall",
    "ReplayGuard",
    "TokenClaims",
    "mint_token",
    "pause_digest",
    "read_token",
    "turn_digest",
]

_VERSION = "v2"


class _Payload(msgspec.Struct, array_like=True, frozen=True):
    version: str
    pause_id: str
    conversation_id: str
    call_id: str
    turn: str
    expires_at: int


_decode_payload = msgspec.json.Decoder(_Payload)


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """What a verified token attests."""

    pause_id: str
    conversation_id: str
    call_id: str
    turn: str
    expires_at: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def turn_digest(turn: Message) -> str:
    """The digest of a pending assistant turn: base64url(SHA-256 of its canonical JSON)."""
    return _b64(hashlib.sha256(dumps_message(turn)).digest())


def pause_digest(pause_id: str) -> str:
    """The key a replay guard stores for a pause: hex SHA-256, never the pause id itself."""
    return hashlib.sha256(b"tether-pause\x00" + pause_id.encode()).hexdigest()


def _mac(secret: bytes, body: str) -> str:
    return _b64(hmac.new(secret, body.encode(), hashlib.sha256).digest())


def mint_token(secret: bytes, claims: TokenClaims) -> str:
    """``v2.<payload>.<mac>``: base64url JSON claims and the HMAC-SHA256 over ``v2.<payload>``."""
    payload = msgspec.json.encode(
        _Payload(
            _VERSION,
            claims.pause_id,
            claims.conversation_id,
            claims.call_id,
            claims.turn,
            claims.expires_at,
        )
    )
    body = f"{_VERSION}.{_b64(payload)}"
    return f"{body}.{_mac(secret, body)}"


def read_token(secret: bytes, token: object) -> TokenClaims | str:
    """The claims of a genuine token, or why ``token`` is not one (never raises)."""
    if token is None or token == "":
        return "the decision carries no approval token"
    if not isinstance(token, str):
        return f"the approval token must be a string, not {type(token).__name__}"
    if not token.isascii() or len(token) > 4096:
        return "the approval token is malformed"
    if token.startswith("v1."):
        return (
            "approval tokens of format v1 are no longer accepted (v2 tokens bind the whole paused "
            "turn and expire); run the conversation again to get a new pause"
        )
    version, _, rest = token.partition(".")
    payload_text, _, mac = rest.rpartition(".")
    if version != _VERSION or not payload_text or not mac:
        return "the approval token is malformed"
    expected = _mac(secret, f"{version}.{payload_text}")
    if not hmac.compare_digest(expected.encode(), mac.encode()):
        return "the approval token does not match (forged, or minted with another secret)"
    try:
        payload = _decode_payload.decode(_unb64(payload_text))
    except (binascii.Error, ValueError, msgspec.DecodeError):
        return "the approval token is malformed"
    return TokenClaims(
        payload.pause_id, payload.conversation_id, payload.call_id, payload.turn, payload.expires_at
    )


@runtime_checkable
class ReplayGuard(Protocol):
    """Remembers single-use keys. Every ``tether`` store is one (``claim_token``), shared by all
    processes on its database; ``MemoryReplayGuard`` covers one process."""

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        """Mark ``digest`` used until ``expires_at`` (unix seconds); False if it already was."""
        ...


class MemoryReplayGuard:
    """A bounded in-process replay guard. One instance, shared by every ``Agent`` of the process
    that is given no ``replay_guard``, is the default, so a replay to any agent of the same process
    is refused. Safe to share between event loops in several threads.

    Holds at most ``max_entries`` unexpired keys; beyond that the oldest claims are forgotten
    (each needs a genuine paused run to exist, so flooding it is costly; use a store as guard
    when that matters or when several processes serve one agent).
    """

    def __init__(self, max_entries: int = 10_000, clock: Any = time.time) -> None:
        self._max = max_entries
        self._clock = clock
        self._used: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    async def claim_token(self, digest: str, expires_at: float) -> bool:
        with self._lock:  # nothing awaits inside: the lock only orders threads
            return self._claim(digest, expires_at)

    def _claim(self, digest: str, expires_at: float) -> bool:
        now = float(self._clock())
        while self._used:
            oldest, until = next(iter(self._used.items()))
            if until > now and len(self._used) < self._max:
                break
            del self._used[oldest]
        until = self._used.get(digest)
        if until is not None and until > now:
            return False
        self._used[digest] = expires_at
        return True


_PROCESS_GUARD = MemoryReplayGuard()


def process_replay_guard() -> MemoryReplayGuard:
    """The replay guard every ``Agent`` without a ``replay_guard`` shares (one per process)."""
    return _PROCESS_GUARD


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call the run did not execute. ``kind`` says what it waits for; ``token`` is the signed
    token to send back with the decision (``None`` without an ``approval_secret``)."""

    call: ToolCall
    kind: Literal["approval", "external"]
    token: str | None = None


@dataclass(frozen=True, slots=True)
class Deferred:
    """What a run left pending: ``result.deferred``. The history ends at the assistant turn that
    asked; resume with ``agent.run(history=result.messages, deferred=DeferredResults(...))``.

    ``pause_id`` names this pause (every token covers it); ``expires_at`` (unix seconds) is when
    the tokens stop being accepted (``None`` without an ``approval_secret``).
    """

    calls: tuple[PendingCall, ...]
    pause_id: str = ""
    expires_at: float | None = None

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
