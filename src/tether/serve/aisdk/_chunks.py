"""A run's stored events as the AI SDK's UI message stream chunks (protocol ``v1``).

One run is one assistant UI message (``start.messageId`` is tether's run id); each model request
of the run is one step (``start-step`` … ``finish-step``). Text and reasoning stream as they
arrive; a tool call is sent whole when the model's message completes (the completed message is
authoritative: its call ids and arguments are the ones the run executes), its output as the call
finishes. A pause for approvals sends ``tool-approval-request`` (approval id
``<pause id>:<call id>``); the decisions, read back from the log, ``tool-approval-response``. A
translator fed a run's events from its first one always says the same: a replay rebuilds the
message the live stream built.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from tether.messages import Message, Reasoning, Text, ToolCall, ToolResult, Usage

from .._events import (
    EventOut,
    HistoryCompactedEvent,
    MessageCompletedEvent,
    ReasoningDeltaEvent,
    RunCanceledEvent,
    RunCompletedEvent,
    RunFailedEvent,
    RunInterruptedEvent,
    RunPausedEvent,
    RunRecoveredEvent,
    RunResumedEvent,
    TextDeltaEvent,
    ToolFinishedEvent,
)

__all__ = ["COMPACTION_PART", "Translator", "approval_id", "encode", "parse_input", "usage_json"]

Json = dict[str, Any]
COMPACTION_PART = "data-tether-compaction"
"""The data part saying the conversation was compacted before a step (the protocol has none)."""
_decoder = msgspec.json.Decoder(EventOut)
_encoder = msgspec.json.Encoder()
_json = msgspec.json.Decoder()


def encode(chunk: Json, seq: int | None = None) -> bytes:
    """One chunk as a Server-Sent Event (``seq``: the log's event id, on an event's last chunk)."""
    head = b"" if seq is None else b"id: %d\n" % seq
    return head + b"data: " + _encoder.encode(chunk) + b"\n\n"


def approval_id(pause_id: str, call_id: str) -> str:
    """The approval id of one pending call of a pause."""
    return f"{pause_id}:{call_id}"


def usage_json(usage: Usage) -> Json:
    out: Json = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.reasoning_tokens:
        out["reasoningTokens"] = usage.reasoning_tokens
    if usage.cache_read_tokens:
        out["cachedInputTokens"] = usage.cache_read_tokens
    return out


def parse_input(call: ToolCall) -> tuple[Any, str | None]:
    """The call's arguments as JSON, or the raw text and why it is not JSON."""
    if not call.arguments.strip():
        return {}, None
    try:
        return _json.decode(call.arguments), None
    except msgspec.DecodeError as exc:
        return call.arguments, f"the model's arguments are not JSON: {exc}"


class Translator:
    """Turns one run's stored events into UI message chunks (``feed``), keeping what is open."""

    def __init__(self, run_id: str, conversation_id: str) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.epoch = 0  # how many times the run was resumed: a resumed run counts its steps anew
        self.step: tuple[int, int] = (0, 0)  # (epoch, model request) being translated
        self.deltas = False  # deltas of self.step were seen
        self.in_step = False
        self.text: str | None = None  # the open text part
        self.reasoning: str | None = None  # the open reasoning part
        self.streamed: set[tuple[int, int, int]] = set()  # (epoch, step, part index) streamed
        self.results: set[str] = set()  # call ids of this step's outputs sent
        self.approvals: dict[str, str] = {}  # call id → approval id of the current pause
        self.denied: set[str] = set()
        self.stop_reason: str | None = None
        self.paused: RunPausedEvent | None = None  # the run's last event so far was a pause
        self.done = False

    def meta(self, **extra: Any) -> Json:
        """The message metadata: which conversation and run this message is."""
        return {"tether": {"conversationId": self.conversation_id, "runId": self.run_id, **extra}}

    def _part_id(self, index: int) -> str:
        epoch, step = self.step
        return f"{self.run_id}.{epoch}.{step}.{index}"

    def _close_parts(self) -> Iterator[Json]:
        if self.text is not None:
            yield {"type": "text-end", "id": self.text}
            self.text = None
        if self.reasoning is not None:
            yield {"type": "reasoning-end", "id": self.reasoning}
            self.reasoning = None

    def _open_step(self) -> Iterator[Json]:
        if not self.in_step:
            self.in_step = True
            yield {"type": "start-step"}

    def close_step(self) -> Iterator[Json]:
        yield from self._close_parts()
        if self.in_step:
            self.in_step = False
            yield {"type": "finish-step"}

    def _enter(self, step: int) -> Iterator[Json]:
        """Deltas of model request ``step``: a new step closes the previous one."""
        key = (self.epoch, step)
        if key != self.step:
            yield from self.close_step()
            self.step = key
            self.results.clear()
        yield from self._open_step()
        self.deltas = True

    def feed(self, data: bytes) -> list[Json]:
        """The chunks for one stored event (its JSON bytes)."""
        return list(self._feed(_decoder.decode(data)))

    def _feed(self, event: EventOut) -> Iterator[Json]:
        self.paused = None
        if isinstance(event, TextDeltaEvent | ReasoningDeltaEvent):
            yield from self._enter(event.step)
            kind = "text" if isinstance(event, TextDeltaEvent) else "reasoning"
            pid = self._part_id(event.index)
            if getattr(self, kind) != pid:
                yield from self._close_parts()
                yield {"type": f"{kind}-start", "id": pid}
                setattr(self, kind, pid)
                self.streamed.add((self.step[0], self.step[1], event.index))
            if event.text:
                yield {"type": f"{kind}-delta", "id": pid, "delta": event.text}
        elif isinstance(event, MessageCompletedEvent):
            yield from self._completed(event.message)
        elif isinstance(event, ToolFinishedEvent):
            yield from self._output(event.result)
        elif isinstance(event, HistoryCompactedEvent):
            data: Json = {"step": event.step, "line": event.line, "report": event.report}
            yield {"type": COMPACTION_PART, "id": f"{self.run_id}.compaction.{event.step}", "data": data}
        elif isinstance(event, RunPausedEvent):
            yield from self._close_parts()
            self.approvals = {
                c.call_id: approval_id(event.pause_id, c.call_id) for c in event.calls if c.kind == "approval"
            }
            for call_id, aid in self.approvals.items():
                yield {"type": "tool-approval-request", "approvalId": aid, "toolCallId": call_id}
            self.paused = event
        elif isinstance(event, RunResumedEvent):
            self.epoch += 1
            for call_id, decision in event.decisions.items():
                aid = self.approvals.get(call_id)
                if aid is not None and decision in ("approve", "deny"):
                    if decision == "deny":
                        self.denied.add(call_id)
                    yield {
                        "type": "tool-approval-response",
                        "approvalId": aid,
                        "approved": decision == "approve",
                    }
        elif isinstance(event, RunRecoveredEvent):
            yield from self.close_step()  # the lost request's parts end; the continuation numbers anew
            self.epoch += 1
            data = {"fromProcess": event.from_process, "repeats": event.repeats, "reason": event.reason}
            yield {"type": "data-tether-recovered", "data": data, "transient": True}
        elif isinstance(event, RunCompletedEvent):
            yield from self.close_step()
            reason = "length" if self.stop_reason == "length" else "stop"
            meta = self.meta(status="completed", usage=usage_json(event.usage))
            yield {"type": "finish", "finishReason": reason, "messageMetadata": meta}
            self.done = True
        elif isinstance(event, RunCanceledEvent):
            yield from self.close_step()
            yield {"type": "abort", "reason": event.reason}
            yield {"type": "finish", "finishReason": "other", "messageMetadata": self.meta(status="canceled")}
            self.done = True
        elif isinstance(event, RunFailedEvent | RunInterruptedEvent):
            yield from self.close_step()
            if isinstance(event, RunFailedEvent):
                text, status = f"{event.error.type}: {event.error.message}", "failed"
            else:
                text, status = event.reason, "interrupted"
            yield {"type": "error", "errorText": text}
            yield {"type": "finish", "finishReason": "error", "messageMetadata": self.meta(status=status)}
            self.done = True
        # run.started, tool.delta, tool.started: nothing to say (the call is sent whole)

    def finish_paused(self) -> Iterator[Json]:
        """The end of a stream that stops at the run's pause (the client decides next)."""
        assert self.paused is not None
        yield from self.close_step()
        meta = self.meta(status="paused", pauseId=self.paused.pause_id)
        yield {"type": "finish", "finishReason": "tool-calls", "messageMetadata": meta}
        self.done = True

    def _completed(self, message: Message) -> Iterator[Json]:
        if message.role == "tool":
            for result in message.tool_results:
                yield from self._output(result)
            return
        if message.role != "assistant":
            return  # the prompt: the client holds it already
        self.stop_reason = message.stop_reason
        if not self.deltas:  # a message that was not streamed: the next request's
            yield from self.close_step()
            epoch, step = self.step
            self.step = (self.epoch, step + 1 if epoch == self.epoch else 1)
            self.results.clear()
        yield from self._open_step()
        yield from self._close_parts()
        self.deltas = False
        for index, part in enumerate(message.parts):
            pid = self._part_id(index)
            sent = (self.step[0], self.step[1], index) in self.streamed
            if isinstance(part, Text | Reasoning) and not sent and part.text:
                kind = "text" if isinstance(part, Text) else "reasoning"
                yield {"type": f"{kind}-start", "id": pid}
                yield {"type": f"{kind}-delta", "id": pid, "delta": part.text}
                yield {"type": f"{kind}-end", "id": pid}
            elif isinstance(part, ToolCall):
                yield from self._call(part, f"{pid}.call")
        self.streamed.clear()

    def _call(self, call: ToolCall, fallback: str) -> Iterator[Json]:
        call_id = call.id or fallback
        value, problem = parse_input(call)
        yield {"type": "tool-input-start", "toolCallId": call_id, "toolName": call.name}
        if call.arguments:
            yield {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": call.arguments}
        if problem is None:
            yield {
                "type": "tool-input-available",
                "toolCallId": call_id,
                "toolName": call.name,
                "input": value,
            }
        else:
            yield {
                "type": "tool-input-error",
                "toolCallId": call_id,
                "toolName": call.name,
                "input": value,
                "errorText": problem,
            }

    def _output(self, result: ToolResult) -> Iterator[Json]:
        if result.call_id in self.results:
            return
        self.results.add(result.call_id)
        if result.call_id in self.denied:
            yield {"type": "tool-output-denied", "toolCallId": result.call_id}
        elif result.failed or result.synthesized:
            yield {"type": "tool-output-error", "toolCallId": result.call_id, "errorText": result.text}
        else:
            yield {"type": "tool-output-available", "toolCallId": result.call_id, "output": result.text}
