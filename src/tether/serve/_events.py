"""The events of a run as stored in the event log and sent on the stream: one JSON object each,
with a ``type``, the ``run_id`` and the ``conversation_id``; messages and parts in the tether JSON
contract. ``docs/serve.md`` lists them; the structs below are their schema."""

from __future__ import annotations

from typing import Any

import msgspec

from tether.agent import (
    CompactionEvent,
    Event,
    MessageCompleted,
    ReasoningEvent,
    TextEvent,
    ToolCallDeltaEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.messages import Message, ToolCall, ToolResult, Usage

__all__ = [
    "TERMINAL_TYPES",
    "EventOut",
    "HistoryCompactedEvent",
    "RunCanceledEvent",
    "RunCompletedEvent",
    "RunDeletedEvent",
    "RunFailedEvent",
    "RunInterruptedEvent",
    "RunPausedEvent",
    "RunRecoveredEvent",
    "RunResumedEvent",
    "RunStartedEvent",
    "encode_agent_event",
    "encode_event",
    "event_type",
    "traced",
]


class _Traced(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    trace_id: str | None = None
    """The W3C trace id (32 hex digits) of the request that started or resumed the run, when it
    sent a valid ``traceparent`` or the service's telemetry is on: joins the event to the run's
    spans. Absent otherwise."""


class _Base(_Traced, frozen=True, tag_field="type"):
    run_id: str
    conversation_id: str


class RunStartedEvent(_Base, frozen=True, tag="run.started"):
    """Event 1 of every run: the prompt as the user sent it."""

    prompt: str


class TextDeltaEvent(_Base, frozen=True, tag="text.delta"):
    """A piece of the assistant's text (``index``: the part of the message being built)."""

    step: int
    index: int
    text: str


class ReasoningDeltaEvent(_Base, frozen=True, tag="reasoning.delta"):
    """A piece of the model's reasoning."""

    step: int
    index: int
    text: str


class ToolDeltaEvent(_Base, frozen=True, tag="tool.delta"):
    """A tool call being streamed by the model: the first delta of a call has its ``id`` and
    ``name``, later ones more ``arguments`` text (``index``: the call's part index)."""

    step: int
    index: int
    id: str | None
    name: str | None
    arguments: str


class ToolStartedEvent(_Base, frozen=True, tag="tool.started"):
    """A tool begins executing."""

    call: ToolCall


class ToolFinishedEvent(_Base, frozen=True, tag="tool.finished"):
    """A call received its result (executed, invalid, denied or synthesized)."""

    call: ToolCall
    result: ToolResult


class MessageCompletedEvent(_Base, frozen=True, tag="message.completed"):
    """A message was added to the conversation (and is stored by the run)."""

    message: Message


class HistoryCompactedEvent(_Base, frozen=True, tag="history.compacted"):
    """The conversation outgrew the model's context, and was compacted before model request
    ``step``: from now on the model sees a summary of the older messages (and placeholders for
    old tool output) followed by the recent ones. The stored log keeps every message; the
    compaction is a record beside it. ``line`` says it in one sentence; ``report`` is the
    ``CompactionReport`` (tokens before and after, what was summarized, elided or dropped, a
    summarizer failure)."""

    step: int
    line: str
    report: dict[str, Any]


class PendingCall(msgspec.Struct, frozen=True):
    call_id: str
    name: str
    arguments: str
    kind: str


class RunPausedEvent(_Base, frozen=True, tag="run.paused"):
    """The run waits for decisions on ``calls`` (``POST /v1/runs/{id}/decisions``)."""

    pause_id: str
    calls: list[PendingCall]
    expires_at: float


class RunResumedEvent(_Base, frozen=True, tag="run.resumed"):
    """Decisions were accepted; the run goes on (``decisions``: call id → approve/deny/result)."""

    pause_id: str
    decisions: dict[str, str]


class RunRecoveredEvent(_Base, frozen=True, tag="run.recovered"):
    """The run moved: the process running it died (or stopped before the run ended) and this
    process continues it from its stored steps. ``from_process`` is the process it moved from;
    ``stored`` the messages its conversation held; ``repeats`` what is done again:
    ``"prompt"`` (nothing of the run was stored: it starts again from its prompt),
    ``"model_request"`` (the request in flight is repeated), ``"tool_calls"`` (a stored turn's
    calls run: a started side effect is closed as "outcome unknown", never re-run) or
    ``"nothing"`` (the run's last turn was stored: it only ends). Deltas received since the last
    ``message.completed`` belonged to the lost request: a client drops them."""

    from_process: str
    stored: int
    repeats: str
    reason: str


class RunCompletedEvent(_Base, frozen=True, tag="run.completed"):
    """The last event of a finished run: its output (text, or the structured value)."""

    output: Any
    usage: Usage
    requests: int
    tool_executions: int


class ErrorInfo(msgspec.Struct, frozen=True):
    type: str
    message: str


class RunFailedEvent(_Base, frozen=True, tag="run.failed"):
    """The last event of a failed run; what completed before the failure is stored."""

    error: ErrorInfo


class RunCanceledEvent(_Base, frozen=True, tag="run.canceled"):
    """The last event of a run stopped by ``POST /v1/runs/{id}/cancel``; its partial is stored."""

    reason: str


class RunInterruptedEvent(_Base, frozen=True, tag="run.interrupted"):
    """The last event of a run whose process stopped or died; the conversation was closed
    through the ledger (a started side effect says "outcome unknown" and is never re-run)."""

    reason: str


class RunDeletedEvent(_Base, frozen=True, tag="run.deleted"):
    """The last event of a stream whose run was deleted with its conversation before the stream
    read the run's own last event. Sent, never stored: it has no ``id:`` (nothing to resume)."""

    reason: str


EventOut = (
    RunStartedEvent
    | TextDeltaEvent
    | ReasoningDeltaEvent
    | ToolDeltaEvent
    | ToolStartedEvent
    | ToolFinishedEvent
    | MessageCompletedEvent
    | HistoryCompactedEvent
    | RunPausedEvent
    | RunResumedEvent
    | RunRecoveredEvent
    | RunCompletedEvent
    | RunFailedEvent
    | RunCanceledEvent
    | RunInterruptedEvent
    | RunDeletedEvent
)
TERMINAL_TYPES = frozenset({"run.completed", "run.failed", "run.canceled", "run.interrupted"})
"""Event types after which a run's stream ends."""

_encoder = msgspec.json.Encoder()


class _TypeOnly(msgspec.Struct):
    type: str = ""


_type_decoder = msgspec.json.Decoder(_TypeOnly)


def encode_event(event: EventOut) -> bytes:
    return _encoder.encode(event)


def event_type(data: bytes) -> str:
    """The ``type`` of a stored event."""
    return _type_decoder.decode(data).type


def traced(event: EventOut, trace_id: str | None) -> EventOut:
    """``event`` with the run's trace id (unchanged when there is none)."""
    return event if trace_id is None else msgspec.structs.replace(event, trace_id=trace_id)


def encode_agent_event(event: Event, trace_id: str | None = None) -> bytes | None:
    """A streamed agent event as stored JSON, with the run's ``trace_id`` when it has one;
    ``None`` for ``RunCompleted`` (the run manager writes the run's last event itself)."""
    out = _agent_event(event)
    return None if out is None else _encoder.encode(traced(out, trace_id))


def _agent_event(event: Event) -> EventOut | None:
    r, c = event.run_id, event.conversation_id
    kind = type(event)
    if kind is TextEvent:
        assert isinstance(event, TextEvent)
        return TextDeltaEvent(r, c, event.step, event.index, event.text)
    if kind is ReasoningEvent:
        assert isinstance(event, ReasoningEvent)
        return ReasoningDeltaEvent(r, c, event.step, event.index, event.text)
    if kind is ToolCallDeltaEvent:
        assert isinstance(event, ToolCallDeltaEvent)
        return ToolDeltaEvent(r, c, event.step, event.index, event.id, event.name, event.arguments)
    if kind is MessageCompleted:
        assert isinstance(event, MessageCompleted)
        return MessageCompletedEvent(r, c, event.message)
    if kind is ToolCallStarted:
        assert isinstance(event, ToolCallStarted)
        return ToolStartedEvent(r, c, event.call)
    if kind is ToolCallFinished:
        assert isinstance(event, ToolCallFinished)
        return ToolFinishedEvent(r, c, event.call, event.result)
    if kind is CompactionEvent:
        assert isinstance(event, CompactionEvent)
        return HistoryCompactedEvent(r, c, event.step, event.report.line(), event.report.to_dict())
    return None
