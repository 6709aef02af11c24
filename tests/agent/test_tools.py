"""Tools: schema from signatures and docstrings, validation, failures, concurrency, results."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import threading
import uuid
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pydantic
import pytest

from tether import Image, RunError, Text, ToolCall, ToolError, UserError
from tether.agent import Agent, RunContext, Tool, function_tool
from tether.history import check_history
from tether.models.testing import TestModel, schema_example

from .scripts import Script, calls


@dataclasses.dataclass
class Address:
    street: str
    zip_code: str = "00000"


class Filters(TypedDict):
    kind: str
    limit: int


class Point(msgspec.Struct):
    x: float
    y: float


class Person(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(ge=0)


def _search(
    query: str,
    address: Address,
    filters: Filters,
    point: Point,
    person: Person,
    mode: Literal["fast", "exact"] = "fast",
) -> str:
    """Search for things.

    Args:
        query: What to look for.
        address: Where to look.
        mode: How hard to look.
            Fast is cheap.
    """
    return f"{query}|{address.street}|{filters['kind']}|{point.x}|{person.name}|{mode}"


def test_schema_from_signature_and_google_docstring() -> None:
    t = Tool(_search)
    d = t.definition
    assert d.name == "_search"
    assert d.description == "Search for things."
    params = d.parameters
    assert params["type"] == "object"
    assert params["required"] == ["query", "address", "filters", "point", "person"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["mode"]["enum"] == ["exact", "fast"] or props["mode"]["enum"] == ["fast", "exact"]
    assert props["mode"]["description"] == "How hard to look. Fast is cheap."
    defs = params["$defs"]
    assert defs["Address"]["required"] == ["street"]
    assert defs["Filters"]["properties"]["limit"] == {"type": "integer"}
    assert defs["Point"]["required"] == ["x", "y"]
    # the pydantic model's own schema, inline
    person = props["person"]
    assert person["properties"]["age"]["minimum"] == 0
    # the generated example validates against the tool's own validator
    example = schema_example(params)
    kwargs = t.validate(_call("_search", msgspec.json.encode(example).decode()))
    assert isinstance(kwargs["address"], Address)
    assert isinstance(kwargs["point"], Point)
    assert isinstance(kwargs["person"], Person)


def test_sphinx_and_numpy_docstrings() -> None:
    def sphinx(a: int) -> int:
        """Do a thing.

        :param a: the a value
        :returns: something
        """
        return a

    def numpy(a: int, b: str) -> int:
        """Do numpy things.

        Parameters
        ----------
        a : int
            First value.
        b : str
            Second value.
        """
        return a

    s = Tool(sphinx).definition
    assert s.description == "Do a thing."
    assert s.parameters["properties"]["a"]["description"] == "the a value"
    n = Tool(numpy).definition
    assert n.description == "Do numpy things."
    assert n.parameters["properties"]["a"]["description"] == "First value."
    assert n.parameters["properties"]["b"]["description"] == "Second value."


def test_context_parameter_is_injected_not_described() -> None:
    def with_ctx(ctx: RunContext[int], n: int) -> int:
        return ctx.deps + n

    t = Tool(with_ctx)
    assert t.takes_context
    assert list(t.definition.parameters["properties"]) == ["n"]


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda *args: None, "must be 1-64"),
        (lambda: None, "must be 1-64"),
    ],
)
def test_bad_tool_declarations(fn: Any, match: str) -> None:
    with pytest.raises(UserError, match=match):
        Tool(fn)


def test_var_args_and_misplaced_context_rejected() -> None:
    def star(*args: int) -> None: ...

    def late_ctx(a: int, ctx: RunContext[None]) -> None: ...

    with pytest.raises(UserError, match=r"\*args"):
        Tool(star)
    with pytest.raises(UserError, match="first parameter"):
        Tool(late_ctx)


def test_duplicate_tool_names_rejected() -> None:
    def f() -> None: ...

    with pytest.raises(UserError, match="unique"):
        Agent(Script().model, tools=[f, Tool(f)])


def test_function_tool_decorator_forms() -> None:
    @function_tool
    def plain(a: int) -> int:
        return a

    @function_tool(name="renamed", requires_approval=True, idempotent=False)
    def other(a: int) -> int:
        return a

    assert isinstance(plain, Tool)
    assert plain.name == "plain"
    assert other.name == "renamed"
    assert other.requires_approval
    assert not other.idempotent


def _call(name: str, arguments: str) -> Any:

    return ToolCall("c", name, arguments)


async def test_invalid_and_truncated_arguments_give_failed_results_then_the_model_corrects() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    script = Script(
        calls(("c1", "add", '{"a": "two", "b": 3}'), ("c2", "add", '{"a": 1, "b"')),
        calls(("c3", "add", '{"a": 2, "b": 3}')),
        "done",
    )
    result = await Agent(script.model, tools=[add], retries=2).run("go")
    first = result.messages[2].tool_results
    assert [r.failed for r in first] == [True, True]
    assert "Expected `int`, got `str` - at `$.a`" in first[0].text
    assert "not a complete JSON object" in first[1].text
    assert result.messages[4].tool_results[0].text == "5"
    assert result.tool_executions == 1
    assert check_history(result.messages) == []


async def test_arguments_holding_a_lone_surrogate_reach_the_tool_with_u_fffd_in_its_place() -> None:
    def echo(text: str) -> str:
        return text

    script = Script(calls(("c1", "echo", '{"text": "a\ud800"}')), "done")
    result = await Agent(script.model, tools=[echo]).run("go")
    assert result.messages[1].tool_calls[0].arguments == '{"text": "a\ufffd"}'  # as the run took it in
    first = result.messages[2].tool_results[0]
    assert not first.failed
    assert first.text == "a\ufffd"  # valid Unicode: it can be stored and sent
    assert result.output == "done"


async def test_unknown_tool_gets_a_failed_result_naming_the_tools() -> None:
    def real() -> str:
        return "r"

    script = Script(calls(("c1", "imaginary", "{}")), "ok")
    result = await Agent(script.model, tools=[real]).run("go")
    r = result.messages[2].tool_results[0]
    assert r.failed
    assert "unknown tool 'imaginary'" in r.text
    assert "real" in r.text


async def test_retries_bound_consecutive_invalid_calls() -> None:
    def add(a: int) -> int:
        return a

    bad = calls(("c1", "add", '{"a": "x"}'))
    script = Script(bad, calls(("c2", "add", '{"a": "y"}')))
    with pytest.raises(ToolError, match="more than 1 times") as info:
        await Agent(script.model, tools=[add], retries=1).run("go")
    partial = info.value.partial
    assert partial is not None
    assert partial.messages[-1].tool_results[0].failed
    assert check_history(partial.messages) == []


async def test_tool_exception_becomes_failed_result_with_evidence() -> None:
    def explode(x: int) -> int:
        raise LookupError(f"no record {x}")

    script = Script(calls(("c1", "explode", '{"x": 7}')), "handled")
    result = await Agent(script.model, tools=[explode]).run("go")
    r = result.messages[2].tool_results[0]
    assert r.failed
    assert r.text == "LookupError: no record 7"
    assert result.output == "handled"


async def test_propagating_tool_error_ends_run_at_the_requesting_turn() -> None:
    def strict(x: int) -> int:
        raise PermissionError("denied by policy")

    script = Script(calls(("c1", "strict", '{"x": 1}')))
    agent = Agent(script.model, tools=[Tool(strict, propagate=True)])
    with pytest.raises(ToolError, match="denied by policy") as info:
        await agent.run("go")
    assert isinstance(info.value.__cause__, PermissionError)
    assert info.value.stage == "tools"
    partial = info.value.partial
    assert partial is not None
    assert partial.messages[-1].role == "assistant"
    assert partial.messages[-1].tool_calls[0].id == "c1"


async def test_batch_runs_concurrently_and_records_in_call_order() -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    async def slow(tag: str) -> str:
        started.append(tag)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 5)  # deadlocks if run one after another
        await asyncio.sleep(0.01 if tag == "first" else 0)
        return tag

    script = Script(calls(("c1", "slow", '{"tag": "first"}'), ("c2", "slow", '{"tag": "second"}')), "ok")
    result = await Agent(script.model, tools=[slow]).run("go")
    assert [r.text for r in result.messages[2].tool_results] == ["first", "second"]
    assert [r.call_id for r in result.messages[2].tool_results] == ["c1", "c2"]


async def test_sync_tools_run_in_a_worker_thread_unless_inline() -> None:
    threads: dict[str, int] = {}

    def threaded() -> str:
        threads["threaded"] = threading.get_ident()
        return "a"

    def inline() -> str:
        threads["inline"] = threading.get_ident()
        return "b"

    script = Script(calls(("c1", "threaded", "{}"), ("c2", "inline", "{}")), "ok")
    await Agent(script.model, tools=[threaded, Tool(inline, in_thread=False)]).run("go")
    assert threads["inline"] == threading.get_ident()
    assert threads["threaded"] != threading.get_ident()


async def test_tool_receives_context_and_deps() -> None:
    seen: list[tuple[str, str | None, str]] = []

    def whoami(ctx: RunContext[str]) -> str:
        seen.append((ctx.deps, ctx.tool_call_id, ctx.run_id))
        return ctx.deps

    script = Script(calls(("c1", "whoami", "{}")), "ok")
    result = await Agent(script.model, tools=[whoami]).run("go", deps="alice")
    assert seen == [("alice", "c1", result.run_id)]


async def test_return_values_become_result_content() -> None:
    img = Image(data=b"abc", media_type="image/png")

    def gives_struct() -> Point:
        return Point(1.0, 2.0)

    def gives_model() -> Person:
        return Person(name="ada", age=3)

    def gives_parts() -> list[Text | Image]:
        return [Text("look"), img]

    def gives_none() -> None:
        return None

    script = Script(
        calls(
            ("a", "gives_struct", "{}"),
            ("b", "gives_model", "{}"),
            ("c", "gives_parts", "{}"),
            ("d", "gives_none", "{}"),
        ),
        "ok",
    )
    result = await Agent(script.model, tools=[gives_struct, gives_model, gives_parts, gives_none]).run("go")
    r = result.messages[2].tool_results
    assert r[0].text == '{"x":1.0,"y":2.0}'
    assert r[1].text == '{"name":"ada","age":3}'
    assert r[2].content == (Text("look"), img)
    assert r[3].text == "null"


async def test_tools_per_run_replace_the_agent_tools() -> None:
    def base() -> str:
        return "base"

    def scoped() -> str:
        return "scoped"

    script = Script(calls(("c1", "scoped", "{}")), "ok")
    agent = Agent(script.model, tools=[base])
    result = await agent.run("go", tools=[scoped])
    assert [t.name for t in script.infos[0].tools] == ["scoped"]
    assert result.messages[2].tool_results[0].text == "scoped"
    assert [t.name for t in agent.tools] == ["base"]


async def test_reserved_output_tool_name() -> None:
    def final_result() -> None: ...

    with pytest.raises(UserError, match="reserved"):
        Agent(Script().model, tools=[final_result], output_type=Point)
    # a text agent may use the name
    Agent(Script().model, tools=[final_result])


async def test_run_error_is_the_base_of_tool_errors() -> None:
    assert issubclass(ToolError, RunError)


class Slot(pydantic.BaseModel):
    start: datetime.datetime
    room: str = pydantic.Field(pattern=r"^R[0-9]{3}$")
    seats: int = pydantic.Field(ge=10, le=12)


class Window(msgspec.Struct):
    opens: datetime.time
    closes: datetime.time | None = None


async def test_test_model_calls_tools_with_typed_and_constrained_parameters() -> None:
    seen: list[tuple[object, ...]] = []

    def book(
        when: datetime.datetime,
        day: datetime.date,
        ident: uuid.UUID,
        count: Annotated[int, msgspec.Meta(ge=3, le=5)],
        negative: Annotated[int, msgspec.Meta(lt=-100)],
        code: Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{2}\d{2}$", max_length=4)],
        note: Annotated[str, msgspec.Meta(min_length=3, max_length=3)],
        slot: Slot,
        window: Window,
        stamps: list[datetime.datetime],
    ) -> str:
        seen.append((when, day, ident, count, negative, code, note, slot, window, stamps))
        return "booked"

    result = await Agent(TestModel(), tools=[book]).run("book it")
    assert result.tool_executions == 1
    (tool_result,) = result.messages[2].tool_results
    assert (tool_result.text, tool_result.failed) == ("booked", False)
    (when, day, ident, count, negative, code, note, slot, window, stamps) = seen[0]
    assert isinstance(when, datetime.datetime)
    assert isinstance(day, datetime.date)
    assert isinstance(ident, uuid.UUID)
    assert count == 3
    assert negative == -101
    assert isinstance(code, str)
    assert len(code) == 4
    assert note == "aaa"
    assert isinstance(slot, Slot)
    assert slot.seats == 10
    assert isinstance(window, Window)
    assert isinstance(window.opens, datetime.time)
    assert isinstance(stamps[0], datetime.datetime)
    params = Agent(TestModel(), tools=[book]).tools[0].definition.parameters
    assert params["properties"]["when"]["format"] == "date-time"
