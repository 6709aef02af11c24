"""Toolsets: tools an agent learns at the start of each run (the hook MCP servers use), and
``SchemaTool``, a tool described by a JSON Schema."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tether.agent import Agent, SchemaTool, Tool, Toolset
from tether.errors import RunError, UserError

from .scripts import Script, calls


class Counter:
    """A toolset whose list grows by one tool per listing; records listings and closing."""

    def __init__(self) -> None:
        self.listings = 0
        self.closed = 0
        self.calls: list[dict[str, Any]] = []

    async def list_tools(self) -> Sequence[Tool[Any]]:
        self.listings += 1

        async def call(arguments: dict[str, Any]) -> str:
            self.calls.append(arguments)
            return f"got {arguments['n']}"

        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        return [SchemaTool(f"tool_{i}", f"tool number {i}", schema, call) for i in range(self.listings)]

    async def aclose(self) -> None:
        self.closed += 1


class Broken:
    async def list_tools(self) -> Sequence[Tool[Any]]:
        raise ConnectionError("the registry is down")

    async def aclose(self) -> None:
        return None


def test_a_toolset_is_recognized() -> None:
    assert isinstance(Counter(), Toolset)
    assert not isinstance(Tool(lambda: None, name="x"), Toolset)


async def test_a_toolset_is_asked_at_each_run_start_and_closed_with_the_agent() -> None:
    counter = Counter()
    script = Script(calls(("c1", "tool_0", '{"n": 1}')), "one", "two")

    def plain() -> str:
        return "plain"

    async with Agent(script.model, tools=[plain, counter]) as agent:
        first = await agent.run("go")
        await agent.run("again")
        assert agent.toolsets == (counter,)
        assert [t.name for t in agent.tools] == ["plain"]
    assert first.messages[2].tool_results[0].text == "got 1"
    assert counter.calls == [{"n": 1}]
    assert [d.name for d in script.infos[0].tools] == ["plain", "tool_0"]
    assert [d.name for d in script.infos[2].tools] == ["plain", "tool_0", "tool_1"]
    assert counter.listings == 2
    assert counter.closed == 1


async def test_tools_given_to_a_run_may_hold_toolsets_too() -> None:
    counter = Counter()
    script = Script("done")
    agent = Agent(script.model)
    await agent.run("go", tools=[counter])
    assert [d.name for d in script.infos[0].tools] == ["tool_0"]


async def test_schema_arguments_are_checked_before_the_call() -> None:
    checked: list[dict[str, Any]] = []

    def check(arguments: dict[str, Any]) -> str | None:
        checked.append(arguments)
        return None if isinstance(arguments.get("n"), int) else "n must be an integer"

    async def call(arguments: dict[str, Any]) -> str:
        return "ran"

    tool = SchemaTool("t", "a tool", {"type": "object"}, call, check=check, idempotent=False)
    script = Script(calls(("c1", "t", '{"n": "x"}'), ("c2", "t", "[1]"), ("c3", "t", '{"n": 2}')), "ok")
    result = await Agent(script.model, tools=[tool], retries=3).run("go")
    bad, not_object, good = result.messages[2].tool_results
    assert bad.failed
    assert "n must be an integer" in bad.text
    assert not_object.failed
    assert "not a JSON object" in not_object.text
    assert good.text == "ran"
    assert checked == [{"n": "x"}, {"n": 2}]
    assert not tool.idempotent


def test_a_schema_tool_needs_an_object_schema() -> None:
    async def call(arguments: dict[str, Any]) -> None:
        return None

    with pytest.raises(UserError, match="type object"):
        SchemaTool("t", "", {"type": "array"}, call)
    with pytest.raises(UserError, match="tool name"):
        SchemaTool("bad name", "", {"type": "object"}, call)


async def test_a_toolset_that_cannot_list_fails_the_run_before_the_model() -> None:
    script = Script("never")
    with pytest.raises(RunError, match="the registry is down") as info:
        await Agent(script.model, tools=[Broken()]).run("go")
    assert info.value.stage == "tools"
    assert script.seen == []
