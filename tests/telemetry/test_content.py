"""Message content only with the opt-in, in the conventions' structured form, bounded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from tether import (
    Image,
    Message,
    ModelHTTPError,
    OutputValidationError,
    ToolCall,
    ToolError,
    UserError,
    assistant,
    user,
)
from tether.agent import Agent, Compaction, Tool
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


# -- failures carry no content without the opt-in -----------------------------------------------------------
SECRET = "p" + "lum-orchard-4471"  # built at run time: a traceback's source lines never show it


def _failing_script() -> FunctionModel:
    """Each prompt fails its run a different way, every failure quoting the conversation."""

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        last = messages[-1]
        if last.role != "user":
            return "done"
        said = last.text
        if "EXPLODE" in said:
            return assistant(ToolCall("k1", "explode", json.dumps({"path": f"/srv/{SECRET}/args"})))
        if "COUNT" in said:
            return assistant(ToolCall("o1", "final_result", json.dumps({"count": f"{SECRET}-output"})))
        raise ModelHTTPError(f"invalid request: {said!r}", status=400, provider="openai", body=said)

    return FunctionModel(reply, name="scripted")


def explode(path: str) -> str:
    raise FileNotFoundError(f"no such file: {path}")


class Counted(BaseModel):
    count: int


def _summarizer() -> FunctionModel:
    def echo(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise ValueError(f"cannot summarize {messages[-1].text[:300]}")

    return FunctionModel(echo, name="summarizer")


async def _fail_every_way(telemetry: Telemetry) -> None:
    tools = Agent(_failing_script(), tools=[Tool(explode, propagate=True)], telemetry=telemetry)
    with pytest.raises(ToolError):
        await tools.run(f"EXPLODE on {SECRET}")
    output = Agent(_failing_script(), output_type=Counted, retries=0, telemetry=telemetry)
    with pytest.raises(OutputValidationError):
        await output.run(f"COUNT {SECRET}")
    model = Agent(
        _failing_script(),
        telemetry=telemetry,
        compaction=Compaction(summarizer=_summarizer(), window=300, keep_last=1, strategies=("summarize",)),
    )
    with pytest.raises(ModelHTTPError):
        await model.run(
            f"now {SECRET}", history=[user(f"earlier {SECRET} " + "words " * 200), assistant("ok")]
        )


def _exported(otel: Otel) -> str:
    return "\n".join(s.to_json() for s in otel.spans())


async def test_without_opt_in_failures_record_their_kind_not_the_content_they_quote(otel: Otel) -> None:
    """A propagating tool's error (what its result would have said), a validation error quoting
    the model's output, a provider echoing the request, a summarizer failure: the spans say which
    failure and where, never the words of the conversation."""
    await _fail_every_way(otel.telemetry())
    exported = _exported(otel)
    assert SECRET not in exported
    runs = otel.named("invoke_agent")
    assert [s.status.description for s in runs] == [
        "ToolError (stage tools)",
        "OutputValidationError (stage output)",
        "ModelHTTPError: openai HTTP 400 (stage model)",
    ]
    tool_span = otel.named("execute_tool explode")[0]
    event = next(e for e in tool_span.events if e.name == "exception")
    assert event.attributes is not None
    assert event.attributes["exception.message"] == "FileNotFoundError"
    assert "in explode" in str(event.attributes["exception.stacktrace"])  # the frames stay
    compactions = [e for s in runs for e in s.events if e.name == "tether.history.compact"]
    assert compactions
    assert compactions[0].attributes is not None
    assert compactions[0].attributes["tether.compaction.error"] == "the summarizer failed: ValueError"


async def test_with_opt_in_failures_keep_their_messages(otel: Otel) -> None:
    await _fail_every_way(otel.telemetry(capture_content=True))
    exported = _exported(otel)
    for said in (f"/srv/{SECRET}/args", f"{SECRET}-output", f"now {SECRET}"):
        assert said in exported
