"""Scripted models and tools the service tests start ``tether serve`` with
(``--model py:tests.serve.scripted:NAME``, ``--tools py:tests.serve.scripted:NAME``).

``SlowWords`` streams its answer a word at a time with a pause between words, so a test can
disconnect, re-attach or cancel in the middle of a run; every run of it produces the same events.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from tether.agent import Tool, function_tool
from tether.errors import ModelError
from tether.history import approximate_counter
from tether.messages import Message, Text, ToolCall, Usage
from tether.models import ModelResponse, ModelSettings, Profile, StreamEvent, TextDelta, ToolDefinition
from tether.models.testing import FunctionInfo, FunctionModel

WORDS = 40
DELAY = float(os.environ.get("TETHER_TEST_WORD_DELAY", "0.05"))


def _words(n: int) -> str:
    return " ".join(f"word{i}" for i in range(1, n + 1))


class SlowWords:
    """Answers ``word1 word2 … wordN`` (N = ``WORDS``), one text delta per word every ``DELAY``
    seconds. When the prompt says ``use tool NAME`` and the last message is the user's, it first
    calls tool NAME (no arguments), then answers after the result."""

    def __init__(self, words: int = WORDS, delay: float = DELAY) -> None:
        self.words = words
        self.delay = delay

    @property
    def name(self) -> str:
        return "slow-words"

    @property
    def profile(self) -> Profile:
        return Profile(provider="function", family="slow-words")

    def _reply(self, messages: Sequence[Message]) -> Message:
        last = messages[-1] if messages else None
        if last is not None and last.role == "user" and "use tool " in last.text:
            name = last.text.split("use tool ", 1)[1].split()[0]
            return Message("assistant", (ToolCall(f"call_{len(messages)}", name, "{}"),))
        return Message("assistant", (Text(_words(self.words)),))

    def _response(self, message: Message) -> ModelResponse:
        stop = "tool_calls" if message.tool_calls else "stop"
        usage = Usage(output_tokens=self.words)
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
        if not message.tool_calls:
            words = message.text.split(" ")
            for k, word in enumerate(words):
                await asyncio.sleep(self.delay)
                yield TextDelta(0, word if k == len(words) - 1 else word + " ")
        yield self._response(message)


class ReusedIds(SlowWords):
    """Calls ``lookup`` in two steps with the same call id ``call_0`` (as models that number their
    calls per step do), then answers ``done``."""

    def _reply(self, messages: Sequence[Message]) -> Message:
        prompt = max(i for i, m in enumerate(messages) if m.role == "user")
        if sum(m.role == "tool" for m in messages[prompt:]) < 2:
            return Message("assistant", (ToolCall("call_0", "lookup", "{}"),))
        return Message("assistant", (Text("done"),))


def reused_ids() -> ReusedIds:
    return ReusedIds(words=1, delay=0.0)


def slow_words() -> SlowWords:
    return SlowWords()


SMALL_WINDOW = 1_000
"""The context window of ``small_window``'s model, in tokens."""


def small_window() -> FunctionModel:
    """A model with a 1,000-token context window that refuses a longer request, as a real
    provider (or the bundled local model) does; its answers are 30 words (74 tokens)."""
    count = approximate_counter()

    def reply(messages: Sequence[Message], info: FunctionInfo) -> str:
        tokens = sum(count(m) for m in messages)
        if tokens > SMALL_WINDOW:
            raise ModelError(
                f"the request is {tokens} tokens and the context window holds {SMALL_WINDOW}", stage="model"
            )
        return _words(30)

    profile = Profile(provider="function", family="small-window", context_window=SMALL_WINDOW)
    return FunctionModel(reply, name="small-window", profile=profile)


def cut_short() -> FunctionModel:
    """Every answer (12 words) stops at its token limit (``length``), as a small local model's
    long replies do."""
    cut = Message("assistant", (Text(_words(12)),), stop_reason="length")
    return FunctionModel(lambda messages, info: cut, name="cut-short")


def long_words() -> SlowWords:
    """An answer that streams for about 30 seconds (a stream that stays open)."""
    return SlowWords(words=600, delay=0.05)


def fast_words() -> SlowWords:
    """A short answer with no pause (fuzzing and quick checks)."""
    return SlowWords(words=3, delay=0.0)


def _counter_file() -> Path:
    return Path(os.environ["TETHER_TEST_EFFECTS"])


def charge_card() -> str:
    """Charge the customer's card (a side effect: it must never run twice). Blocks for a long
    time after recording that it ran, so a test can kill the server while it is running."""
    with _counter_file().open("a") as f:
        f.write("charged\n")
    time.sleep(float(os.environ.get("TETHER_TEST_EFFECT_SLEEP", "30")))
    return "charged"


def delete_files() -> str:
    """Delete files (needs a person's approval)."""
    with _counter_file().open("a") as f:
        f.write("deleted\n")
    return "deleted"


def lookup() -> str:
    """Look something up (quick, no side effects)."""
    return "found it"


def tools() -> list[Tool[Any]]:
    return [
        function_tool(idempotent=False)(charge_card),
        function_tool(requires_approval=True)(delete_files),
        function_tool(lookup),
    ]


class SplitEmoji(SlowWords):
    """Streams ``smile 😀 done`` with the emoji's UTF-16 pair split across two text deltas (each
    half alone, as JSON decoding makes of a server that cuts a chunk inside the pair); the final
    message holds both halves side by side, as a driver that concatenates its deltas builds it."""

    HALVES = ("smile \ud83d", "\ude00 done")

    def _reply(self, messages: Sequence[Message]) -> Message:
        return Message("assistant", (Text("".join(self.HALVES)),))

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        for half in self.HALVES:
            yield TextDelta(0, half)
        yield self._response(self._reply(messages))


def split_emoji() -> SplitEmoji:
    return SplitEmoji(words=2, delay=0.0)
