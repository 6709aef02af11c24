"""``check_history``: every violation of the pairing rule, by message index.

It reports exactly what ``normalize_history`` would repair, plus the calls it cannot repair
(no id, a repeated id), so ``check_history(h) == []`` means ``h`` can be sent as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from tether.history._input import as_messages
from tether.history._normalize import normalize_history
from tether.messages import Message

__all__ = ["Problem", "ProblemKind", "check_history"]

ProblemKind: TypeAlias = Literal[
    "missing-result",
    "orphan-result",
    "misplaced-result",
    "duplicate-result",
    "empty-tool-message",
    "call-without-id",
    "duplicate-call-id",
]
"""``missing-result``: a call has no result right after it. ``orphan-result``: a result whose call
does not exist. ``misplaced-result``: a result whose call exists but not in the assistant message
right before its block (before the call, or far from it). ``duplicate-result``: a second result for
one call. ``empty-tool-message``: a tool message with no result. ``call-without-id`` /
``duplicate-call-id``: calls that cannot be paired (normalize reports them as ``unpaired``)."""

_ORDER: dict[str, int] = {
    "missing-result": 0,
    "call-without-id": 1,
    "duplicate-call-id": 2,
    "orphan-result": 3,
    "misplaced-result": 4,
    "duplicate-result": 5,
    "empty-tool-message": 6,
}


@dataclass(frozen=True, slots=True)
class Problem:
    """One violation of the pairing rule. ``message`` is the index in the checked history (the
    assistant message for call problems, the tool message for result problems)."""

    message: int
    call_id: str | None
    kind: ProblemKind
    text: str

    def __str__(self) -> str:
        return self.text


def check_history(history: Iterable[Message]) -> list[Problem]:
    """Every violation of the pairing rule, ordered by message index. Empty when the history can
    be sent to any provider as it is."""
    msgs = as_messages(history, "check_history")
    _, repair = normalize_history(msgs)
    problems: list[Problem] = []
    for ref in repair.synthesized:
        problems.append(
            Problem(
                ref.message,
                ref.call_id,
                "missing-result",
                f"message {ref.message}: call {ref.call_id!r} ({ref.name}) has no result "
                "in the tool messages right after it",
            )
        )
    for ref in repair.unpaired:
        if ref.reason == "no-id":
            kind: ProblemKind = "call-without-id"
            text = f"message {ref.message}: call to {ref.name} has no id, so no result can answer it"
        else:
            kind = "duplicate-call-id"
            text = f"message {ref.message}: call id {ref.call_id!r} ({ref.name}) is used twice in one message"
        problems.append(Problem(ref.message, ref.call_id, kind, text))
    for ref in repair.dropped:
        where = f"message {ref.message}: result for call {ref.call_id!r} ({ref.name})"
        if ref.reason == "duplicate":
            kind, text = "duplicate-result", f"{where} repeats an earlier result for that call"
        elif ref.reason == "no-call":
            kind, text = "orphan-result", f"{where} answers no call in the history"
        elif ref.reason == "before-call":
            kind, text = "misplaced-result", f"{where} comes before its call"
        else:
            kind, text = (
                "misplaced-result",
                f"{where} is not in the tool messages right after its call",
            )
        problems.append(Problem(ref.message, ref.call_id, kind, text))
    for index in repair.removed:
        if not msgs[index].parts:
            problems.append(
                Problem(index, None, "empty-tool-message", f"message {index}: tool message holds no result")
            )
    problems.sort(key=lambda p: (p.message, _ORDER[p.kind]))
    return problems
