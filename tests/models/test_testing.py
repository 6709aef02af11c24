"""The offline models shipped in tether.models.testing."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import re
import time
import uuid
from collections.abc import Sequence
from typing import Annotated, Literal

import msgspec
import pydantic
import pytest

from tether import Message, Reasoning, Text, ToolCall, ToolResult, Usage, UserError, assistant, tool, user
from tether.models import (
    Model,
    ModelResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    infer_model,
)
from tether.models.testing import FunctionInfo, FunctionModel, TestModel, pattern_example, schema_example


async def _collect(model: Model, messages: Sequence[Message], **kw: object) -> list[StreamEvent]:
    return [e async for e in model.stream(messages, **kw)]  # type: ignore[arg-type]


def test_both_implement_the_model_protocol() -> None:
    assert isinstance(FunctionModel(lambda m, i: "x"), Model)
    assert isinstance(TestModel(), Model)
    assert isinstance(infer_model("test"), TestModel)
    named = infer_model("test:my-name")
    assert named.name == "my-name"


async def test_function_model_passes_messages_and_info_and_completes_the_message() -> None:
    seen: list[tuple[list[Message], FunctionInfo]] = []

    def fn(messages: Sequence[Message], info: FunctionInfo) -> Message:
        seen.append((list(messages), info))
        return assistant("thinking done", ToolCall(None, "lookup", '{"q": 1}'))

    tools = (ToolDefinition("lookup"),)
    model = FunctionModel(fn, name="scripted")
    response = await model.generate([user("hi")], instructions="be brief", tools=tools)
    assert seen[0][0] == [user("hi")]
    assert seen[0][1].instructions == "be brief"
    assert seen[0][1].tools == tools
    assert response.stop_reason == "tool_calls"
    call = response.message.tool_calls[0]
    assert call.id == "call_1"  # an id-less call gets one
    assert response.message.model == "scripted"
    assert response.message.provider == "function"
    assert response.usage == Usage(output_tokens=2 + 1 + len('{"q": 1}') // 4)


async def test_function_model_accepts_async_functions_and_full_responses() -> None:
    given = ModelResponse(assistant("cut"), "length", Usage(input_tokens=7))

    async def fn(messages: Sequence[Message], info: FunctionInfo) -> ModelResponse:
        return given

    assert await FunctionModel(fn).generate([user("x")]) is given


@pytest.mark.parametrize(("reply", "match"), [(42, "returned int"), (user("x"), "user message")])
async def test_function_model_rejects_bad_replies(reply: object, match: str) -> None:
    with pytest.raises(UserError, match=match):
        await FunctionModel(lambda m, i: reply).generate([user("x")])  # type: ignore[arg-type, return-value]


async def test_stream_yields_deltas_then_the_same_response_as_generate() -> None:
    message = assistant(Reasoning("let me see"), "hello big world", ToolCall("c1", "t", '{"a": 1}'))
    model = FunctionModel(lambda m, i: message)
    events = await _collect(model, [user("x")])
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final == await model.generate([user("x")])
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "hello big world"
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["let me see"]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0].id == "c1"
    assert deltas[0].name == "t"
    assert "".join(d.arguments for d in deltas) == '{"a": 1}'


async def test_a_paced_function_model_streams_text_and_reasoning_a_word_at_a_time() -> None:
    message = assistant(Reasoning("let me see"), "hello big world", ToolCall("c1", "t", '{"a": 1}'))
    seen: list[Sequence[Message]] = []

    def pace(messages: Sequence[Message]) -> float:
        seen.append(messages)
        return 0.0

    model = FunctionModel(lambda m, i: message, delay=pace)
    prompt = [user("x")]
    events = await _collect(model, prompt)
    assert seen == [prompt]
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["let ", "me ", "see"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hello ", "big ", "world"]
    assert [type(e).__name__ for e in events[-3:]] == ["ToolCallDelta", "ToolCallDelta", "ModelResponse"]
    assert events[-1] == await model.generate(prompt)  # pacing changes the stream, not the reply
    # a fixed pace: the same word deltas
    fixed = await _collect(FunctionModel(lambda m, i: message, delay=0), prompt)
    assert [e for e in fixed if isinstance(e, TextDelta | ReasoningDelta)] == [
        e for e in events if isinstance(e, TextDelta | ReasoningDelta)
    ]


async def test_a_stamping_function_model_sends_the_time_of_each_word() -> None:
    model = FunctionModel(lambda m, i: "a b c", delay=0, stamp=True)
    before = time.time_ns()
    events = await _collect(model, [user("x")])
    after = time.time_ns()
    words = [e.text for e in events if isinstance(e, TextDelta)]
    assert [w.endswith(" ") for w in words] == [True, True, False]
    stamps = [int(w.strip().removeprefix("t")) for w in words]
    assert before <= stamps[0] <= stamps[1] <= stamps[2] <= after
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.text == "".join(words)  # the message holds what was sent


@pytest.mark.parametrize("delay", [-1, "fast", True, float("nan")])
def test_a_function_model_refuses_a_bad_delay(delay: object) -> None:
    with pytest.raises(UserError, match="delay must be seconds"):
        FunctionModel(lambda m, i: "x", delay=delay)  # type: ignore[arg-type]


@dataclasses.dataclass
class Inner:
    tag: Literal["x", "y"]
    values: list[int]


class Outer(msgspec.Struct):
    name: str
    inner: Inner
    maybe: int | None = None
    flag: bool = True


@pytest.mark.parametrize("tp", [Outer, Inner, list[Inner], dict[str, float], tuple[int, str]])
def test_schema_example_is_valid_for_the_schema(tp: object) -> None:
    schema = msgspec.json.schema(tp)
    value = schema_example(schema)
    msgspec.convert(value, tp)  # raises when the example does not fit


async def test_test_model_calls_every_tool_then_summarises_results() -> None:
    tools = (
        ToolDefinition("a", parameters=msgspec.json.schema(Inner)),
        ToolDefinition("b"),
        ToolDefinition(
            "final_result", parameters={"type": "object", "properties": {"n": {"type": "integer"}}}
        ),
    )
    model = TestModel()
    first = await model.generate([user("go")], tools=tools)
    assert [c.name for c in first.message.tool_calls] == ["a", "b"]
    assert msgspec.json.decode(first.message.tool_calls[0].arguments) == {"tag": "x", "values": [0]}
    results = tool(*(ToolResult(c.id or "", c.name, "ok") for c in first.message.tool_calls))
    second = await model.generate([user("go"), first.message, results], tools=tools)
    assert second.message.tool_calls[0].name == "final_result"
    assert second.message.tool_calls[0].arguments == '{"n":0}'
    text_only = await model.generate([user("go"), first.message, results], tools=tools[:2])
    assert text_only.message.text == '{"a":"ok","b":"ok"}'
    assert text_only.stop_reason == "stop"


async def test_test_model_options() -> None:
    tools = (ToolDefinition("a"), ToolDefinition("b"))
    model = TestModel(call_tools=["b"], output_text="fixed")
    first = await model.generate([user("go")], tools=tools)
    assert [c.name for c in first.message.tool_calls] == ["b"]
    done = await model.generate([user("go"), first.message, tool(ToolResult("x", "b", "r"))], tools=tools)
    assert done.message.parts == (Text("fixed"),)
    events = await _collect(model, [user("go")], tools=tools)
    assert isinstance(events[-1], ModelResponse)
    assert [c.name for c in events[-1].message.tool_calls] == ["b"]


Small = Annotated[int, msgspec.Meta(ge=-50, le=-10)]
Between = Annotated[int, msgspec.Meta(gt=5, lt=7)]
Even = Annotated[int, msgspec.Meta(ge=11, le=20, multiple_of=4)]
Ratio = Annotated[float, msgspec.Meta(gt=0.5, le=0.75)]
Short = Annotated[str, msgspec.Meta(max_length=0)]
Code = Annotated[str, msgspec.Meta(pattern=r"^[A-Z]{3}-\d{4}$", min_length=8, max_length=8)]
Slug = Annotated[str, msgspec.Meta(pattern=r"^(foo|bar)_[a-z0-9]+(\.[a-z]{2,3})?$")]
Hex = Annotated[str, msgspec.Meta(pattern=r"(?i)^0x[0-9a-f]{2,}$")]
Word = Annotated[str, msgspec.Meta(pattern=r"\bcat\b", min_length=6)]


class Formats(msgspec.Struct):
    when: Annotated[datetime.datetime, msgspec.Meta(tz=True)]
    day: datetime.date
    at: Annotated[datetime.time, msgspec.Meta(tz=True)]
    local: Annotated[datetime.time, msgspec.Meta(tz=False)]
    ident: uuid.UUID
    span: datetime.timedelta
    blob: bytes
    amount: decimal.Decimal
    small: Small
    between: Between
    even: Even
    ratio: Ratio
    short: Short
    code: Code
    slug: Slug
    hex: Hex
    word: Word
    tags: Annotated[list[Small], msgspec.Meta(min_length=2, max_length=3)]
    unique: frozenset[int]


def test_schema_example_honours_formats_bounds_and_patterns() -> None:
    schema = msgspec.json.schema(Formats)
    value = schema_example(schema)
    decoded = msgspec.convert(value, Formats)  # raises when the example does not fit
    assert -50 <= decoded.small <= -10
    assert decoded.between == 6
    assert decoded.even in (12, 16, 20)
    assert 0.5 < decoded.ratio <= 0.75
    assert decoded.short == ""
    assert len(decoded.tags) == 2


class Booking(pydantic.BaseModel):
    when: datetime.datetime
    ident: uuid.UUID
    seats: int = pydantic.Field(ge=100, le=200)
    ref: str = pydantic.Field(pattern=r"^BK[0-9]{6}$", max_length=8)
    note: str = pydantic.Field(max_length=3)


def test_schema_example_fits_pydantic_constraints() -> None:
    schema = Booking.model_json_schema()
    Booking.model_validate(schema_example(schema))


@pytest.mark.parametrize("pattern", [r"^a[^\s\S]b$", r"^(?!x)x$", r"^a$b", r"^[ab]{3}$"])
def test_schema_example_rejects_an_unsatisfiable_pattern(pattern: str) -> None:
    p = {"type": "string", "pattern": pattern, "maxLength": 2}
    schema = {"type": "object", "properties": {"p": p}}
    with pytest.raises(UserError, match="pattern"):
        schema_example(schema)


def test_schema_example_rejects_empty_numeric_ranges() -> None:
    with pytest.raises(UserError, match="no integer"):
        schema_example({"type": "integer", "minimum": 3, "maximum": 2})
    with pytest.raises(UserError, match="no integer"):
        schema_example({"type": "integer", "minimum": 1, "maximum": 3, "multipleOf": 5})


@pytest.mark.parametrize(
    ("pattern", "min_length", "max_length"),
    [
        (r"^\d{3}-\d{2}$", 0, None),
        (r"[A-Z][a-z]+", 5, 9),
        (r"^(a|b)+c?$", 5, None),
        (r"^(\w+)@(\w+)\.com$", 0, None),
        (r"^(ab)\1$", 0, 4),
        (r"^[^0-9]{2,4}$", 3, None),
        (r"^\u00e9x[\x41-\x43]$", 0, None),
        (r"^(?<year>\d{4})-(?:0[1-9]|1[0-2])$", 0, None),
        (r"^[\w.-]+$", 2, 2),
        (r"^\S+\s\S+$", 0, None),
        (r"^[-+]?\d*\.?\d+$", 0, None),
        (r"^(?i:ABC)[]a]$", 0, None),
    ],
)
def test_pattern_example_matches_with_the_length_bounds(
    pattern: str, min_length: int, max_length: int | None
) -> None:
    text = pattern_example(pattern, min_length, max_length)
    assert re.search(pattern.replace("(?<year>", "(?P<year>"), text), text
    assert len(text) >= min_length
    assert max_length is None or len(text) <= max_length


def test_pattern_example_rejects_invalid_regexes() -> None:
    with pytest.raises(UserError, match="not a valid regular expression"):
        pattern_example("^(a$")


_HOSTILE_SCHEMAS = [
    {"type": "string", "minLength": 30_000_000},
    {"type": "string", "minLength": 1e300},
    {"type": "string", "contentEncoding": "base64", "minLength": 100_000_000},
    {"type": "string", "pattern": "^a{30000000}$"},
    {"type": "string", "pattern": "(x{1000}){1000}"},
    {"type": "string", "pattern": "^(ab)+$", "minLength": 60_000},
    {"type": "array", "minItems": 1_000_000_000},
    {"type": "array", "minItems": 300, "items": {"type": "array", "minItems": 300}},
    {"type": "object", "minProperties": 100_000_000},
    {"type": "integer", "minimum": 10**5000},
    {"type": "number", "minimum": float("inf")},
    {"type": "string", "minLength": "5"},
]


@pytest.mark.parametrize("schema", _HOSTILE_SCHEMAS, ids=[str(i) for i in range(len(_HOSTILE_SCHEMAS))])
def test_schema_example_refuses_values_larger_than_its_limit(schema: dict[str, object]) -> None:
    """A client's tool schema can ask for any size (``--model test`` behind ``tether serve``):
    a value over ``EXAMPLE_LIMIT`` is refused with a ``UserError`` naming what asked for it,
    never built (30 MB strings, a billion items)."""
    with pytest.raises(UserError, match="schema_example") as caught:
        schema_example({"type": "object", "properties": {"x": schema}})
    assert len(str(caught.value)) < 400


def test_schema_example_still_makes_values_up_to_the_limit() -> None:
    from tether.models._examples import EXAMPLE_LIMIT

    big = schema_example({"type": "string", "minLength": EXAMPLE_LIMIT})
    assert big == "a" * EXAMPLE_LIMIT
    assert schema_example({"type": "string", "maxLength": 10**9}) == "a"
    assert len(schema_example({"type": "array", "minItems": 1000, "items": {"type": "integer"}})) == 1000
    assert len(pattern_example("^[0-9]+$", 5000)) == 5000


async def test_test_model_refuses_a_hostile_client_schema_instead_of_building_it() -> None:
    from tether.models import ToolDefinition

    hostile = ToolDefinition(
        "pick",
        "a client tool",
        {
            "type": "object",
            "properties": {"c": {"type": "string", "minLength": 30_000_000}},
            "required": ["c"],
        },
    )
    with pytest.raises(UserError, match="minLength 30000000"):
        await TestModel().generate([user("go")], tools=[hostile])
