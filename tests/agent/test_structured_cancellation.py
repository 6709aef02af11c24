"""Cancellation composes with asyncio's structured concurrency: a run cancelled from outside
(``asyncio.timeout``, a failing ``TaskGroup`` sibling, ``task.cancel()``) records its partial and
lets ``CancelledError`` propagate, so asyncio turns it into ``TimeoutError``, leaves it out of the
group's errors, and marks the task cancelled; the partial stays reachable. Around ``run``,
``run_stream`` and store runs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tether import Message, RunCanceled
from tether.agent import Agent, cancelled_partial
from tether.history import check_history
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import Store


def _hanging_agent(entered: asyncio.Event) -> Agent[None, str]:
    async def hang(messages: Sequence[Message], info: FunctionInfo) -> str:
        entered.set()
        await asyncio.sleep(30)
        return "never"

    return Agent(FunctionModel(hang))


async def _stored(store: Store) -> list[str]:
    messages = (await store.load("o", "c")).messages
    assert check_history(messages) == []
    return [m.text for m in messages]


async def test_timeout_around_a_store_run_raises_timeout_error_and_keeps_the_prompt(store: Store) -> None:
    agent = _hanging_agent(asyncio.Event())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await agent.run("go", store=store, owner="o", conversation_id="c")
    assert await _stored(store) == ["go"]


async def test_timeout_around_run_without_a_store() -> None:
    entered = asyncio.Event()
    agent = _hanging_agent(entered)
    with pytest.raises(TimeoutError) as info:
        async with asyncio.timeout(0.2):
            await agent.run("go")
    assert entered.is_set()
    partial = cancelled_partial(info.value.__context__ or info.value)
    assert partial is not None
    assert [m.text for m in partial.new_messages] == ["go"]


async def test_a_failing_task_group_sibling_is_the_only_error(store: Store) -> None:
    entered = asyncio.Event()
    agent = _hanging_agent(entered)

    async def sibling() -> None:
        await entered.wait()
        raise ValueError("sibling failed")

    async def both() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(agent.run("go", store=store, owner="o", conversation_id="c"))
            group.create_task(sibling())

    with pytest.raises(ExceptionGroup) as info:
        await both()
    assert [type(e) for e in info.value.exceptions] == [ValueError]
    assert await _stored(store) == ["go"]


async def test_task_cancel_leaves_the_task_cancelled_with_the_partial_reachable(store: Store) -> None:
    entered = asyncio.Event()
    agent = _hanging_agent(entered)
    task = asyncio.ensure_future(agent.run("go", store=store, owner="o", conversation_id="c"))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as info:
        await task
    assert task.cancelled()
    partial = cancelled_partial(info.value)
    assert partial is not None
    assert partial.conversation_id == "c"
    assert await _stored(store) == ["go"]


async def test_timeout_around_a_stream_consumer(store: Store) -> None:
    agent = _hanging_agent(asyncio.Event())
    stream = agent.run_stream("go", store=store, owner="o", conversation_id="c")

    async def consume() -> None:
        async with asyncio.timeout(0.2), stream:
            async for _ in stream:
                pass

    with pytest.raises(TimeoutError):
        await consume()
    with pytest.raises(RunCanceled) as info:  # the run itself was stopped by its stream
        await stream.get_result()
    assert info.value.partial is not None
    assert await _stored(store) == ["go"]


async def test_task_group_around_a_stream_consumer(store: Store) -> None:
    entered = asyncio.Event()
    agent = _hanging_agent(entered)

    async def consume() -> None:
        async with agent.run_stream("go", store=store, owner="o", conversation_id="c") as stream:
            async for _ in stream:
                pass

    async def sibling() -> None:
        await entered.wait()
        raise KeyError("sibling")

    async def both() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(consume())
            group.create_task(sibling())

    with pytest.raises(ExceptionGroup) as info:
        await both()
    assert [type(e) for e in info.value.exceptions] == [KeyError]
    assert await _stored(store) == ["go"]


async def test_cancelling_a_stream_consumer_task_marks_it_cancelled(store: Store) -> None:
    entered = asyncio.Event()
    agent = _hanging_agent(entered)

    async def consume() -> None:
        async with agent.run_stream("go", store=store, owner="o", conversation_id="c") as stream:
            async for _ in stream:
                pass

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert await _stored(store) == ["go"]
