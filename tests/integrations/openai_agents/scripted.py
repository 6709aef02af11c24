"""A scripted OpenAI Agents SDK model (no network) and the model outputs the tests script."""

from __future__ import annotations

from typing import Any

from agents import Agent, Runner, RunResult, Session, Usage, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary


class Scripted(Model):
    """Answers each request with the next scripted output and keeps every input it was given."""

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = list(script)
        self.received: list[Any] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        self.received.append(input)
        if not self.script:
            raise AssertionError("the model was asked more often than scripted")
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        """The next scripted output as one ``response.completed`` event."""
        self.received.append(input)
        if not self.script:
            raise AssertionError("the model was asked more often than scripted")
        response = Response(
            id=f"resp_{len(self.received)}",
            created_at=0,
            model="scripted",
            object="response",
            output=self.script.pop(0),
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=0)


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def message(text: str, item_id: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def reasoning(text: str, item_id: str, encrypted: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id=item_id,
        type="reasoning",
        summary=[Summary(type="summary_text", text=text)],
        encrypted_content=encrypted,
    )


def call(call_id: str, city: str, item_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=item_id,
        type="function_call",
        call_id=call_id,
        name="weather",
        arguments=f'{{"city":"{city}"}}',
        status="completed",
    )


def two_turns() -> list[list[Any]]:
    """Turn 1: reasoning and a tool call, then the answer. Turn 2: a plain answer."""
    return [
        [reasoning("look it up", "rs_1", "ENC-1"), call("call_1", "Paris", "fc_1")],
        [message("It is sunny in Paris.", "msg_1")],
        [message("You are welcome.", "msg_2")],
    ]


def agent(model: Scripted) -> Agent[Any]:
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather])


async def run(session: Session, model: Scripted, prompt: str) -> RunResult:
    return await Runner.run(agent(model), prompt, session=session)
