"""Streaming: events stamped with ids, ending with the same Result that run returns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from msgspec.structs import replace

from tether import Message, Reasoning, RunCanceled, Text, ToolCall, ToolError, assistant
from tether.agent import (
    Agent,
    MessageCompleted,
    ReasoningEvent,
    RunCompleted,
    TextEvent,
    Tool,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.models import ModelResponse, ModelSettings, Profile, StreamEvent, TextDelta, ToolDefinition

from .scripts import Script, calls


def double(x: int) -> int:
    return 2 * x


async def test_stream_events_and_final_result_match_run() -> None:
    replies = (
        assistant(Reasoning("thinking hard"), ToolCall("c1", "double", '{"x": 21}')),
        "the answer is 42",
    )
    streamed = Agent(Script(*replies).model, tools=[double])
    events = []
    async with streamed.run_stream("go", run_id="r1", conversation_id="conv") as stream:
        async for event in stream:
            events.append(event)
    final = events[-1]
    assert isinstance(final, RunCompleted)
    result = final.result
    assert stream.result is result
    plain = await Agent(Script(*replies).model, tools=[double]).run("go", run_id="r1", conversation_id="conv")
    # the same ids were given, so everything must match, message metadata included
    assert result.messages == plain.messages
    assert result.new_messages == plain.new_messages
    assert (result.usage, result.requests, result.tool_executions) == (
        plain.usage,
        plain.requests,
        plain.tool_executions,
    )
    assert (result.run_id, result.conversation_id, result.deferred) == ("r1", "conv", None)
    assert result.output == plain.output == "the answer is 42"
    # with fresh ids the results differ only in the ids stamped on the new messages
    fresh = await Agent(Script(*replies).model, tools=[double]).run("go")
    assert [replace(m, run_id="r1", conversation_id="conv") for m in fresh.messages] == list(plain.messages)
    assert result.messages[2].tool_results[0].text == "42"  # tool results appended inside the run
    assert {(e.run_id, e.conversation_id) for e in events} == {(result.run_id, result.conversation_id)}
    text = "".join(e.text for e in events if isinstance(e, TextEvent))
    assert text == "the answer is 42"
    assert [e.text for e in events if isinstance(e, ReasoningEvent)] == ["thinking hard"]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.call.id for e in started] == ["c1"]
    assert [e.result.text for e in finished] == ["42"]
    completed = [e.message for e in events if isinstance(e, MessageCompleted)]
    assert tuple(completed) == result.new_messages
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ToolCallStarted") < kinds.index("ToolCallFinished")


async def test_stream_failure_raises_from_iteration() -> None:
    def bad() -> None:
        raise OSError("nope")

    agent = Agent(Script(calls(("c1", "bad", "{}"))).model, tools=[Tool(bad, propagate=True)])
    seen: list[object] = []

    async def consume() -> None:
        async with agent.run_stream("go") as stream:
            async for event in stream:
                seen.append(event)

    with pytest.raises(ToolError) as info:
        await consume()
    assert info.value.partial is not None
    assert any(isinstance(e, MessageCompleted) for e in seen)


class SlowStreamModel:
    """A model whose stream yields a delta, then waits (a client may disconnect meanwhile)."""

    def __init__(self) -> None:
        self.cancelled = False

    @property
    def name(self) -> str:
        return "slow"

    @property
    def profile(self) -> Profile:
        return Profile(provider="slow")

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        raise AssertionError("streaming only")

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        yield TextDelta(0, "hel")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        yield ModelResponse(assistant(Text("hello")), "stop")


async def test_leaving_the_stream_early_cancels_the_run() -> None:
    model = SlowStreamModel()
    async with Agent(model).run_stream("go") as stream:
        async for event in stream:
            if isinstance(event, TextEvent):
                break
        else:
            raise AssertionError("no text event")
    assert model.cancelled


async def test_cancelled_streamed_run_raises_run_canceled() -> None:
    model = SlowStreamModel()
    stream = Agent(model).run_stream("go")
    events = aiter(stream)
    first = await anext(events)
    assert isinstance(first, MessageCompleted)
    assert first.message.text == "go"
    second = await anext(events)
    assert isinstance(second, TextEvent)
    assert second.text == "hel"
    task = stream._task  # the run's task
    assert task is not None
    task.cancel()
    with pytest.raises(RunCanceled):
        await anext(events)


async def test_closing_the_iterator_without_a_context_manager_cancels_the_run() -> None:
    model = SlowStreamModel()
    stream = Agent(model).run_stream("go")
    events = stream.__aiter__()
    assert isinstance(await anext(events), MessageCompleted)
    assert isinstance(await anext(events), TextEvent)
    await events.aclose()  # what a disconnecting server does
    task = stream._task
    assert task is not None
    with pytest.raises(RunCanceled):
        await task
    assert model.cancelled
