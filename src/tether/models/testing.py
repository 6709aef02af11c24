"""Offline models for tests: ``FunctionModel`` (scripted) and ``TestModel`` (calls every tool).

Both implement the ``Model`` protocol, including ``stream`` (deltas, then the same final
``ModelResponse`` that ``generate`` returns). Neither does any I/O. A ``FunctionModel`` given a
``delay`` streams like a slow provider: a word at a time, reasoning too, with a pause before
each word (tests that disconnect, reload or cancel mid-stream; benchmarks of live streams).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeAlias, cast

import msgspec
from msgspec.structs import replace

from tether.errors import UserError
from tether.messages import Message, Reasoning, Text, ToolCall, ToolResult, Usage, assistant
from tether.models._base import (
    ModelResponse,
    ModelSettings,
    Profile,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)
from tether.models._examples import pattern_example, schema_example

__all__ = ["FunctionInfo", "FunctionModel", "TestModel", "pattern_example", "schema_example"]


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """What a ``FunctionModel`` function sees besides the messages."""

    tools: Sequence[ToolDefinition]
    instructions: str | None
    settings: ModelSettings | None
    model: str


Reply: TypeAlias = Message | str | ModelResponse
ModelFunction: TypeAlias = Callable[[Sequence[Message], FunctionInfo], Reply | Awaitable[Reply]]


def _approx_tokens(message: Message) -> int:
    n = 0
    for p in message.parts:
        if type(p) is Text or type(p) is Reasoning:
            n += len(p.text.split())
        elif type(p) is ToolCall:
            n += 1 + len(p.arguments) // 4
    return n


async def _stream_response(response: ModelResponse) -> AsyncIterator[StreamEvent]:
    for index, part in enumerate(response.message.parts):
        if type(part) is Text:
            words = part.text.split(" ")
            for k, word in enumerate(words):
                yield TextDelta(index, word if k == len(words) - 1 else word + " ")
        elif type(part) is Reasoning and part.text:
            yield ReasoningDelta(index, part.text)
        elif type(part) is ToolCall:
            yield ToolCallDelta(index, part.id, part.name, "")
            yield ToolCallDelta(index, arguments=part.arguments)
    yield response


def _check_delay(delay: object) -> float:
    if type(delay) not in (int, float) or not (0 <= cast(float, delay) < math.inf):
        raise UserError(
            f"delay must be seconds >= 0 or a function of the messages giving them, not {delay!r}"
        )
    return cast(float, delay)


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w if k == len(words) - 1 else w + " " for k, w in enumerate(words)]


async def _paced_response(response: ModelResponse, delay: float, stamp: bool) -> AsyncIterator[StreamEvent]:
    """Text and reasoning a word at a time, ``delay`` seconds before each word; with ``stamp``
    each word is sent as ``t<nanoseconds since the epoch>`` and the final message holds those."""
    parts = list(response.message.parts)
    for index, part in enumerate(parts):
        if type(part) is Text or type(part) is Reasoning:
            sent: list[str] = []
            for word in _words(part.text) if part.text else []:
                if delay:
                    await asyncio.sleep(delay)
                if stamp:
                    word = f"t{time.time_ns()}" + (" " if word.endswith(" ") else "")
                sent.append(word)
                yield TextDelta(index, word) if type(part) is Text else ReasoningDelta(index, word)
            parts[index] = replace(part, text="".join(sent))
        elif type(part) is ToolCall:
            yield ToolCallDelta(index, part.id, part.name, "")
            yield ToolCallDelta(index, arguments=part.arguments)
    if stamp:
        response = ModelResponse(
            replace(response.message, parts=tuple(parts)), response.stop_reason, response.usage
        )
    yield response


class _Closable:
    """``aclose()`` and ``async with`` for models that hold nothing to release (the lifecycle the
    ``Model`` protocol documents; drivers close their clients there)."""

    async def aclose(self) -> None:
        """Nothing to release: no connection, no file."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class FunctionModel(_Closable):
    """A scripted model: ``fn(messages, info)`` returns the assistant reply.

    The reply may be a ``str`` (text answer), an assistant ``Message`` or a full
    ``ModelResponse``; ``fn`` may be sync or async. Calls without an id get one; the stop reason
    is ``"tool_calls"`` when the message has calls, else ``"stop"``; usage counts output words
    (input is not counted: that would walk the whole history on every step).

    ``delay`` paces ``stream``: text and reasoning go a word at a time with ``delay`` seconds
    before each word (a number, or a function of the messages for a pace per request; ``0``: word
    deltas without pauses). ``stamp`` sends each streamed word as ``t<nanoseconds since the
    epoch>`` taken when it is sent, and the final message holds the stamped words (latency
    measured by whoever receives them). A function that needs time before its first word (a
    model slow to start) awaits it itself.
    """

    def __init__(
        self,
        fn: ModelFunction,
        *,
        name: str = "function",
        profile: Profile | None = None,
        delay: float | Callable[[Sequence[Message]], float] | None = None,
        stamp: bool = False,
    ) -> None:
        if not callable(fn):
            raise UserError("FunctionModel needs a function (messages, info) -> reply")
        if delay is not None and not callable(delay):
            _check_delay(delay)
        self.fn = fn
        self.delay = delay
        self.stamp = stamp
        self._name = name
        self._profile = profile or Profile(provider="function", family=name)
        self._ids = itertools.count(1)

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return self._profile

    def _finish(self, reply: Any) -> ModelResponse:
        if isinstance(reply, ModelResponse):
            return reply
        if isinstance(reply, str):
            message = assistant(reply)
        elif isinstance(reply, Message):
            message = reply
        else:
            raise UserError(
                f"the FunctionModel function returned {type(reply).__name__}; "
                "expected str, Message or ModelResponse"
            )
        if message.role != "assistant":
            raise UserError(
                f"the FunctionModel function returned a {message.role} message, not an assistant one"
            )
        if any(type(p) is ToolCall and not p.id for p in message.parts):
            parts = tuple(
                replace(p, id=f"call_{next(self._ids)}") if type(p) is ToolCall and not p.id else p
                for p in message.parts
            )
            message = replace(message, parts=parts)
        stop = message.stop_reason or ("tool_calls" if message.tool_calls else "stop")
        usage = message.usage or Usage(output_tokens=_approx_tokens(message))
        message = replace(
            message,
            provider=message.provider or self._profile.provider,
            model=message.model or self._name,
            stop_reason=stop,
            usage=usage,
        )
        return ModelResponse(message, stop, usage)

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """Call the function once."""
        reply: Any = self.fn(messages, FunctionInfo(tools, instructions, settings, self._name))
        if inspect.isawaitable(reply):
            reply = await reply
        return self._finish(reply)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The same reply as ``generate``, as word-sized text deltas, then the final response
        (paced by ``delay``, stamped with ``stamp``)."""
        response = await self.generate(messages, instructions=instructions, tools=tools, settings=settings)
        delay = _check_delay(self.delay(messages)) if callable(self.delay) else self.delay
        events = (
            _stream_response(response)
            if delay is None and not self.stamp
            else _paced_response(response, delay or 0.0, self.stamp)
        )
        async for event in events:
            yield event


class TestModel(_Closable):
    """Calls every offered tool once with schema-valid arguments, then answers.

    After a user message it calls the tools named in ``call_tools`` (default: every tool except
    the structured-output tool ``output_tool``); after their results it answers: by calling
    ``output_tool`` when offered (with ``output_args`` or arguments made from its schema), else
    with ``output_text`` or, by default, a JSON object mapping each tool to its result text.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        name: str = "test",
        *,
        call_tools: Sequence[str] | str = "all",
        output_text: str | None = None,
        output_args: dict[str, Any] | None = None,
        output_tool: str = "final_result",
    ) -> None:
        self._name = name
        self.call_tools = call_tools
        self.output_text = output_text
        self.output_args = output_args
        self.output_tool = output_tool
        self._ids = itertools.count(1)
        self._profile = Profile(provider="test", family="test")

    @property
    def name(self) -> str:
        return self._name

    @property
    def profile(self) -> Profile:
        return self._profile

    def _selected(self, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
        usable = [t for t in tools if t.name != self.output_tool]
        if self.call_tools == "all":
            return usable
        wanted = {self.call_tools} if isinstance(self.call_tools, str) else set(self.call_tools)
        return [t for t in usable if t.name in wanted]

    def _call(self, definition: ToolDefinition, args: Any) -> ToolCall:
        arguments = msgspec.json.encode(args).decode()
        return ToolCall(f"test_{next(self._ids)}", definition.name, arguments)

    def _reply(self, messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> Message:
        last = messages[-1] if messages else None
        output = next((t for t in tools if t.name == self.output_tool), None)
        if last is None or last.role != "tool":
            selected = self._selected(tools)
            if selected:
                return assistant(*(self._call(t, schema_example(t.parameters)) for t in selected))
        if output is not None:
            args = self.output_args if self.output_args is not None else schema_example(output.parameters)
            return assistant(self._call(output, args))
        if self.output_text is not None:
            return assistant(self.output_text)
        if last is not None and last.role == "tool":
            results: dict[str, str] = {}
            for r in last.parts:
                if type(r) is ToolResult:
                    results[r.name] = r.text
            return assistant(msgspec.json.encode(results).decode())
        return assistant("success (no tool calls)")

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One scripted turn (see the class docstring)."""
        message = self._reply(messages, tools)
        stop = "tool_calls" if message.tool_calls else "stop"
        usage = Usage(output_tokens=_approx_tokens(message))
        message = replace(message, provider="test", model=self._name, stop_reason=stop, usage=usage)
        return ModelResponse(message, stop, usage)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """The same turn as ``generate``, as deltas, then the final response."""
        response = await self.generate(messages, instructions=instructions, tools=tools, settings=settings)
        async for event in _stream_response(response):
            yield event
