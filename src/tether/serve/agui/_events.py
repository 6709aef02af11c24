"""A run's events as AG-UI events, and a stored conversation as AG-UI messages.

The service's own events (``_events.py``) are read from the durable log and translated here, one
run at a time: text and reasoning stream as they arrive; tool calls are sent whole when the
model's message completes (the completed message is authoritative: its call ids and arguments are
the ones the run executes); results as each call finishes. A run ends with ``RUN_FINISHED``
(success, cancelled, or an interrupt outcome when it paused for approvals) or ``RUN_ERROR``
(failed, interrupted). What AG-UI cannot carry is listed in docs/compatibility.md.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import msgspec

from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult, Usage

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
    TextDeltaEvent,
    ToolFinishedEvent,
)

__all__ = [
    "APPROVAL_REASON",
    "COMPACTION_EVENT",
    "RECOVERED_EVENT",
    "Translator",
    "agui_messages",
    "encode",
    "interrupt_id",
]

COMPACTION_EVENT = "tether.compaction"
"""The ``CUSTOM`` event saying the conversation was compacted (AG-UI has no event for it)."""
RECOVERED_EVENT = "tether.run.recovered"
"""The ``CUSTOM`` event saying the run moved to another process (``run.recovered``): the text
streamed since the last whole message belonged to a request that is asked again."""
APPROVAL_REASON = "tool_approval"
EXTERNAL_REASON = "tool_result"
Json = dict[str, Any]
_decoder = msgspec.json.Decoder(EventOut)
_encoder = msgspec.json.Encoder()


def encode(event: Json) -> bytes:
    """One AG-UI event as a Server-Sent Event."""
    return b"data: " + _encoder.encode(event) + b"\n\n"


def interrupt_id(pause_id: str, call_id: str) -> str:
    """The AG-UI interrupt id of one pending call of a pause."""
    return f"{pause_id}:{call_id}"


def _media_part(part: Image | Document) -> Json:
    if part.data is not None:
        source: Json = {
            "type": "data",
            "value": base64.b64encode(part.data).decode(),
            "mimeType": part.media_type,
        }
    else:
        source = {"type": "url", "value": part.url}
        if part.media_type:
            source["mimeType"] = part.media_type
    return {"type": "image" if isinstance(part, Image) else "document", "source": source}


def _content(parts: tuple[Text | Image | Document, ...]) -> str | list[Json]:
    """Text only: one string. With media: AG-UI content parts."""
    if all(isinstance(p, Text) for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, Text))
    return [{"type": "text", "text": p.text} if isinstance(p, Text) else _media_part(p) for p in parts]


def _usage(usage: Usage, model: str | None) -> list[Json]:
    entry: Json = {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.input_tokens + usage.output_tokens,
    }
    if usage.reasoning_tokens:
        entry["reasoningTokens"] = usage.reasoning_tokens
    if usage.cache_read_tokens:
        entry["cachedInputTokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        entry["cacheWriteInputTokens"] = usage.cache_write_tokens
    if model:
        entry["model"] = model
    return [entry]


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _result_event(result: ToolResult, message_id: str) -> Json:
    event: Json = {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": result.call_id,
        "content": _content(result.content),
        "role": "tool",
    }
    if result.failed or result.synthesized:
        event["metadata"] = {"tether": {"failed": result.failed, "synthesized": result.synthesized}}
    return event


class Translator:
    """Turns one run's stored events into AG-UI events (``feed``), keeping what is open."""

    def __init__(self, run_id: str, conversation_id: str, *, prefix: str | None = None) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        # message ids: unique in the thread (a resumed run gets its own)
        self.prefix = self.base = prefix or run_id
        self.recoveries = 0  # run.recovered seen: a continued run's message ids get their own prefix
        self.step = 0  # the model request being translated
        self.deltas = False  # deltas of self.step were seen
        self.text: str | None = None  # the open text message
        self.reasoning: str | None = None  # the open reasoning message
        self.streamed: set[tuple[int, int]] = set()  # (step, part index) of text/reasoning sent
        self.results: set[str] = set()  # call ids of this step's results sent (ids may recur in a later step)
        self.users = 0
        self.model: str | None = None
        self.done = False

    def _message_id(self, step: int, index: int) -> str:
        return f"{self.prefix}.{step}.{index}"

    def _close(self) -> Iterator[Json]:
        if self.text is not None:
            yield {"type": "TEXT_MESSAGE_END", "messageId": self.text}
            self.text = None
        if self.reasoning is not None:
            yield {"type": "REASONING_MESSAGE_END", "messageId": self.reasoning}
            yield {"type": "REASONING_END", "messageId": self.reasoning}
            self.reasoning = None

    def feed(self, data: bytes) -> list[Json]:
        """The AG-UI events for one stored event (its JSON bytes)."""
        return list(self._feed(_decoder.decode(data)))

    def _feed(self, event: EventOut) -> Iterator[Json]:
        if isinstance(event, TextDeltaEvent | ReasoningDeltaEvent):
            self.step, self.deltas = event.step, True
        if isinstance(event, TextDeltaEvent):
            mid = self._message_id(event.step, event.index)
            if self.text != mid:
                yield from self._close()
                yield {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}
                self.text = mid
                self.streamed.add((event.step, event.index))
            if event.text:
                yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": event.text}
        elif isinstance(event, ReasoningDeltaEvent):
            mid = self._message_id(event.step, event.index)
            if self.reasoning != mid:
                yield from self._close()
                yield {"type": "REASONING_START", "messageId": mid}
                yield {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}
                self.reasoning = mid
                self.streamed.add((event.step, event.index))
            if event.text:
                yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": event.text}
        elif isinstance(event, MessageCompletedEvent):
            yield from self._close()
            yield from self._completed(event.message)
        elif isinstance(event, ToolFinishedEvent):
            yield from self._result(event.result)
        elif isinstance(event, HistoryCompactedEvent):
            value: Json = {"step": event.step, "line": event.line, "report": event.report}
            yield {"type": "CUSTOM", "name": COMPACTION_EVENT, "value": value}
        elif isinstance(event, RunRecoveredEvent):
            yield from self._close()  # the lost request's message ends; the continuation numbers anew
            self.recoveries += 1
            self.prefix = f"{self.base}.r{self.recoveries}"
            self.step, self.deltas = 0, False
            self.streamed.clear()
            self.results.clear()
            value = {"fromProcess": event.from_process, "repeats": event.repeats, "reason": event.reason}
            yield {"type": "CUSTOM", "name": RECOVERED_EVENT, "value": value}
        elif isinstance(event, RunPausedEvent):
            yield from self._close()
            yield self._paused(event)
            self.done = True
        elif isinstance(event, RunCompletedEvent):
            yield from self._close()
            finished: Json = {
                "type": "RUN_FINISHED",
                "threadId": self.conversation_id,
                "runId": self.run_id,
                "outcome": {"type": "success"},
                "usage": _usage(event.usage, self.model),
            }
            if event.output is not None:
                finished["result"] = event.output
            yield finished
            self.done = True
        elif isinstance(event, RunCanceledEvent):
            yield from self._close()
            yield {
                "type": "RUN_FINISHED",
                "threadId": self.conversation_id,
                "runId": self.run_id,
                "outcome": {"type": "cancelled"},
            }
            self.done = True
        elif isinstance(event, RunFailedEvent | RunInterruptedEvent):
            yield from self._close()
            if isinstance(event, RunFailedEvent):
                yield {"type": "RUN_ERROR", "message": event.error.message, "code": event.error.type}
            else:
                yield {"type": "RUN_ERROR", "message": event.reason, "code": "interrupted"}
            self.done = True
        # run.started, run.resumed, tool.delta, tool.started: nothing to say in AG-UI

    def _completed(self, message: Message) -> Iterator[Json]:
        if message.role == "user":
            self.users += 1
            mid = f"{self.prefix}.user.{self.users}"
            yield {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "user"}
            if message.text:
                yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": message.text}
            yield {"type": "TEXT_MESSAGE_END", "messageId": mid}
            return
        if message.role == "tool":
            for result in message.tool_results:
                yield from self._result(result)
            return
        if message.role != "assistant":
            return
        self.model = message.model or self.model
        if not self.deltas:  # a message that was not streamed: the next request's
            self.step += 1
        step, self.deltas = self.step, False
        self.results.clear()  # a model may number its calls per step: "call_0" again is a new call
        texts = [k for k, p in enumerate(message.parts) if isinstance(p, Text) and p.text]
        parent = self._message_id(step, texts[0]) if texts else None  # the text message the calls follow
        for index, part in enumerate(message.parts):
            mid = self._message_id(step, index)
            sent = (step, index) in self.streamed
            if isinstance(part, Text) and not sent and part.text:
                yield {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}
                yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": part.text}
                yield {"type": "TEXT_MESSAGE_END", "messageId": mid}
            elif isinstance(part, Reasoning) and not sent and part.text:
                yield {"type": "REASONING_START", "messageId": mid}
                yield {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"}
                yield {"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": part.text}
                yield {"type": "REASONING_MESSAGE_END", "messageId": mid}
                yield {"type": "REASONING_END", "messageId": mid}
            elif isinstance(part, ToolCall):
                call_id = part.id or f"{mid}.call"
                start: Json = {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": part.name}
                if parent is not None:
                    start["parentMessageId"] = parent
                yield start
                if part.arguments:
                    yield {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": part.arguments}
                yield {"type": "TOOL_CALL_END", "toolCallId": call_id}
        self.streamed.clear()

    def _result(self, result: ToolResult) -> Iterator[Json]:
        if result.call_id in self.results:
            return
        self.results.add(result.call_id)
        yield _result_event(result, f"{self.prefix}.{self.step}.result.{result.call_id}")

    def _paused(self, event: RunPausedEvent) -> Json:
        approvals = [c for c in event.calls if c.kind == "approval"]
        finished: Json = {
            "type": "RUN_FINISHED",
            "threadId": self.conversation_id,
            "runId": self.run_id,
            "metadata": {"tether": {"status": "paused", "pauseId": event.pause_id}},
        }
        if not approvals:  # only the client's own tools: it answers them with tool messages
            finished["outcome"] = {"type": "success", "pendingToolCallIds": [c.call_id for c in event.calls]}
            return finished
        interrupts: list[Json] = []
        for call in event.calls:
            approval = call.kind == "approval"
            interrupts.append(
                {
                    "id": interrupt_id(event.pause_id, call.call_id),
                    "reason": APPROVAL_REASON if approval else EXTERNAL_REASON,
                    "message": f"Approve the call of {call.name}?"
                    if approval
                    else f"Run {call.name} and send its result",
                    "toolCallId": call.call_id,
                    "responseSchema": _APPROVAL_SCHEMA if approval else _RESULT_SCHEMA,
                    "expiresAt": _iso(event.expires_at),
                }
            )
        finished["outcome"] = {"type": "interrupt", "interrupts": interrupts}
        return finished


_APPROVAL_SCHEMA: Json = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
_RESULT_SCHEMA: Json = {
    "type": "object",
    "properties": {"result": {}, "failed": {"type": "boolean"}},
    "required": ["result"],
}


def agui_messages(conversation_id: str, messages: list[Message]) -> list[Json]:
    """A stored conversation as AG-UI messages (ids ``<conversation>.<index>[.<part>]``). A tool
    message becomes one AG-UI tool message per result; reasoning becomes reasoning messages
    (without signatures); an assistant's media is not carried."""
    out: list[Json] = []
    for i, message in enumerate(messages):
        mid = f"{conversation_id}.{i}"
        if message.role in ("system", "user"):
            media = tuple(p for p in message.parts if isinstance(p, Text | Image | Document))
            out.append(
                {
                    "id": mid,
                    "role": message.role,
                    "content": _content(media) if message.role == "user" else message.text,
                }
            )
        elif message.role == "tool":
            for k, result in enumerate(message.tool_results):
                entry: Json = {
                    "id": f"{mid}.{k}",
                    "role": "tool",
                    "toolCallId": result.call_id,
                    "content": _content(result.content),
                }
                if result.failed:
                    entry["error"] = result.text or "failed"
                out.append(entry)
        else:
            for k, part in enumerate(message.parts):
                if isinstance(part, Reasoning) and part.text:
                    out.append({"id": f"{mid}.{k}", "role": "reasoning", "content": part.text})
            calls = [
                {
                    "id": c.id or f"{mid}.call{k}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for k, c in enumerate(message.parts)
                if isinstance(c, ToolCall)
            ]
            entry = {"id": mid, "role": "assistant"}
            if message.text:
                entry["content"] = message.text
            if calls:
                entry["toolCalls"] = calls
            if message.text or calls:
                out.append(entry)
    return out
