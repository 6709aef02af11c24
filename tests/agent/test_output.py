"""Structured output: the output tool, correction rounds, retries."""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import msgspec
import pydantic
import pytest

from tether import MaxStepsError, OutputValidationError, ToolCall, assistant
from tether.agent import OUTPUT_TOOL, Agent
from tether.history import check_history
from tether.models.testing import TestModel

from .scripts import Script, calls


@dataclasses.dataclass
class Weather:
    city: str
    celsius: float


class WeatherTD(TypedDict):
    city: str
    celsius: float


class WeatherStruct(msgspec.Struct):
    city: str
    celsius: float


class WeatherModel(pydantic.BaseModel):
    city: str
    celsius: float = pydantic.Field(gt=-100)


@pytest.mark.parametrize("output_type", [Weather, WeatherTD, WeatherStruct, WeatherModel])
async def test_structured_output_types(output_type: type) -> None:
    script = Script(calls(("o1", OUTPUT_TOOL, '{"city": "Oslo", "celsius": 3.5}')))
    result = await Agent(script.model, output_type=output_type).run("weather?")
    out = result.output
    if isinstance(out, dict):
        assert out == {"city": "Oslo", "celsius": 3.5}
    else:
        assert isinstance(out, output_type)
        assert (out.city, out.celsius) == ("Oslo", 3.5)
    definition = script.infos[0].tools[-1]
    assert definition.name == OUTPUT_TOOL
    assert sorted(definition.parameters["required"]) == ["celsius", "city"]
    assert result.messages[-1].tool_results[0].text == "final result accepted"
    assert check_history(result.messages) == []


async def test_non_object_output_is_wrapped() -> None:
    script = Script(calls(("o1", OUTPUT_TOOL, '{"response": [1, 2, 3]}')))
    result = await Agent(script.model, output_type=list[int]).run("numbers")
    assert result.output == [1, 2, 3]
    assert script.infos[0].tools[0].parameters["properties"]["response"]["type"] == "array"


async def test_correction_round_sends_feedback_and_keeps_it() -> None:
    script = Script(
        calls(("o1", OUTPUT_TOOL, '{"city": "Oslo", "celsius": -500}')),
        calls(("o2", OUTPUT_TOOL, '{"city": "Oslo", "celsius": 4}')),
    )
    instructions_seen: list[str | None] = []
    agent = Agent(script.model, output_type=WeatherModel, retries=1, instructions="x")
    result = await agent.run("weather?")
    instructions_seen = [i.instructions for i in script.infos]
    assert instructions_seen == ["x", "x"]
    assert result.output == WeatherModel(city="Oslo", celsius=4)
    feedback = result.messages[2].tool_results[0]
    assert feedback.failed
    assert "greater than -100" in feedback.text
    assert script.seen[1][-1].tool_results[0] == feedback


async def test_plain_text_when_structured_output_is_required_gets_a_correction() -> None:
    script = Script("it is cold", calls(("o1", OUTPUT_TOOL, '{"city": "Oslo", "celsius": 1}')))
    result = await Agent(script.model, output_type=Weather).run("weather?")
    assert result.output == Weather("Oslo", 1)
    correction = result.messages[2]
    assert correction.role == "user"
    assert OUTPUT_TOOL in correction.text
    assert correction.run_id == result.run_id


async def test_exhausted_output_retries_raise_with_partial() -> None:
    bad = '{"city": 3}'
    script = Script(calls(("o1", OUTPUT_TOOL, bad)), calls(("o2", OUTPUT_TOOL, bad)))
    with pytest.raises(OutputValidationError) as info:
        await Agent(script.model, output_type=Weather, retries=1).run("weather?")
    assert info.value.stage == "output"
    partial = info.value.partial
    assert partial is not None
    assert partial.messages[-1].tool_calls[0].id == "o2"


async def test_output_and_tools_in_one_batch() -> None:
    def log(msg: str) -> str:
        return "logged"

    script = Script(
        assistant(
            ToolCall("t1", "log", '{"msg": "x"}'), ToolCall("o1", OUTPUT_TOOL, '{"city": "A", "celsius": 1}')
        )
    )
    result = await Agent(script.model, output_type=Weather, tools=[log]).run("go")
    assert result.output == Weather("A", 1)
    assert [r.text for r in result.messages[-1].tool_results] == ["logged", "final result accepted"]


async def test_text_answers_at_step_limit_with_structured_output() -> None:
    script = Script("text 1")
    with pytest.raises(MaxStepsError):
        await Agent(script.model, output_type=Weather, max_steps=1, retries=3).run("go")


async def test_test_model_produces_schema_valid_output() -> None:
    def ping(host: str) -> str:
        return "pong"

    result = await Agent(TestModel(), tools=[ping], output_type=WeatherModel).run("go")
    assert isinstance(result.output, WeatherModel)
    assert result.tool_executions == 1
    fixed = await Agent(TestModel(output_args={"city": "Rome", "celsius": 20}), output_type=Weather).run("go")
    assert fixed.output == Weather("Rome", 20)


async def test_final_output_in_the_last_allowed_step_is_accepted() -> None:
    script = Script(calls(("o1", OUTPUT_TOOL, '{"city": "Oslo", "celsius": 1}')))
    result = await Agent(script.model, output_type=Weather, max_steps=1).run("go")
    assert result.output == Weather("Oslo", 1)
    assert result.requests == 1
    assert check_history(result.messages) == []


async def test_invalid_final_output_in_the_last_allowed_step_hits_the_limit() -> None:
    script = Script(calls(("o1", OUTPUT_TOOL, '{"city": 3}')))
    with pytest.raises(MaxStepsError) as info:
        await Agent(script.model, output_type=Weather, max_steps=1, retries=3).run("go")
    partial = info.value.partial
    assert partial is not None
    assert check_history(partial.messages) == []
