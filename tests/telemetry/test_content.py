"""Message content only with the opt-in, in the conventions' structured form, bounded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from tether import Image, Message, ToolCall, UserError, assistant, user
from tether.agent import Agent
from tether.models.testing import FunctionInfo, FunctionModel
from tether.telemetry import CAPTURE_ENV, Telemetry

from .conftest import Otel


def scripted() -> FunctionModel:
    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        if messages[-1].role == "user":
            return assistant(ToolCall("k1", "shout", '{"text": "quiet words"}'))
        return "QUIET WORDS, said loudly"

    return FunctionModel(reply, name="scripted")


async def shout(text: str) -> str:
    return text.upper()


def attrs(otel: Otel, prefix: str) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in otel.named(prefix)]


async def test_opt_in_records_structured_messages_instructions_and_tool_io(otel: Otel) -> None:
    agent = Agent(
        scripted(), instructions="Be loud.", tools=[shout], telemetry=otel.telemetry(capture_content=True)
    )
    picture = Image(data=b"\x89PNG" + b"0" * 100, media_type="image/png")
    await agent.run(["say it", picture])
    first, second = attrs(otel, "chat ")
    assert json.loads(first["gen_ai.input.messages"]) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "say it"},
                {"type": "blob", "modality": "image", "mime_type": "image/png", "size": 104},
            ],
        }
    ]
    assert json.loads(first["gen_ai.system_instructions"]) == [{"type": "text", "content": "Be loud."}]
    assert json.loads(first["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "k1", "name": "shout", "arguments": {"text": "quiet words"}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert json.loads(second["gen_ai.input.messages"])[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "k1", "response": "QUIET WORDS"}],
    }
    (tool,) = attrs(otel, "execute_tool ")
    assert tool["gen_ai.tool.call.arguments"] == '{"text": "quiet words"}'
    assert tool["gen_ai.tool.call.result"] == "QUIET WORDS"


async def test_recorded_content_is_bounded_and_says_what_it_left_out(otel: Otel) -> None:
    history = [user("old " * 200), assistant("older reply " * 100), user("recent")]
    agent = Agent(
        scripted(), tools=[shout], telemetry=otel.telemetry(capture_content=True, max_content_chars=400)
    )
    await agent.run(history=history)
    first = attrs(otel, "chat ")[0]
    assert len(first["gen_ai.input.messages"]) < 800
    sent = json.loads(first["gen_ai.input.messages"])
    assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": "recent"}]}
    cut = sent[0]["parts"][0]["content"]
    assert "more chars]" in cut
    assert first.get("tether.content.omitted_messages", 0) + len(sent) == 3


async def test_the_environment_variable_opts_in_and_nothing_else_does(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "false")
    await Agent(scripted(), tools=[shout], telemetry=otel.telemetry()).run("x")
    assert not any("gen_ai.input.messages" in a for a in attrs(otel, "chat "))
    otel.exporter.clear()
    monkeypatch.setenv(CAPTURE_ENV, "true")
    await Agent(scripted(), tools=[shout], telemetry=otel.telemetry()).run("x")
    assert all("gen_ai.input.messages" in a for a in attrs(otel, "chat "))
    otel.exporter.clear()
    await Agent(scripted(), tools=[shout], telemetry=otel.telemetry(capture_content=False)).run("x")
    assert not any("gen_ai.input.messages" in a for a in attrs(otel, "chat "))


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(UserError, match="max_content_chars"):
        Telemetry(max_content_chars=10)
    with pytest.raises(UserError, match="capture_content"):
        Telemetry(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="telemetry must be"):
        Agent(scripted(), telemetry=object())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="name must be"):
        Agent(scripted(), name="")
