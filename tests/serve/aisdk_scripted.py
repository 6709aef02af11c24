"""Scripted models for the AI SDK tests (``--model py:tests.serve.aisdk_scripted:NAME``).

``thinker`` reasons before it acts: asked ``look up X`` it streams its reasoning, then calls
``lookup`` with ``{"q": "X"}`` and, after the result, reasons again and answers in words (one
delta per word, with a pause, so a test can drop the connection mid-answer). ``use tool NAME``
calls that tool (as ``slow_words`` does). ``broken`` fails every request.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tests.serve.scripted import _words, delete_files, words_reply

from tether import ModelFunction
from tether.agent import Tool, function_tool
from tether.errors import ModelError
from tether.messages import Message, Reasoning, Text, ToolCall, Usage
from tether.models import ModelSettings, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta, ToolDefinition
from tether.models.testing import FunctionInfo, FunctionModel

WORDS = 30


def _thinker_reply(words: int) -> ModelFunction:
    usage = Usage(output_tokens=words)
    plain = words_reply(words)

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message:
        last = messages[-1]
        if last.role == "user" and "look up " in last.text:
            query = last.text.split("look up ", 1)[1].strip()
            call = ToolCall(f"call_{len(messages)}", "lookup", json.dumps({"q": query}))
            return Message("assistant", (Reasoning("I should look it up."), call), usage=usage)
        if last.role == "user" and "use tool " in last.text:
            return plain(messages, info)  # type: ignore[return-value]
        lead = "The tool said so. " if last.role == "tool" else ""
        return Message("assistant", (Reasoning("Now I answer."), Text(lead + _words(words))), usage=usage)

    return reply


class Thinker(FunctionModel):
    """Streams its reasoning and each tool call whole, its text a word at a time ``pause``
    seconds apart (a ``FunctionModel`` whose stream keeps that shape)."""

    def __init__(self, words: int, pause: float) -> None:
        super().__init__(_thinker_reply(words), name="slow-words")
        self.pause = pause

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        response = await self.generate(messages, instructions=instructions, tools=tools, settings=settings)
        for index, part in enumerate(response.message.parts):
            if isinstance(part, Reasoning):
                yield ReasoningDelta(index, part.text)
            elif isinstance(part, ToolCall):
                yield ToolCallDelta(index, part.id, part.name, part.arguments)
            elif isinstance(part, Text):
                words = part.text.split(" ")
                for k, word in enumerate(words):
                    await asyncio.sleep(self.pause)
                    yield TextDelta(index, word if k == len(words) - 1 else word + " ")
        yield response


def thinker() -> Thinker:
    """``TETHER_TEST_AISDK_DELAY``: seconds between words (a test that reloads mid-answer sets a
    long one, so a loaded machine cannot finish the answer before the reload)."""
    return Thinker(WORDS, float(os.environ.get("TETHER_TEST_AISDK_DELAY", "0.05")))


def long_thinker() -> Thinker:
    """An answer that streams for about 30 seconds (a stream that stays open)."""
    return Thinker(600, 0.05)


def broken() -> FunctionModel:
    def reply(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise ModelError("the provider is down (scripted)", stage="model")

    return FunctionModel(reply, name="broken")


def lookup(q: str) -> str:
    """Look something up (quick, no side effects)."""
    return f"found {q}"


def pick_color() -> str:
    """Ask the user to pick a color (the page answers: never called here)."""
    raise AssertionError("an external tool runs in the client")


def tools() -> list[Tool[Any]]:
    """``lookup`` takes a query; ``delete_files`` needs a person's approval; ``pick_color`` is
    answered by the page (an external tool: the AI SDK's tool without ``execute``)."""
    return [
        function_tool(lookup),
        function_tool(requires_approval=True)(delete_files),
        function_tool(external=True)(pick_color),
    ]
