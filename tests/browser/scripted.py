"""The scripted model and tools the browser tests start ``tether serve`` with
(``--model py:tests.browser.scripted:page_model --tools py:tests.browser.scripted:tools``).

``page_model`` (a paced ``FunctionModel``) streams ``word1 … wordN`` a word at a time: 12 words
20 ms apart, or, when the prompt says ``slowly``, 60 words 60 ms apart (about 4 s: time to
reload, drop the connection, restart the server or Stop in the middle). ``use tool NAME`` in
the prompt makes it call tool NAME first; ``think`` makes it stream reasoning first;
``markdown`` makes it answer with formatted text and hostile markup; ``hold on`` makes its
first word wait until the file ``$TETHER_TEST_EFFECTS.go`` exists (a model slow to start,
released by the test).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

from msgspec.structs import replace

from tether.agent import Tool, function_tool
from tether.messages import Message, Part, Reasoning, Text, ToolCall, Usage
from tether.models.testing import FunctionInfo, FunctionModel

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


def _prompt(messages: Sequence[Message]) -> str:
    users = [m for m in messages if m.role == "user"]
    return users[-1].text if users else ""


async def _held(messages: Sequence[Message]) -> None:
    """``hold on``: wait (at most a minute) until the file ``$TETHER_TEST_EFFECTS.go`` exists."""
    if "hold on" in _prompt(messages) and messages[-1].role == "user":
        gate = os.environ.get("TETHER_TEST_EFFECTS", "") + ".go"
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


def page_model(
    words: int = 12, delay: float = 0.02, slow_words: int = 60, slow_delay: float = 0.06
) -> FunctionModel:
    """A deterministic streaming model for the page (see the module docstring)."""

    async def reply(messages: Sequence[Message], info: FunctionInfo) -> Message:
        await _held(messages)
        last = messages[-1] if messages else None
        prompt = last.text if last is not None and last.role == "user" else ""
        if "use tool " in prompt:
            name = prompt.split("use tool ", 1)[1].split()[0]
            arguments = TOOL_ARGUMENTS.get(name, "{}")
            parts: tuple[Part, ...] = (
                Text(f"Calling {name}."),
                ToolCall(f"call_{len(messages)}", name, arguments),
            )
        elif last is not None and last.role == "tool":
            parts = (Text("The tool answered: done."),)
        elif "markdown" in prompt:
            parts = (Text(MARKDOWN),)
        else:
            n = slow_words if "slowly" in _prompt(messages) else words
            text = " ".join(f"word{i}" for i in range(1, n + 1))
            parts = (
                (Reasoning("Let me think about the numbers."), Text(text))
                if "think" in prompt
                else (Text(text),)
            )
        message = Message("assistant", parts)
        return replace(message, usage=Usage(input_tokens=12, output_tokens=len(message.text.split())))

    def pace(messages: Sequence[Message]) -> float:
        return slow_delay if "slowly" in _prompt(messages) else delay

    return FunctionModel(reply, name="page-model", delay=pace)


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
