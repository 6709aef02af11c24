"""Peer formats against the real libraries: what they produce imports; what tether exports loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
from agents import Agent, Model, Runner, SQLiteSession, function_tool
from agents import ModelResponse as AgentsResponse
from agents import Usage as AgentsUsage
from hypothesis import given, settings
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from pydantic_ai import Agent as PaiAgent
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tether import Document, Image, Message, Reasoning, Text, ToolCall, ToolResult, Usage, convert

from .strategies import LANGCHAIN, PYDANTIC_AI, conversations

# -- pydantic-ai -------------------------------------------------------------------------------


def _pai_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ThinkingPart("need the weather", signature="sig-1", provider_name="anthropic"),
                TextPart("Let me check."),
                ToolCallPart("weather", {"city": "Paris"}, tool_call_id="call_1"),
            ],
            model_name="fn-model",
        )
    return ModelResponse(parts=[TextPart("Sunny in Paris.")], model_name="fn-model")


async def test_pydantic_ai_run_history_imports() -> None:
    agent = PaiAgent(FunctionModel(_pai_model), system_prompt="Be brief.")

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    result = await agent.run(["Weather in Paris?", BinaryContent(b"\x89PNG", media_type="image/png")])
    messages, report = convert.from_pydantic_ai(result.all_messages_json())
    assert report.lossless, report.losses
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[0].parts == (Text("Be brief."),)
    assert messages[1].parts == (Text("Weather in Paris?"), Image(data=b"\x89PNG", media_type="image/png"))
    assert messages[2].parts == (
        Reasoning("need the weather", signature="sig-1", provider="anthropic"),
        Text("Let me check."),
        ToolCall("call_1", "weather", '{"city":"Paris"}'),
    )
    assert messages[2].model == "function:_pai_model:"  # pydantic-ai stamps the model it ran
    assert messages[2].usage is not None
    assert messages[3].parts == (ToolResult("call_1", "weather", "sunny in Paris"),)
    assert messages[4].text == "Sunny in Paris."
    assert messages[4].stop_reason is None or messages[4].stop_reason == "stop"


def _history() -> list[Message]:
    return [
        Message("system", (Text("Be brief."),)),
        Message("user", (Text("hi"), Image(url="https://example.com/cat.png"))),
        Message(
            "assistant",
            (
                Reasoning("hmm", signature="sig", provider="openai", provider_id="rs_1"),
                Text("calling", provider_id="msg_1"),
                ToolCall("c1", "lookup", '{"q": "cats"}', provider_id="fc_1"),
                ToolCall("c2", "broken", '{"q": '),
            ),
            provider="openai",
            model="gpt-5",
            stop_reason="tool_calls",
            usage=Usage(10, 5, 2, 0, 3),
            response_id="resp_1",
            run_id="run_1",
        ),
        Message(
            "tool",
            (ToolResult("c1", "lookup", "many cats"), ToolResult("c2", "broken", "bad args", failed=True)),
            run_id="run_1",
        ),
        Message("assistant", (Text("Cats."),), stop_reason="stop", run_id="run_1"),
    ]


def test_tether_export_loads_in_pydantic_ai() -> None:
    data, report = convert.to_pydantic_ai(_history())
    assert report.lossless, report.losses
    loaded = ModelMessagesTypeAdapter.validate_json(json.dumps(data))
    assert [type(m).__name__ for m in loaded] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    response = loaded[1]
    assert isinstance(response, ModelResponse)
    thinking, text, call, broken = response.parts
    assert isinstance(thinking, ThinkingPart)
    assert (thinking.signature, thinking.id, thinking.provider_name) == ("sig", "rs_1", "openai")
    assert isinstance(text, TextPart)
    assert text.id == "msg_1"
    assert isinstance(call, ToolCallPart)
    assert call.args_as_dict() == {"q": "cats"}
    assert isinstance(broken, ToolCallPart)
    assert broken.args == '{"q": '
    assert response.finish_reason == "tool_call"
    assert response.usage.input_tokens == 10
    request = loaded[2]
    assert isinstance(request, ModelRequest)
    returns = [p for p in request.parts if isinstance(p, ToolReturnPart)]
    assert [(p.tool_call_id, p.outcome) for p in returns] == [("c1", "success"), ("c2", "failed")]
    first = loaded[0]
    assert isinstance(first, ModelRequest)
    prompt = first.parts[1]
    assert isinstance(prompt, UserPromptPart)
    assert isinstance(prompt.content[1], ImageUrl)
    # and back through pydantic-ai's own serializer
    again, report = convert.from_pydantic_ai(ModelMessagesTypeAdapter.dump_json(loaded))
    assert report.lossless, report.losses
    expected = _history()
    expected[1] = Message(
        "user", (Text("hi"), Image(url="https://example.com/cat.png", media_type="image/png"))
    )
    expected[4] = msgspec.structs.replace(expected[4], usage=Usage())  # pydantic-ai always has usage
    assert again == expected


async def test_pydantic_ai_agent_runs_on_an_exported_history() -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("ok")])

    data, _ = convert.to_pydantic_ai(_history())
    history = ModelMessagesTypeAdapter.validate_python(data)
    result = await PaiAgent(FunctionModel(model)).run("more?", message_history=history)
    assert result.output == "ok"
    assert len(seen[0]) == len(history) + 1


def _normalize_pai(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for m in messages:
        # pydantic-ai infers the media type of a URL from its extension
        parts = tuple(
            Image(url=p.url, media_type=p.media_type or "image/png")
            if type(p) is Image and p.url
            else Document(url=p.url, media_type=p.media_type or "application/pdf")
            if type(p) is Document and p.url
            else p
            for p in m.parts
        )
        usage = m.usage if m.role != "assistant" or m.usage is not None else Usage()
        out.append(msgspec.structs.replace(m, parts=parts, usage=usage))
    return out


@settings(max_examples=50)
@given(conversations(PYDANTIC_AI))
def test_pydantic_ai_library_round_trip(history: list[Message]) -> None:
    data, report = convert.to_pydantic_ai(history)
    assert report.lossless
    dumped = ModelMessagesTypeAdapter.dump_json(ModelMessagesTypeAdapter.validate_python(data))
    back, report = convert.from_pydantic_ai(dumped)
    assert report.lossless, report.losses
    assert back == _normalize_pai(history)


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


class Scripted(Model):
    """An Agents SDK model that answers from a script and keeps the input it was given."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = script
        self.received: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.received.append(input)
        return AgentsResponse(
            output=self.script[len(self.received) - 1], usage=AgentsUsage(), response_id=None
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def _run(session: SQLiteSession, model: Scripted, prompt: str) -> Any:
    return await Runner.run(Agent(name="calc", model=model, tools=[add]), prompt, session=session)


def _first_turn() -> list[list[Any]]:
    return [
        [
            ResponseReasoningItem(
                id="rs_1",
                type="reasoning",
                summary=[Summary(text="add them", type="summary_text")],
                encrypted_content="ENC",
            ),
            ResponseFunctionToolCall(
                id="fc_1",
                call_id="call_1",
                name="add",
                arguments='{"a":1,"b":2}',
                type="function_call",
                status="completed",
            ),
        ],
        [
            ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(text="3", type="output_text", annotations=[])],
            )
        ],
    ]


async def test_agents_session_items_import(tmp_path: Path) -> None:
    session = SQLiteSession("conversation", str(tmp_path / "agents.db"))
    await _run(session, Scripted(_first_turn()), "what is 1+2?")
    items = await session.get_items()
    messages, report = convert.from_openai_agents(items)
    assert report.lossless, report.losses
    assert messages == [
        Message("user", (Text("what is 1+2?"),)),
        Message(
            "assistant",
            (
                Reasoning("add them", signature="ENC", provider="openai", provider_id="rs_1"),
                ToolCall("call_1", "add", '{"a":1,"b":2}', provider_id="fc_1"),
            ),
        ),
        Message("tool", (ToolResult("call_1", "add", "3"),)),
        Message("assistant", (Text("3", provider_id="msg_1"),)),
    ]


async def test_agents_runner_continues_an_exported_history(tmp_path: Path) -> None:
    first = SQLiteSession("first", str(tmp_path / "agents.db"))
    await _run(first, Scripted(_first_turn()), "what is 1+2?")
    messages, _ = convert.from_openai_agents(await first.get_items())
    items, report = convert.to_openai_agents(messages)
    assert report.lossless
    second = SQLiteSession("second", str(tmp_path / "agents.db"))
    await second.add_items(items)
    assert await second.get_items() == items  # stored as-is by the SDK
    model = Scripted(
        [
            [
                ResponseOutputMessage(
                    id="msg_2",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(text="4", type="output_text", annotations=[])],
                )
            ]
        ]
    )
    result = await _run(second, model, "and 2+2?")
    assert result.final_output == "4"
    sent = model.received[0]
    assert sent[: len(items)] == items
    assert sent[-1] == {"content": "and 2+2?", "role": "user"}
    assert convert.from_openai_agents(await second.get_items())[0][:4] == messages


# -- LangChain -----------------------------------------------------------------------------------


def test_langchain_messages_import() -> None:
    produced = messages_to_dict(
        [
            SystemMessage("Be brief."),
            HumanMessage(
                content=[
                    {"type": "text", "text": "what is this?"},
                    {"type": "image", "url": "https://example.com/a.png"},
                ]
            ),
            AIMessage(
                content=[
                    {"type": "thinking", "thinking": "an image", "signature": "sig"},
                    {"type": "text", "text": "Looking."},
                ],
                tool_calls=[{"name": "describe", "args": {"detail": 2}, "id": "toolu_1"}],
                response_metadata={"model_name": "claude-x", "finish_reason": "tool_use"},
                usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
                id="resp_1",
            ),
            ToolMessage("a cat", tool_call_id="toolu_1", name="describe"),
            ToolMessage("too blurry", tool_call_id="toolu_2", name="zoom", status="error"),
            AIMessage("A cat."),
        ]
    )
    messages, report = convert.from_langchain(produced)
    assert report.lossless, report.losses
    assert messages == [
        Message("system", (Text("Be brief."),)),
        Message("user", (Text("what is this?"), Image(url="https://example.com/a.png"))),
        Message(
            "assistant",
            (
                Reasoning("an image", signature="sig", provider="anthropic"),
                Text("Looking."),
                ToolCall("toolu_1", "describe", '{"detail":2}'),
            ),
            model="claude-x",
            stop_reason="tool_use",
            usage=Usage(3, 4),
            response_id="resp_1",
        ),
        Message(
            "tool",
            (
                ToolResult("toolu_1", "describe", "a cat"),
                ToolResult("toolu_2", "zoom", "too blurry", failed=True),
            ),
        ),
        Message("assistant", (Text("A cat."),)),
    ]


def test_tether_export_loads_in_langchain() -> None:
    history = _history()
    data, report = convert.to_langchain(history)
    assert [(loss.message, loss.part, loss.what) for loss in report.losses] == [
        (2, 2, "tool call provider id"),
        (2, 2, "tool call arguments"),  # '{"q": "cats"}' reads back as '{"q":"cats"}'
    ]
    loaded = messages_from_dict(data)
    assert [type(m).__name__ for m in loaded] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
    ]
    ai = loaded[2]
    assert isinstance(ai, AIMessage)
    assert ai.tool_calls == [{"name": "lookup", "args": {"q": "cats"}, "id": "c1", "type": "tool_call"}]
    assert [c["args"] for c in ai.invalid_tool_calls] == ['{"q": ']
    assert ai.usage_metadata is not None
    assert ai.usage_metadata["output_token_details"] == {"reasoning": 3}
    failed = loaded[4]
    assert isinstance(failed, ToolMessage)
    assert failed.status == "error"


@given(conversations(LANGCHAIN))
def test_langchain_library_round_trip(history: list[Message]) -> None:
    data, report = convert.to_langchain(history)
    assert report.lossless, report.losses
    back, report = convert.from_langchain(messages_to_dict(messages_from_dict(data)))
    assert report.lossless, report.losses
    assert back == history
