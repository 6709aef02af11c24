"""Scripted models and tools the service tests start ``tether serve`` with
(``--model py:tests.serve.scripted:NAME``, ``--tools py:tests.serve.scripted:NAME``).

``slow_words`` streams its answer a word at a time with a pause between words (a paced
``FunctionModel``), so a test can disconnect, re-attach or cancel in the middle of a run; every
run of it produces the same events.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from tether import ModelFunction
from tether.agent import Tool, function_tool
from tether.errors import ModelError
from tether.history import approximate_counter
from tether.messages import Message, Text, ToolCall, Usage
from tether.models import ModelSettings, Profile, StreamEvent, TextDelta, ToolDefinition
from tether.models.testing import FunctionInfo, FunctionModel

WORDS = 40
DELAY = float(os.environ.get("TETHER_TEST_WORD_DELAY", "0.05"))


def _words(n: int) -> str:
    return " ".join(f"word{i}" for i in range(1, n + 1))


def words_reply(words: int = WORDS) -> ModelFunction:
    """Answers ``word1 word2 … wordN`` (N = ``words``). When the prompt says ``use tool NAME`` and
    the last message is the user's, it first calls tool NAME (no arguments), then answers after
    the result."""
    usage = Usage(output_tokens=words)

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message:
        last = messages[-1] if messages else None
        if last is not None and last.role == "user" and "use tool " in last.text:
            name = last.text.split("use tool ", 1)[1].split()[0]
            return Message("assistant", (ToolCall(f"call_{len(messages)}", name, "{}"),), usage=usage)
        return Message("assistant", (Text(_words(words)),), usage=usage)

    return reply


def slow_words(words: int = WORDS, delay: float = DELAY) -> FunctionModel:
    """``words_reply`` streamed one text delta per word every ``delay`` seconds: a test can
    disconnect, re-attach or cancel in the middle of a run; every run produces the same events."""
    return FunctionModel(words_reply(words), name="slow-words", delay=delay)


def reused_ids() -> FunctionModel:
    """Calls ``lookup`` in two steps with the same call id ``call_0`` (as models that number their
    calls per step do), then answers ``done``."""

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message:
        prompt = max(i for i, m in enumerate(messages) if m.role == "user")
        if sum(m.role == "tool" for m in messages[prompt:]) < 2:
            return Message("assistant", (ToolCall("call_0", "lookup", "{}"),), usage=Usage(output_tokens=1))
        return Message("assistant", (Text("done"),), usage=Usage(output_tokens=1))

    return FunctionModel(reply, name="slow-words", delay=0.0)


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


def long_words() -> FunctionModel:
    """An answer that streams for about 30 seconds (a stream that stays open)."""
    return slow_words(words=600, delay=0.05)


def fast_words() -> FunctionModel:
    """A short answer with no pause (fuzzing and quick checks)."""
    return slow_words(words=3, delay=0.0)


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


class SplitEmoji(FunctionModel):
    """Streams ``smile 😀 done`` with the emoji's UTF-16 pair split across two text deltas (each
    half alone, as JSON decoding makes of a server that cuts a chunk inside the pair); the final
    message holds both halves side by side, as a driver that concatenates its deltas builds it."""

    HALVES = ("smile \ud83d", "\ude00 done")

    def __init__(self) -> None:
        text = Text("".join(self.HALVES))
        reply = Message("assistant", (text,), usage=Usage(output_tokens=2))
        super().__init__(lambda messages, info: reply, name="slow-words")

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
        yield await self.generate(messages, instructions=instructions, tools=tools, settings=settings)


def split_emoji() -> SplitEmoji:
    return SplitEmoji()


def counted_words() -> FunctionModel:
    """``slow_words`` that appends ``request`` to the effects file at each model request (a test
    counts requests across processes, killed ones included)."""
    reply = words_reply()

    def counted(messages: Sequence[Message], info: FunctionInfo) -> Message:
        with _counter_file().open("a") as f:
            f.write("request\n")
        return reply(messages, info)

    return FunctionModel(counted, name="slow-words", delay=DELAY)


def chaos_model() -> FunctionModel:
    """The chaos test's model: for ``order N`` it calls ``charge`` with ``{"order": "N"}``, then
    answers ``charged N`` and 20 words, streamed. Each request appends ``request N`` to the
    effects file (requests are counted across processes, killed ones included)."""

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message:
        prompt = next(m for m in reversed(messages) if m.role == "user")
        order = prompt.text.split("order ", 1)[1].split()[0]
        with _counter_file().open("a") as f:
            f.write(f"request {order}\n")
        if messages[-1].role == "user":
            return Message("assistant", (ToolCall(f"call_{order}", "charge", f'{{"order": "{order}"}}'),))
        return Message("assistant", (Text(f"charged {order} " + _words(20)),), usage=Usage(output_tokens=22))

    return FunctionModel(reply, name="slow-words", delay=DELAY)


def charge(order: str) -> str:
    """Charge an order (a side effect: a row in a table of its own, never twice)."""
    import psycopg
    from psycopg import sql

    table = sql.Identifier(os.environ["TETHER_TEST_PG_SCHEMA"], "charges")
    with psycopg.connect(os.environ["TETHER_TEST_PG_DSN"], autocommit=True) as conn:
        conn.execute(sql.SQL("INSERT INTO {} (order_id) VALUES (%s)").format(table), (order,))
    time.sleep(float(os.environ.get("TETHER_TEST_EFFECT_SLEEP", "0.3")))
    return f"charged {order}"


def chaos_tools() -> list[Tool[Any]]:
    return [function_tool(idempotent=False)(charge)]
