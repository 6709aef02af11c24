"""A stored conversation as AI SDK UI messages (``useChat``'s initial ``messages``).

The assistant and tool messages between two user messages are one assistant UI message (one
turn), its id the run id that produced them, as in the stream; each assistant message is a step.
A tool call's result becomes the call's output state. So a page that loads a chat from here and
re-attaches to its running turn gets the same message ids and parts the stream builds.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from tether.messages import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult

from ._chunks import parse_input

__all__ = ["ChatMessages", "ui_messages"]

Json = dict[str, Any]


class ChatMessages(msgspec.Struct, frozen=True):
    """``GET /v1/aisdk/chat/{chat_id}/messages``: the chat as AI SDK UI messages, from the
    stored message ``start`` (0: from the first; later when the chat is longer than ``limit``)."""

    messages: list[dict[str, Any]]
    start: int = 0


def _file(part: Image | Document) -> Json:
    media = part.media_type or ("image" if isinstance(part, Image) else "application/octet-stream")
    if part.data is not None:
        url = f"data:{media};base64,{base64.b64encode(part.data).decode()}"
    else:
        url = part.url or ""
    return {"type": "file", "mediaType": media, "url": url}


def _tool_part(call: ToolCall, result: ToolResult | None) -> Json:
    value, problem = parse_input(call)
    part: Json = {"type": f"tool-{call.name}", "toolCallId": call.id or "", "state": "input-available"}
    part["input"] = value
    if result is None:
        if problem is not None:
            part.update(state="output-error", errorText=problem)
        return part
    if result.failed or result.synthesized:
        part.update(state="output-error", errorText=result.text)
    else:
        part.update(state="output-available", output=result.text)
    return part


def _turn(cid: str, index: int, messages: list[Message]) -> Json:
    results = {r.call_id: r for m in messages if m.role == "tool" for r in m.tool_results}
    run_id = next((m.run_id for m in messages if m.run_id), None)
    parts: list[Json] = []
    step = 0
    for message in messages:
        if message.role != "assistant":
            continue
        parts.append({"type": "step-start"})
        step += 1
        for index, part in enumerate(message.parts):
            if isinstance(part, Reasoning) and part.text:
                reasoning: Json = {"type": "reasoning", "text": part.text, "state": "done"}
                if run_id is not None:  # the stream's part id (a turn never resumed counts as epoch 0)
                    reasoning = {"type": "reasoning", "id": f"{run_id}.0.{step}.{index}", **reasoning}
                parts.append(reasoning)
            elif isinstance(part, Text) and part.text:
                parts.append({"type": "text", "text": part.text, "state": "done"})
            elif isinstance(part, ToolCall):
                parts.append(_tool_part(part, results.get(part.id or "")))
    meta: Json = {"conversationId": cid}
    if run_id is not None:
        meta["runId"] = run_id
    return {
        "id": run_id or f"{cid}.{index}",
        "role": "assistant",
        "metadata": {"tether": meta},
        "parts": parts,
    }


def ui_messages(cid: str, messages: list[Message], first: int = 0) -> list[Json]:
    """The conversation ``cid`` as UI messages: user (and system) messages one each, the
    messages between them one assistant message per turn (``first``: the index of
    ``messages[0]`` in the stored log, for the ids)."""
    out: list[Json] = []
    turn: list[Message] = []
    start = 0
    for i, message in enumerate([*messages, None], start=first):
        if message is not None and message.role in ("assistant", "tool"):
            if not turn:
                start = i
            turn.append(message)
            continue
        if turn:
            out.append(_turn(cid, start, turn))
            turn = []
        if message is None:
            break
        parts: list[Json] = []
        for part in message.parts:
            if isinstance(part, Text):
                parts.append({"type": "text", "text": part.text, "state": "done"})
            elif isinstance(part, Image | Document):
                parts.append(_file(part))
        out.append({"id": f"{cid}.{i}", "role": message.role, "parts": parts})
    return out
