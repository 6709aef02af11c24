"""Identity, partial results and resume: max steps, ToolCanceled, cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tether import (
    MaxStepsError,
    Message,
    RunCanceled,
    ToolCall,
    ToolError,
    ToolResult,
    assistant,
    new_id,
    tool,
    user,
)
from tether.agent import (
    CANCELED_WHILE_RUNNING_TEXT,
    STEP_LIMIT_TEXT,
    Agent,
    Tool,
    ToolCanceled,
    cancelled_partial,
)
from tether.history import INTERRUPTED_TEXT, check_history
from tether.models.testing import FunctionInfo, FunctionModel

from .scripts import Script, calls


def _noop() -> str:
    return "ok"


# -- identity ---------------------------------------------------------------------------------


async def test_ids_stamped_on_every_added_message_never_on_received_history() -> None:
    history = [user("q"), assistant("a")]
    script = Script(calls(("c1", "_noop", "{}")), "done")
    result = await Agent(script.model, tools=[_noop]).run("next", history=history)
    assert result.messages[:2] == tuple(history)
    assert all(m.run_id is None and m.conversation_id is None for m in result.messages[:2])
    assert len(result.new_messages) == 4
    assert {(m.run_id, m.conversation_id) for m in result.new_messages} == {
        (result.run_id, result.conversation_id)
    }


async def test_run_id_fresh_per_run_and_can_be_aligned() -> None:
    script = Script("a", "b", "c")
    agent = Agent(script.model)
    r1 = await agent.run("1")
    r2 = await agent.run("2", history=r1.messages)
    r3 = await agent.run("3", history=r2.messages, run_id="trace-123")
    assert len({r1.run_id, r2.run_id}) == 2
    assert r3.run_id == "trace-123"
    assert r3.new_messages[0].run_id == "trace-123"


async def test_conversation_id_explicit_then_donated_then_new() -> None:
    script = Script("a", "b", "c", "d")
    agent = Agent(script.model)
    fresh = await agent.run("1")
    assert fresh.conversation_id
    donated = await agent.run("2", history=fresh.messages)
    assert donated.conversation_id == fresh.conversation_id
    fork_id = new_id()
    forked = await agent.run("3", history=fresh.messages, conversation_id=fork_id)
    assert forked.conversation_id == fork_id
    assert all(m.conversation_id == fork_id for m in forked.new_messages)
    # the most recent identified message donates, even behind unidentified ones
    mixed = [*fresh.messages, user("typed by hand")]
    assert (await agent.run("4", history=mixed)).conversation_id == fresh.conversation_id


# -- max steps --------------------------------------------------------------------------------


async def test_max_steps_closes_final_turn_and_raises_with_resumable_history() -> None:
    step = 0

    def loop(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        nonlocal step
        step += 1
        if step <= 3:
            return assistant(ToolCall(f"c{step}a", "_noop", "{}"), ToolCall(f"c{step}b", "_noop", "{}"))
        return "finally"

    agent = Agent(FunctionModel(loop), tools=[_noop], max_steps=3)
    with pytest.raises(MaxStepsError) as info:
        await agent.run("go")
    partial = info.value.partial
    assert partial is not None
    assert partial.requests == 3
    assert partial.tool_executions == 4
    last = partial.messages[-1]
    assert [(r.call_id, r.failed, r.synthesized, r.text) for r in last.tool_results] == [
        ("c3a", True, True, STEP_LIMIT_TEXT),
        ("c3b", True, True, STEP_LIMIT_TEXT),
    ]
    assert last.run_id == partial.run_id
    assert check_history(partial.messages) == []
    resumed = await agent.run(history=partial.messages)
    assert resumed.output == "finally"


# -- ToolCanceled -----------------------------------------------------------------------------


async def test_tool_canceled_keeps_earlier_results_and_closes_the_rest() -> None:
    sibling_cancelled = asyncio.Event()

    async def quick() -> str:
        return "quick done"

    async def stopper() -> str:
        await asyncio.sleep(0.01)
        raise ToolCanceled("user pressed stop")

    async def slow() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            sibling_cancelled.set()
            raise
        return "never"

    script = Script(calls(("c1", "quick", "{}"), ("c2", "stopper", "{}"), ("c3", "slow", "{}")))
    agent = Agent(script.model, tools=[quick, stopper, slow])
    with pytest.raises(RunCanceled, match="user pressed stop") as info:
        await agent.run("go")
    assert sibling_cancelled.is_set()
    assert info.value.stage == "tools"
    partial = info.value.partial
    assert partial is not None
    results = partial.messages[-1].tool_results
    assert [(r.call_id, r.text, r.synthesized) for r in results] == [
        ("c1", "quick done", False),
        ("c2", "stopped: this call canceled the run (user pressed stop); no result was produced", True),
        ("c3", CANCELED_WHILE_RUNNING_TEXT, True),  # it was running: never "interrupted before execution"
    ]
    assert check_history(partial.messages) == []
    assert partial.tool_executions == 1
    # resuming needs zero repair
    resumed = await Agent(Script("resumed").model).run("continue", history=partial.messages)
    assert not resumed.repair.changed


# -- cancellation -----------------------------------------------------------------------------


async def test_cancelling_the_awaiting_task_propagates_and_keeps_a_closed_partial() -> None:
    entered = asyncio.Event()

    async def hang() -> str:
        entered.set()
        await asyncio.sleep(10)
        return "never"

    script = Script(calls(("c1", "hang", "{}"), ("c2", "hang", "{}")))
    task = asyncio.ensure_future(Agent(script.model, tools=[hang]).run("go"))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as info:
        await task
    assert task.cancelled()  # asyncio's rule: cancellation propagates
    partial = cancelled_partial(info.value)
    assert partial is not None
    # the batch is closed: both tools were running, so their outcome is unknown
    assert [r.text for r in partial.messages[-1].tool_results] == [CANCELED_WHILE_RUNNING_TEXT] * 2
    assert check_history(partial.messages) == []
    resumed = await Agent(Script("ok").model).run("continue", history=partial.messages)
    assert not resumed.repair.changed


async def test_cancellation_before_any_turn_keeps_the_prompt() -> None:
    entered = asyncio.Event()

    async def slow_model(messages: Sequence[Message], info: FunctionInfo) -> str:
        entered.set()
        await asyncio.sleep(10)
        return "never"

    task = asyncio.ensure_future(Agent(FunctionModel(slow_model)).run("go"))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as info:
        await task
    partial = cancelled_partial(info.value)
    assert partial is not None
    assert [m.text for m in partial.new_messages] == ["go"]  # a stop keeps what the user said
    assert partial.requests == 0


async def test_failure_mid_batch_resumes_with_repair() -> None:
    def boom() -> str:
        raise RuntimeError("disk on fire")

    script = Script(calls(("c1", "_noop", "{}"), ("c2", "boom", "{}")))
    agent = Agent(script.model, tools=[_noop, Tool(boom, propagate=True)])
    with pytest.raises(ToolError) as info:
        await agent.run("go")
    partial = info.value.partial
    assert partial is not None
    assert partial.messages[-1].tool_calls
    resumed = await Agent(Script("fine").model).run("continue", history=partial.messages)
    assert [c.call_id for c in resumed.repair.synthesized] == ["c1", "c2"]
    assert check_history(resumed.messages) == []
    assert resumed.messages[-1].text == "fine"
    assert resumed.messages[2] == tool(
        ToolResult("c1", "_noop", INTERRUPTED_TEXT, synthesized=True),
        ToolResult("c2", "boom", INTERRUPTED_TEXT, synthesized=True),
    )


async def test_cancellation_while_a_side_effect_runs_closes_the_batch_as_unknown() -> None:
    entered = asyncio.Event()

    async def charge(amount: int) -> str:
        entered.set()
        await asyncio.sleep(10)
        return "never"

    async def quick() -> str:
        return "quick done"

    script = Script(calls(("c1", "quick", "{}"), ("c2", "charge", '{"amount": 1}')))
    agent = Agent(script.model, tools=[quick, Tool(charge, idempotent=False)])
    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as info:
        await task
    partial = cancelled_partial(info.value)
    assert partial is not None
    results = partial.messages[-1].tool_results
    assert [(r.call_id, r.text) for r in results] == [
        ("c1", "quick done"),
        ("c2", CANCELED_WHILE_RUNNING_TEXT),
    ]
    assert partial.tool_executions == 1
    resumed = await Agent(Script("ok").model).run("continue", history=partial.messages)
    assert not resumed.repair.changed  # nothing left for repair to call "interrupted before execution"
