"""The run loop: results, chaining, instructions, history processing, validation, repair."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest

from tether import (
    HistoryError,
    Image,
    Message,
    ModelError,
    RunError,
    Text,
    ToolCall,
    ToolResult,
    Usage,
    UserError,
    assistant,
    system,
    tool,
    user,
)
from tether.agent import Agent, MessagesView, RunContext
from tether.history import INTERRUPTED_TEXT, check_history
from tether.models import ModelResponse
from tether.models.testing import FunctionInfo, FunctionModel, TestModel

from .scripts import Script, calls


async def test_text_run_returns_result_with_full_conversation() -> None:
    script = Script("hello there")
    agent = Agent(script.model)
    result = await agent.run("hi")
    assert result.output == "hello there"
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert result.new_messages == result.messages
    assert result.requests == 1
    assert result.tool_executions == 0
    assert result.usage.output_tokens == 2
    assert result.messages[1].stop_reason == "stop"
    assert "messages=2" in repr(result)  # short repr: never the whole conversation


async def test_chaining_sends_previous_messages_and_appends() -> None:
    script = Script("first answer", "second answer")
    agent = Agent(script.model)
    first = await agent.run("one")
    second = await agent.run("two", history=first.messages)
    assert second.messages[:2] == first.messages
    assert [m.text for m in second.new_messages] == ["two", "second answer"]
    assert [m.text for m in script.seen[1]] == ["one", "first answer", "two"]
    assert second.conversation_id == first.conversation_id
    assert second.run_id != first.run_id


async def test_tool_loop_records_results_and_counts() -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    script = Script(
        calls(("c1", "add", '{"a": 2, "b": 3}')), lambda msgs, info: f"sum is {msgs[-1].parts[0].text}"
    )
    result = await Agent(script.model, tools=[add]).run("add")
    assert result.output == "sum is 5"
    assert result.tool_executions == 1
    assert result.requests == 2
    tool_msg = result.messages[2]
    assert tool_msg.role == "tool"
    assert tool_msg.tool_results[0] == ToolResult("c1", "add", (Text("5"),))
    assert check_history(result.messages) == []


def test_run_sync_wraps_run() -> None:
    script = Script("sync answer")
    result = Agent(script.model).run_sync("hi")
    assert result.output == "sync answer"


async def test_run_sync_inside_a_loop_is_refused() -> None:

    with pytest.raises(UserError, match="running event loop"):
        Agent(Script("x").model).run_sync("hi")


async def test_prompt_as_parts() -> None:

    script = Script("seen")
    img = Image(data=b"\x89PNG", media_type="image/png")
    result = await Agent(script.model).run(["look", img])
    assert result.messages[0].parts == (Text("look"), img)


# -- instructions -----------------------------------------------------------------------------


async def test_instructions_static_then_dynamic_blank_line_once_per_run() -> None:
    evaluated: list[str] = []

    def dynamic(ctx: RunContext[str]) -> str:
        evaluated.append(ctx.deps)
        return f"user is {ctx.deps}"

    def echo(x: int) -> int:
        return x

    script = Script(calls(("c1", "echo", '{"x": 1}')), "done")
    agent = Agent(script.model, instructions="be brief", instructions_fn=dynamic, tools=[echo])
    await agent.run("hi", deps="ada")
    assert [i.instructions for i in script.infos] == ["be brief\n\nuser is ada"] * 2
    assert evaluated == ["ada"]


async def test_empty_dynamic_instructions_contribute_nothing() -> None:
    script = Script("a", "b")
    await Agent(script.model, instructions="static", instructions_fn=lambda ctx: "").run("hi")
    await Agent(script.model).run("hi")
    assert [i.instructions for i in script.infos] == ["static", None]


async def test_async_dynamic_instructions() -> None:
    async def dyn(ctx: RunContext[None]) -> str:
        return "from async"

    script = Script("a")
    await Agent(script.model, instructions_fn=dyn).run("hi")
    assert script.infos[0].instructions == "from async"


async def test_system_messages_in_history_are_kept_but_not_sent() -> None:
    script = Script("ok")
    history = [system("old system prompt"), user("q"), assistant("a")]
    result = await Agent(script.model, instructions="current").run("next", history=history)
    assert all(m.role != "system" for m in script.seen[0])
    assert script.infos[0].instructions == "current"
    assert result.messages[0] == history[0]


# -- history processor, validation, repair ----------------------------------------------------


async def test_history_processor_runs_once_on_supplied_history() -> None:
    received: list[list[Message]] = []

    def keep_last_two(history: Sequence[Message]) -> list[Message]:
        received.append(list(history))
        return list(history)[-2:]

    def noop() -> str:
        return "x"

    script = Script(calls(("c1", "noop", "{}")), "done")
    supplied = [user("1"), assistant("2"), user("3"), assistant("4")]
    result = await Agent(script.model, history_processor=keep_last_two, tools=[noop]).run(
        "5", history=supplied
    )
    assert received == [supplied]
    assert [m.text for m in script.seen[0]] == ["3", "4", "5"]
    assert [m.text for m in result.messages[:3]] == ["3", "4", "5"]


async def test_async_history_processor() -> None:
    async def last_one(history: Sequence[Message]) -> list[Message]:
        return list(history)[-1:]

    script = Script("ok")
    await Agent(script.model, history_processor=last_one).run("new", history=[user("old"), assistant("a")])
    assert [m.text for m in script.seen[0]] == ["a", "new"]


async def test_history_processor_with_context() -> None:
    seen: list[str] = []

    def proc(history: Sequence[Message], ctx: RunContext[str]) -> list[Message]:
        seen.append(ctx.deps)
        return list(history)

    await Agent(Script("ok").model, history_processor=proc).run("hi", deps="d")
    assert seen == ["d"]


async def test_history_processor_error_fails_before_any_model_call() -> None:
    def broken(history: Sequence[Message]) -> list[Message]:
        raise ValueError("boom")

    script = Script("never")
    with pytest.raises(RunError) as info:
        await Agent(script.model, history_processor=broken).run("hi", history=[user("x")])
    assert info.value.stage == "history"
    assert info.value.partial is None
    assert "boom" in str(info.value)
    assert script.seen == []


async def test_history_processor_returning_non_messages_fails_with_index() -> None:
    with pytest.raises(RunError, match="index 1"):
        await Agent(Script("x").model, history_processor=lambda h: [user("a"), "b"]).run("hi")


@pytest.mark.parametrize(
    ("history", "match"),
    [
        ([], "both are empty"),
        ([user("q"), assistant("a")], "finished assistant answer"),
        ([user("q"), assistant(ToolCall("c", "t", "{}"))], "no results"),
    ],
)
async def test_without_prompt_history_must_be_resumable(history: list[Message], match: str) -> None:
    script = Script("x")
    with pytest.raises(HistoryError, match=match):
        await Agent(script.model).run(history=history)
    assert script.seen == []


async def test_without_prompt_resumes_from_user_or_tool_results() -> None:
    script = Script("answer 1", "answer 2")
    agent = Agent(script.model)
    r1 = await agent.run(history=[user("q")])
    assert r1.output == "answer 1"
    turn = assistant(ToolCall("c1", "t", "{}"))
    r2 = await agent.run(history=[user("q"), turn, tool(ToolResult("c1", "t", "r"))])
    assert r2.output == "answer 2"
    assert r2.new_messages[0].text == "answer 2"


async def test_repair_happens_once_and_becomes_part_of_messages() -> None:
    dangling = assistant(ToolCall("c1", "lookup", "{}"))
    orphan = tool(ToolResult("zz", "lookup", "orphan"))
    script = Script("fine")
    result = await Agent(script.model).run("go on", history=[user("q"), dangling, orphan])
    assert result.repair.changed
    assert [c.call_id for c in result.repair.synthesized] == ["c1"]
    synthesized = result.messages[2]
    assert synthesized.tool_results[0].text == INTERRUPTED_TEXT
    assert synthesized.run_id is None
    assert synthesized.conversation_id is None
    assert check_history(script.seen[0]) == []
    assert check_history(result.messages) == []


async def test_per_step_requests_get_a_growing_view_not_a_copy() -> None:
    def noop() -> str:
        return "ok"

    received: list[Sequence[Message]] = []

    def fn(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        received.append(messages)
        if len(received) < 4:
            return assistant(ToolCall(f"c{len(received)}", "noop", "{}"))
        return "end"

    history = [user("q"), assistant("a")] * 50
    result = await Agent(FunctionModel(fn), tools=[noop]).run("go", history=history)
    assert all(type(m) is MessagesView for m in received)
    # each step's view kept the length it had when sent, while the run's list grew behind it
    assert [len(m) for m in received] == [101, 103, 105, 107]
    assert len(result.messages) == 108
    # one list shared by every view, holding the run's own message objects: nothing was copied
    backing = [[o for o in gc.get_referents(m) if type(o) is list] for m in received]
    assert all(len(lists) == 1 for lists in backing)
    shared = backing[0][0]
    assert all(lists[0] is shared for lists in backing)
    assert len(shared) == 108
    assert all(a is b for a, b in zip(shared, result.messages, strict=True))


# -- stop reasons and model failures ----------------------------------------------------------


async def test_length_stop_without_calls_is_not_an_answer() -> None:
    cut = ModelResponse(assistant("partial ans"), "length", Usage(output_tokens=5))
    with pytest.raises(ModelError) as info:
        await Agent(Script(cut).model).run("hi")
    assert info.value.stage == "model"
    assert info.value.partial is not None
    assert info.value.partial.messages[-1].text == "partial ans"
    assert info.value.partial.usage.output_tokens == 5


async def test_model_exception_becomes_model_error_without_partial_on_first_request() -> None:
    def broken(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise ConnectionError("network down")

    with pytest.raises(ModelError, match="network down") as info:
        await Agent(FunctionModel(broken)).run("hi")
    assert info.value.partial is None
    assert isinstance(info.value.__cause__, ConnectionError)


async def test_model_error_after_a_completed_turn_carries_resumable_partial() -> None:
    def noop() -> str:
        return "ok"

    def fail(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise ModelError("overloaded", stage="model")

    script = Script(calls(("c1", "noop", "{}")), fail, "recovered")
    agent = Agent(script.model, tools=[noop])
    with pytest.raises(ModelError) as info:
        await agent.run("hi")
    partial = info.value.partial
    assert partial is not None
    assert [m.role for m in partial.messages] == ["user", "assistant", "tool"]
    assert partial.requests == 1
    assert partial.tool_executions == 1
    resumed = await agent.run(history=partial.messages)
    assert resumed.output == "recovered"
    assert resumed.conversation_id == partial.conversation_id


async def test_test_model_calls_every_tool_then_answers() -> None:
    def a(x: int) -> int:
        return x + 1

    def b(name: str) -> str:
        return name.upper()

    result = await Agent(TestModel(), tools=[a, b]).run("go")
    assert result.tool_executions == 2
    assert result.output == '{"a":"1","b":"A"}'


async def test_bad_input_is_a_typed_error_naming_where() -> None:

    agent = Agent(Script("x").model)
    with pytest.raises(UserError, match=r"history\[1\] is a str"):
        await agent.run("hi", history=[user("a"), "oops"])  # type: ignore[list-item]
    with pytest.raises(UserError, match=r"history\[1\] is a str"):
        await agent.run(history=[user("a"), "oops"])  # type: ignore[list-item]
    with pytest.raises(UserError, match="prompt must be text"):
        await agent.run(42)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="part 0"):
        await agent.run([ToolCall("c", "t", "{}")])  # type: ignore[list-item]
    with pytest.raises(UserError, match="not a string"):
        await agent.run("hi", history="[]")  # type: ignore[arg-type]


def test_model_given_as_a_string() -> None:
    assert Agent("test").run_sync("hi").output == "success (no tool calls)"


async def test_no_prompt_history_that_ends_answered_after_repair_is_rejected() -> None:
    script = Script("should not be called")
    history = [user("q"), assistant("done"), tool(ToolResult("ghost", "lookup", "orphan"))]
    with pytest.raises(HistoryError, match="finished assistant answer"):
        await Agent(script.model).run(history=history)
    assert script.seen == []


def _duplicate_turn(messages: Sequence[Message], info: FunctionInfo) -> ModelResponse:
    turn = assistant(
        ToolCall("d", "echo", '{"word": "one"}'),
        ToolCall("d", "echo", '{"word": "two"}'),
        ToolCall("d", "echo", '{"word": "one"}'),
        ToolCall(None, "echo", '{"word": "three"}'),
        ToolCall(None, "echo", '{"word": "three"}'),
    )
    return ModelResponse(turn, "tool_calls", Usage())


async def test_duplicate_and_missing_call_ids_keep_the_history_paired() -> None:
    ran: list[str] = []

    def echo(word: str) -> str:
        ran.append(word)
        return word

    script = Script(_duplicate_turn, "done")
    result = await Agent(script.model, tools=[echo]).run("go", run_id="run-1")
    assert check_history(result.messages) == []
    turn = result.messages[1]
    ids = [c.id for c in turn.tool_calls]
    assert len(ids) == len(set(ids)) == 4  # the exact repeat of ("d", echo, one) was dropped
    assert all(ids)
    assert ids[0] == "d"
    assert sorted(ran) == ["one", "three", "three", "two"]
    results = result.messages[2].tool_results
    assert [r.call_id for r in results] == ids
    assert [r.text for r in results] == ["one", "two", "three", "three"]
    # the fresh ids are deterministic: the same run id gives the same ids
    again = await Agent(Script(_duplicate_turn, "done").model, tools=[echo]).run("go", run_id="run-1")
    assert [c.id for c in again.messages[1].tool_calls] == ids


@pytest.mark.parametrize(
    "kwargs",
    [
        {"history": None},
        {"history": [user("a"), "not a message"]},
        {"history": 5},
        {"deferred": {"c1": True}},
        {"tools": 5},
        {"tools": "lookup"},
        {"run_id": 7},
        {"conversation_id": ""},
    ],
)
async def test_bad_run_arguments_raise_typed_errors(kwargs: dict[str, object]) -> None:

    with pytest.raises(UserError):
        await Agent(Script("x").model).run("go", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_steps": float("nan")},  # would never be reached: a run without a step limit
        {"max_steps": True},
        {"max_steps": "5"},
        {"max_steps": 0},
        {"retries": float("nan")},
        {"retries": -1},
        {"retries": "1"},
        {"approval_ttl": float("inf")},  # no expiry can be minted from it
        {"approval_ttl": float("nan")},
        {"approval_ttl": "60"},
        {"approval_ttl": True},
        {"approval_ttl": 0},
    ],
)
def test_bad_agent_arguments_raise_user_error_naming_them(kwargs: dict[str, object]) -> None:
    name = next(iter(kwargs))
    with pytest.raises(UserError, match=name):
        Agent(Script("x").model, approval_secret=b"0123456789abcdef", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("prompt", ["hi \ud800", ["fine", Text("\udfff")]])
async def test_a_prompt_holding_a_lone_surrogate_is_refused_before_the_model_is_asked(prompt: object) -> None:
    asked: list[int] = []

    def reply(messages: Sequence[Message], info: FunctionInfo) -> str:
        asked.append(len(messages))
        return "x"

    with pytest.raises(UserError, match="not valid Unicode"):
        await Agent(FunctionModel(reply)).run(prompt)  # type: ignore[arg-type]
    assert asked == []
