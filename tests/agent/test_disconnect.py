"""A client that goes away (leaves ``run_stream`` early) stops the run exactly once: the run ends
with ``RunCanceled`` carrying its partial, and the store keeps the evidence, closed so that it
passes ``check_history`` — before the first model turn, during a model stream, during a tool batch
(idempotent and side-effecting tools) and during the store append itself. Every test runs on
MemoryStore, a real SQLite file and the real PostgreSQL server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from tether import (
    Message,
    ModelResponse,
    ModelSettings,
    Profile,
    RunCanceled,
    StoreError,
    StreamEvent,
    Text,
    TextDelta,
    ToolCall,
    ToolDefinition,
    assistant,
)
from tether.agent import (
    CANCELED_STOP_REASON,
    CANCELED_WHILE_RUNNING_TEXT,
    Agent,
    MessageCompleted,
    StoreRecorder,
    TextEvent,
    Tool,
    ToolCallStarted,
)
from tether.history import INTERRUPTED_TEXT, check_history
from tether.stores import Store


class Slow:
    """A model that streams ``deltas`` and then waits for ``release`` (forever by default); counts
    how many times it was cancelled. A second cancellation would interrupt its clean-up."""

    def __init__(self, *deltas: str, reply: Message | None = None) -> None:
        self.deltas = deltas
        self.reply = reply
        self.release = asyncio.Event()
        self.cancels = 0
        self.cleanups = 0

    @property
    def name(self) -> str:
        return "slow:m1"

    @property
    def profile(self) -> Profile:
        return Profile(provider="slow")

    async def generate(self, messages: Sequence[Message], **_: Any) -> ModelResponse:
        raise AssertionError("streaming only")

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        if self.reply is not None:
            yield ModelResponse(self.reply, "tool_calls")
            return
        for i, text in enumerate(self.deltas):
            yield TextDelta(0, text)
            del i
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancels += 1
            await asyncio.sleep(0.02)  # clean-up that a second cancellation would cut short
            self.cleanups += 1
            raise
        yield ModelResponse(assistant("".join(self.deltas)), "stop")


class SlowTool:
    def __init__(self) -> None:
        self.cancels = 0
        self.cleanups = 0
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancels += 1
            await asyncio.sleep(0.02)
            self.cleanups += 1
            raise
        return "never"


async def _disconnect(agent: Agent[Any, str], store: Store, stop_at: type) -> RunCanceled:
    """Stream a run and leave at the first event of type ``stop_at`` (a client going away)."""
    async with agent.run_stream("go", store=store, owner="o", conversation_id="c") as stream:
        async for event in stream:
            if isinstance(event, stop_at):
                break
        else:
            raise AssertionError(f"no {stop_at.__name__} event")
    with pytest.raises(RunCanceled) as info:
        await stream.get_result()
    return info.value


async def _stored(store: Store) -> list[Message]:
    messages = list((await store.load("o", "c")).messages)
    assert check_history(messages) == []
    return messages


async def test_disconnect_before_the_first_model_turn_keeps_the_prompt(store: Store) -> None:
    model = Slow()
    # the prompt's event: the stop arrives while the prompt is stored, before the first request
    error = await _disconnect(Agent(model), store, MessageCompleted)
    assert error.partial is not None
    assert [m.text for m in error.partial.new_messages] == ["go"]
    assert [(m.role, m.text) for m in await _stored(store)] == [("user", "go")]
    assert (model.cancels, model.cleanups) == (0, 0)  # the model was never asked


async def test_disconnect_during_the_first_model_request_keeps_the_prompt(store: Store) -> None:
    model = Slow("Hel")
    error = await _disconnect(Agent(model), store, TextEvent)
    assert error.partial is not None
    assert [(m.role, m.text) for m in await _stored(store)] == [("user", "go"), ("assistant", "Hel")]
    assert (model.cancels, model.cleanups) == (1, 1)


async def test_disconnect_during_a_model_stream_keeps_the_streamed_text(store: Store) -> None:
    model = Slow("hel", "lo th")
    error = await _disconnect(Agent(model), store, TextEvent)
    partial = error.partial
    assert partial is not None
    assert partial.unfinished is not None
    assert partial.unfinished.stop_reason == CANCELED_STOP_REASON
    stored = await _stored(store)
    assert [(m.role, m.stop_reason) for m in stored] == [("user", None), ("assistant", CANCELED_STOP_REASON)]
    assert stored[1].text in ("hel", "hello th")  # what had arrived when the client left
    assert stored[1].run_id == partial.run_id
    assert (model.cancels, model.cleanups) == (1, 1)


@pytest.mark.parametrize("idempotent", [True, False])
async def test_disconnect_during_a_tool_batch_closes_the_batch(store: Store, idempotent: bool) -> None:
    slow = SlowTool()
    model = Slow(reply=assistant(ToolCall("c1", "slow", "{}"), ToolCall("c2", "quick", "{}")))

    async def quick() -> str:
        await asyncio.sleep(5)
        return "quick"

    agent = Agent(model, tools=[Tool(slow, name="slow", idempotent=idempotent), quick])
    error = await _disconnect(agent, store, ToolCallStarted)
    assert error.partial is not None
    stored = await _stored(store)
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    texts = [r.text for r in stored[2].tool_results]
    assert texts[0] == CANCELED_WHILE_RUNNING_TEXT  # it had started: it may have had effects
    assert texts[1] in (CANCELED_WHILE_RUNNING_TEXT, INTERRUPTED_TEXT)
    assert (slow.calls, slow.cancels, slow.cleanups) == (1, 1, 1)
    assert await store.pending_tool_effects("o", "c") == []  # the closing results settled the ledger
    assert list(error.partial.messages) == stored


class GatedStore:
    """A real store whose next append of a model turn waits for ``release`` after ``entered`` is
    set (the prompt is appended on its own before the first request, ADR 0015)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.gate = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append(self, owner: str, cid: str, messages: Sequence[Message], **kwargs: Any) -> int:
        if self.gate and any(m.role == "assistant" for m in messages):
            self.gate = False
            self.entered.set()
            await self.release.wait()
        return await self.inner.append(owner, cid, messages, **kwargs)


@pytest.mark.parametrize("how", ["stream.cancel()", "consumer task cancelled"])
async def test_disconnect_during_the_store_append_completes_it_then_stores_the_rest(
    store: Store, how: str
) -> None:
    gated = GatedStore(store)
    gated.gate = True  # the checkpoint before the side-effecting tool
    tool_ran = asyncio.Event()

    async def charge() -> str:
        tool_ran.set()
        return "charged"

    model = Slow(reply=assistant(ToolCall("c1", "charge", "{}")))
    agent = Agent(model, tools=[Tool(charge, idempotent=False)])
    stream = agent.run_stream("go", store=gated, owner="o", conversation_id="c")  # type: ignore[arg-type]

    async def consume() -> None:
        async with stream:
            async for _ in stream:
                pass

    consumer = asyncio.ensure_future(consume())
    await asyncio.wait_for(gated.entered.wait(), 5)
    if how == "stream.cancel()":
        stream.cancel()
        stream.cancel()  # once only, however often a client says it
    else:
        consumer.cancel()
    await asyncio.sleep(0.05)
    gated.release.set()  # the append goes through although the run was stopped meanwhile
    with pytest.raises((RunCanceled, asyncio.CancelledError)):
        await consumer
    with pytest.raises(RunCanceled) as info:
        await stream.get_result()
    assert not tool_ran.is_set()  # stopped before the side effect
    stored = await _stored(store)
    assert [m.role for m in stored] == ["user", "assistant", "tool"]
    assert [r.text for r in stored[2].tool_results] == [INTERRUPTED_TEXT]
    assert info.value.partial is not None
    assert list(info.value.partial.messages) == stored


async def test_a_stopped_run_is_cancelled_once_even_when_the_iterator_is_closed_too(store: Store) -> None:
    model = Slow("a")
    stream = Agent(model).run_stream("go", store=store, owner="o", conversation_id="c")
    async with stream:
        events = stream.__aiter__()
        assert isinstance(await anext(events), MessageCompleted)
        assert isinstance(await anext(events), TextEvent)
        await events.aclose()  # the server closes the iterator, then leaves the block
    assert (model.cancels, model.cleanups) == (1, 1)
    with pytest.raises(RunCanceled):
        await stream.get_result()
    assert [m.role for m in await _stored(store)] == ["user", "assistant"]


async def test_a_finished_run_is_not_stopped_by_leaving_the_block(store: Store) -> None:
    model = Slow("done")
    model.release.set()
    async with Agent(model).run_stream("go", store=store, owner="o", conversation_id="c") as stream:
        result = await stream.get_result()
    assert result.output == "done"
    stored = await _stored(store)
    assert [(m.role, m.text) for m in stored] == [("user", "go"), ("assistant", "done")]
    assert isinstance(stored[1].parts[0], Text)


class GatedLoad:
    """A real store whose next load waits for ``release`` after ``entered`` is set."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load(self, *args: Any, **kwargs: Any) -> Any:
        if not self.entered.is_set():
            self.entered.set()
            await self.release.wait()
        return await self.inner.load(*args, **kwargs)


async def test_a_stop_while_the_conversation_opens_keeps_the_prompt_after_the_history(store: Store) -> None:
    await store.create("o", "c")
    await store.append("o", "c", [Message("user", (Text("before"),)), assistant("earlier answer")])
    gated = GatedLoad(store)
    stream = Agent(Slow("x")).run_stream("go", store=gated, owner="o", conversation_id="c")  # type: ignore[arg-type]
    async with stream:
        await asyncio.wait_for(gated.entered.wait(), 5)
        stream.cancel()  # the client leaves while the conversation is being loaded
        await asyncio.sleep(0.05)
        gated.release.set()
    with pytest.raises(RunCanceled) as info:
        await stream.get_result()
    partial = info.value.partial
    assert partial is not None
    assert [m.text for m in partial.new_messages] == ["go"]
    assert [m.text for m in partial.messages] == ["before", "earlier answer", "go"]
    assert [m.text for m in await _stored(store)] == ["before", "earlier answer", "go"]


async def test_leaving_the_block_at_once_keeps_the_prompt(store: Store) -> None:
    model = Slow("x")
    async with Agent(model).run_stream("go", store=store, owner="o", conversation_id="c") as stream:
        pass  # the client went away before reading anything
    with pytest.raises(RunCanceled) as info:
        await stream.get_result()
    assert info.value.partial is not None
    assert [m.text for m in info.value.partial.new_messages] == ["go"]
    assert [(m.role, m.text) for m in await _stored(store)] == [("user", "go")]


async def test_a_stop_while_the_history_processor_runs_keeps_the_prompt() -> None:
    entered = asyncio.Event()

    async def processor(history: Sequence[Message]) -> Sequence[Message]:
        entered.set()
        await asyncio.sleep(10)
        return history

    agent = Agent(Slow("x"), history_processor=processor)
    stream = agent.run_stream("go", history=[Message("user", (Text("hi"),)), assistant("hello")])
    async with stream:
        await asyncio.wait_for(entered.wait(), 5)
    with pytest.raises(RunCanceled) as info:
        await stream.get_result()
    assert info.value.partial is not None
    assert [m.text for m in info.value.partial.messages] == ["hi", "hello", "go"]


async def test_a_store_that_never_answers_the_open_fails_the_run_within_write_timeout(store: Store) -> None:
    gated = GatedLoad(store)  # never released
    recorder = StoreRecorder(gated, "o", "c", write_timeout=0.2)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="write_timeout"):
        await Agent(Slow("x")).run("go", recorder=recorder)
