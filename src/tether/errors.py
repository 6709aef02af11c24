"""The tether exception tree. Every error tether raises on purpose is a ``TetherError``.

    TetherError
    ├── UserError (ValueError)            the API was called wrongly (bad argument, bad tool, ...)
    │   ├── UnsupportedContent            a model cannot take a part (names message and part index)
    │   └── MissingExtra (ImportError)    an optional dependency is not installed (names the pip command)
    ├── DecodeError (ValueError)          bytes/JSON/transcripts that do not follow a contract (has .path)
    ├── HistoryError (ValueError)         a history that cannot be used as asked
    │   └── HistoryTooLarge               untrusted history over a sanitize limit (names limit and where)
    ├── RunError                          a run failed; carries .stage and .partial (resumable evidence)
    │   ├── ModelError                    the model/provider failed
    │   │   └── ModelHTTPError            an HTTP failure (status, provider, body excerpt)
    │   ├── MaxStepsError                 the step limit was reached
    │   ├── RunCanceled                   an explicit stop: a stream left early, stream.cancel(), ToolCanceled
    │   ├── ToolError                     a tool raised and was declared to propagate
    │   ├── OutputValidationError         the output failed validation after all retries
    │   └── ApprovalError                 a deferred decision was missing, forged, or bound elsewhere
    ├── ToolCanceled                      raised *by a tool* to stop its run deliberately (a signal)
    └── StoreError                        persistence failed
        ├── NotFound                      no such conversation *for this owner* (never leaks existence)
        ├── ConflictError                 optimistic concurrency: someone appended first
        ├── CorruptRecord                 a stored row does not decode/decrypt (names conversation, seq)
        └── EncryptionError               a key is missing or a row fails authentication

This module sits below every other tether package and imports nothing of tether at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tether.messages import Message, Usage

__all__ = [
    "ApprovalError",
    "ConflictError",
    "CorruptRecord",
    "DecodeError",
    "EncryptionError",
    "HistoryError",
    "HistoryTooLarge",
    "MaxStepsError",
    "MissingExtra",
    "ModelError",
    "ModelHTTPError",
    "NotFound",
    "OutputValidationError",
    "Partial",
    "RunCanceled",
    "RunError",
    "RunStage",
    "StoreError",
    "TetherError",
    "ToolCanceled",
    "ToolError",
    "UnsupportedContent",
    "UserError",
]


class TetherError(Exception):
    """Root of every error tether raises deliberately."""


class UserError(TetherError, ValueError):
    """The API was used wrongly: a bad argument, an impossible value, a misdeclared tool."""


class UnsupportedContent(UserError):
    """A part cannot be sent to the chosen model. Raised before any network call."""

    def __init__(self, message: str, *, message_index: int, part_index: int) -> None:
        super().__init__(f"{message} (message {message_index}, part {part_index})")
        self.message_index = message_index
        self.part_index = part_index


class MissingExtra(UserError, ImportError):
    """An optional dependency is not installed; the message names the pip command."""

    def __init__(self, feature: str, extra: str, package: str) -> None:
        super().__init__(
            f"{feature} needs the optional dependency {package!r}; "
            f"install it with: pip install 'tether[{extra}]'"
        )
        self.extra = extra


class DecodeError(TetherError, ValueError):
    """Input does not follow a contract. ``path`` is a JSON path such as ``$[3].parts[1].type``."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class HistoryError(TetherError, ValueError):
    """A history cannot be used as asked (e.g. a run without a prompt on a finished history)."""


class HistoryTooLarge(HistoryError):
    """Untrusted history exceeded a sanitize limit. ``limit`` names it; ``where`` says where."""

    def __init__(self, message: str, *, limit: str, where: str) -> None:
        super().__init__(f"{message} (limit {limit!r} at {where})")
        self.limit = limit
        self.where = where


RunStage = Literal["history", "validate", "model", "tools", "output", "approval", "store"]


@dataclass(frozen=True, slots=True)
class Partial:
    """Resumable evidence of a failed run: the conversation through the last completed turn.

    ``unfinished`` is the assistant message a stopped run was streaming (the text received so
    far, stop reason ``"canceled"``); it is not part of ``messages``. A store recorder keeps it
    or not by its policy.
    """

    messages: tuple[Message, ...] = field(repr=False)
    new_messages: tuple[Message, ...] = field(repr=False)
    usage: Usage
    requests: int
    tool_executions: int
    run_id: str
    conversation_id: str
    unfinished: Message | None = field(default=None, repr=False)


class RunError(TetherError):
    """A run failed. ``partial`` is ``None`` when nothing completed; otherwise resume from it."""

    def __init__(self, message: str, *, stage: RunStage, partial: Partial | None = None) -> None:
        super().__init__(message)
        self.stage: RunStage = stage
        self.partial = partial


class ModelError(RunError):
    """The model or its provider failed."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        provider: str,
        body: str = "",
        stage: RunStage = "model",
        partial: Partial | None = None,
    ) -> None:
        excerpt = body[:500]
        super().__init__(f"{provider} HTTP {status}: {message}", stage=stage, partial=partial)
        self.status = status
        self.provider = provider
        self.body = excerpt


class MaxStepsError(RunError):
    """The step limit was reached; ``partial.messages`` is repaired and resumable."""


class RunCanceled(RunError):
    """The run was stopped on purpose: its stream was left early or cancelled (``stream.cancel()``,
    a client disconnect, a web Stop), or a tool raised ``ToolCanceled``.

    Cancelling the asyncio task that awaits a run (``task.cancel()``, ``asyncio.timeout``, a
    ``TaskGroup``) is not a stop of the run: ``asyncio.CancelledError`` propagates, as asyncio
    requires, after the partial evidence was recorded; it carries the ``Partial`` as its
    ``partial`` attribute (see ``tether.agent.cancelled_partial``)."""


class ToolError(RunError):
    """A tool raised and was declared to let its exception propagate."""


class OutputValidationError(RunError):
    """The model's output failed validation after every retry."""


class ApprovalError(RunError):
    """A deferred decision is missing, forged, or bound to other arguments."""


class ToolCanceled(TetherError):
    """Raised by a tool to stop the run deliberately.

    Results recorded before the stop stay; every call left unanswered is closed with a
    synthesized no-result result, and the run raises ``RunCanceled`` with resumable evidence.
    """

    def __init__(self, reason: str = "a tool canceled the run") -> None:
        super().__init__(reason)
        self.reason = reason


class StoreError(TetherError):
    """A store operation failed."""


class NotFound(StoreError, KeyError):
    """No such conversation for this owner. Identical whether it is absent or someone else's."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class ConflictError(StoreError):
    """``expected_version`` did not match: another writer appended first."""

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class CorruptRecord(StoreError):
    """A stored row failed to decode or decrypt."""

    def __init__(self, message: str, *, conversation_id: str, seq: int) -> None:
        super().__init__(f"{message} (conversation {conversation_id}, seq {seq})")
        self.conversation_id = conversation_id
        self.seq = seq


class EncryptionError(StoreError):
    """A key is missing, or a row failed authentication."""
