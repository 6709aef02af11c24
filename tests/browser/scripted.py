"""The scripted model and tools the browser tests start ``tether serve`` with
(``--model py:tests.browser.scripted:page_model --tools py:tests.browser.scripted:tools``).

``PageModel`` streams ``word1 … wordN`` a word at a time: 12 words 20 ms apart, or, when the
prompt says ``slowly``, 60 words 60 ms apart (about 4 s: time to reload, drop the connection,
restart the server or Stop in the middle). ``use tool NAME`` in the prompt makes it call tool
NAME first; ``think`` makes it stream reasoning first; ``markdown`` makes it answer with
formatted text and hostile markup; ``hold on`` makes its first word wait until the file
``$TETHER_TEST_EFFECTS.go`` exists (a model slow to start, released by the test).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from msgspec.structs import replace

from tether.agent import Tool, function_tool
from tether.messages import Message, Reasoning, Text, ToolCall, Usage
from tether.models import (
    ModelResponse,
    ModelSettings,
    Profile,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)

HOSTILE = (
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    " **not bold** [x](javascript:alert(1))"
)
MARKDOWN = (
    "# Plan\n\nHere is **bold**, *italic*, `code` and a [safe link](https://example.com).\n\n"
    "- first\n- second\n\n```python\nprint('hi')\n```\n\n"
    'A [bad link](javascript:window.__pwned=3) and <b onmouseover="window.__pwned=4">raw html</b>.'
)
TOOL_ARGUMENTS = {"delete_files": '{"path": "notes.txt"}'}


class PageModel:
    """A deterministic streaming model for the page (see the module docstring)."""

    def __init__(
        self, words: int = 12, delay: float = 0.02, slow_words: int = 60, slow_delay: float = 0.06
    ) -> None:
        self.words = words
        self.delay = delay
        self.slow_words = slow_words
        self.slow_delay = slow_delay

    @staticmethod
    def _prompt(messages: Sequence[Message]) -> str:
        users = [m for m in messages if m.role == "user"]
        return users[-1].text if users else ""

    def _pace(self, messages: Sequence[Message]) -> tuple[int, float]:
        if "slowly" in self._prompt(messages):
            return self.slow_words, self.slow_delay
        return self.words, self.delay

    @property
    def name(self) -> str:
        return "page-model"

    @property
    def profile(self) -> Profile:
        return Profile(provider="function", family="page-model")

    def _reply(self, messages: Sequence[Message]) -> Message:
        last = messages[-1] if messages else None
        prompt = last.text if last is not None and last.role == "user" else ""
        if "use tool " in prompt:
            name = prompt.split("use tool ", 1)[1].split()[0]
            arguments = TOOL_ARGUMENTS.get(name, "{}")
            return Message(
                "assistant", (Text(f"Calling {name}."), ToolCall(f"call_{len(messages)}", name, arguments))
            )
        if last is not None and last.role == "tool":
            return Message("assistant", (Text("The tool answered: done."),))
        if "markdown" in prompt:
            return Message("assistant", (Text(MARKDOWN),))
        words, _ = self._pace(messages)
        text = " ".join(f"word{i}" for i in range(1, words + 1))
        if "think" in prompt:
            return Message("assistant", (Reasoning("Let me think about the numbers."), Text(text)))
        return Message("assistant", (Text(text),))

    def _response(self, message: Message) -> ModelResponse:
        stop = "tool_calls" if message.tool_calls else "stop"
        usage = Usage(input_tokens=12, output_tokens=len(message.text.split()))
        message = replace(message, provider="function", model=self.name, stop_reason=stop, usage=usage)
        return ModelResponse(message, stop, usage)

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        return self._response(self._reply(messages))

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        message = self._reply(messages)
        _, delay = self._pace(messages)
        if "hold on" in self._prompt(messages) and messages[-1].role == "user":
            gate = os.environ.get("TETHER_TEST_EFFECTS", "") + ".go"
            deadline = time.monotonic() + 60
            while not os.path.exists(gate) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        for index, part in enumerate(message.parts):
            if isinstance(part, Reasoning):
                for word in part.text.split(" "):
                    await asyncio.sleep(delay)
                    yield ReasoningDelta(index, word + " ")
            elif isinstance(part, Text):
                words = part.text.split(" ")
                for k, word in enumerate(words):
                    await asyncio.sleep(delay)
                    yield TextDelta(index, word if k == len(words) - 1 else word + " ")
            elif isinstance(part, ToolCall):
                yield ToolCallDelta(index, part.id, part.name, "")
                yield ToolCallDelta(index, None, None, part.arguments)
        yield self._response(message)


def page_model() -> PageModel:
    return PageModel()


def hostile() -> str:
    """Return markup that must be shown as text, never run."""
    return HOSTILE


def lookup() -> str:
    """Look something up (quick, no side effects)."""
    return "found it"


def delete_files(path: str = "notes.txt") -> str:
    """Delete a file (needs a person's approval)."""
    return f"deleted {path}"


def broken() -> str:
    """A tool that fails."""
    raise RuntimeError("the disk is on fire")


def tools() -> list[Tool[Any]]:
    return [
        function_tool(hostile),
        function_tool(lookup),
        function_tool(requires_approval=True)(delete_files),
        function_tool(broken),
    ]
