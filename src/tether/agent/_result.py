"""``Result``: what a run returns, and the events a streamed run yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeAlias, TypeVar, cast

from tether.errors import UserError
from tether.history import HistoryRepair
from tether.messages import Message, ToolCall, ToolResult, Usage

from ._approvals import Deferred
from .compaction._report import CompactionReport

__all__ = [
    "CompactionEvent",
    "Event",
    "MessageCompleted",
    "ReasoningEvent",
    "Result",
    "RunCompleted",
    "TextEvent",
    "ToolCallDeltaEvent",
    "ToolCallFinished",
    "ToolCallStarted",
]

Output = TypeVar("Output")
MISSING: Any = object()
"""The output of a run that has none (deferred)."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Result(Generic[Output]):
    """The outcome of a run.

    ``messages`` is the canonical conversation (the supplied history as processed and repaired,
    then everything this run added); chain with ``agent.run("...", history=result.messages)``.
    ``new_messages`` is what this run added, each stamped with ``run_id`` and
    ``conversation_id``. ``repair`` is the report of the repair applied to the supplied history.
    When ``deferred`` is set the run stopped for approvals or external results and has no
    ``output``. ``stop_reason`` is the last model response's (``"stop"``, or ``"length"`` for an
    answer cut at the token limit and accepted with ``Agent(accept_truncated=True)``).
    With ``Agent(compaction=...)``, once the conversation is compacted ``messages`` is the
    compacted view (the summary, then the messages after its boundary; pass it back as
    ``history=`` and compaction continues from it) and ``compactions`` reports each compaction
    this run made (docs/compaction.md).
    """

    messages: tuple[Message, ...]
    new_messages: tuple[Message, ...]
    usage: Usage
    requests: int
    tool_executions: int
    run_id: str
    conversation_id: str
    deferred: Deferred | None = None
    repair: HistoryRepair = HistoryRepair()  # noqa: RUF009 - the report is immutable
    stop_reason: str | None = None
    _output: Any = field(default=MISSING, repr=False)
    compactions: tuple[CompactionReport, ...] = ()

    def __repr__(self) -> str:  # short: a conversation may hold thousands of messages
        shown = "<deferred>" if self._output is MISSING else repr(self._output)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        return (
            f"Result(output={shown}, messages={len(self.messages)}, new_messages={len(self.new_messages)}, "
            f"requests={self.requests}, tool_executions={self.tool_executions}, run_id={self.run_id!r}, "
            f"conversation_id={self.conversation_id!r})"
        )

    @property
    def output(self) -> Output:
        """The validated output (``str`` for text agents). Raises when the run was deferred."""
        if self._output is MISSING:
            raise UserError(
                "the run ended with pending tool calls (result.deferred); resume it with "
                "agent.run(history=result.messages, deferred=DeferredResults(...))"
            )
        return cast(Output, self._output)


@dataclass(frozen=True, slots=True)
class _EventBase:
    run_id: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class TextEvent(_EventBase):
    """A piece of assistant text; ``index`` is the part index in the message being built."""

    step: int
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningEvent(_EventBase):
    """A piece of reasoning text."""

    step: int
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDeltaEvent(_EventBase):
    """A tool call being streamed by the model: the first delta of a call carries its ``id`` and
    ``name``; later ones more ``arguments`` text. ``index`` is the call's part index."""

    step: int
    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted(_EventBase):
    """A tool begins executing."""

    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolCallFinished(_EventBase):
    """A call received its result (executed, failed validation, denied or synthesized)."""

    call: ToolCall
    result: ToolResult


@dataclass(frozen=True, slots=True)
class MessageCompleted(_EventBase):
    """A message was added to the conversation (stamped with the run's ids)."""

    message: Message


@dataclass(frozen=True, slots=True)
class CompactionEvent(_EventBase):
    """The conversation was compacted before model request ``step``: ``report`` says what was
    summarized, elided or left out, the tokens before and after, and any summarizer failure
    (``report.line()`` is one line for a terminal). ``report.record_id`` names the compaction
    record kept in the store, if one was made."""

    step: int
    report: CompactionReport


@dataclass(frozen=True, slots=True)
class RunCompleted(_EventBase):
    """The last event: the same ``Result`` that ``run`` returns."""

    result: Result[Any]


Event: TypeAlias = (
    TextEvent
    | ReasoningEvent
    | ToolCallDeltaEvent
    | ToolCallStarted
    | ToolCallFinished
    | MessageCompleted
    | CompactionEvent
    | RunCompleted
)
