"""Text from a model that holds UTF-16 surrogate halves: a pair split across two stream deltas (a
provider cutting a chunk inside an emoji; JSON decoding makes each chunk's half a lone one) or a
lone half a model returns. The run accepts a model's message once: pairs are joined into their
character, lone halves become U+FFFD, streamed deltas never carry a lone half and still add up to
the final text; the run completes and its messages are stored."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import Message, Reasoning, Text, ToolCall, assistant, dumps, loads
from tether.agent import (
    Agent,
    Compaction,
    MessageCompleted,
    ReasoningEvent,
    RunCompleted,
    TextEvent,
    ToolCallDeltaEvent,
)
from tether.agent._accept import DeltaText, accept_message, valid_text
from tether.models import (
    ModelResponse,
    ModelSettings,
    Profile,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)
from tether.models.testing import FunctionModel
from tether.stores import Store

from .compaction_data import task_conversation
from .scripts import Script, calls

EMOJI = "\U0001f600"
HIGH, LOW = "\ud83d", "\ude00"  # EMOJI's UTF-16 pair
SURROGATE = re.compile("[\ud800-\udfff]")
Delta = TextDelta | ReasoningDelta | ToolCallDelta


class Chunked:
    """A streaming model that yields the given deltas for each request, then the message a driver
    assembles from them (each part's deltas concatenated, halves and all)."""

    def __init__(self, *turns: Sequence[Delta]) -> None:
        self.turns = list(turns)

    @property
    def name(self) -> str:
        return "chunked"

    @property
    def profile(self) -> Profile:
        return Profile(provider="function", family="chunked")

    def _assemble(self, deltas: Sequence[Delta]) -> ModelResponse:
        parts: dict[int, Any] = {}
        for d in deltas:
            if type(d) is TextDelta:
                parts[d.index] = Text(getattr(parts.get(d.index), "text", "") + d.text)
            elif type(d) is ReasoningDelta:
                parts[d.index] = Reasoning(getattr(parts.get(d.index), "text", "") + d.text)
            elif type(d) is ToolCallDelta:
                call = parts.get(d.index)
                if call is None:
                    parts[d.index] = ToolCall(d.id, d.name or "", d.arguments)
                else:
                    parts[d.index] = ToolCall(call.id, call.name, call.arguments + d.arguments)
        message = Message("assistant", tuple(parts[i] for i in sorted(parts)))
        stop = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message, stop)

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        return self._assemble(self.turns.pop(0))

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        deltas = self.turns.pop(0)
        for d in deltas:
            yield d
        yield self._assemble(deltas)


async def _stream(agent: Agent[Any, Any], prompt: str, **kw: Any) -> tuple[list[Any], Any]:
    events: list[Any] = []
    async with agent.run_stream(prompt, **kw) as stream:
        async for event in stream:
            events.append(event)
    assert type(events[-1]) is RunCompleted
    return events, events[-1].result


def _streamed_texts(events: list[Any]) -> list[str]:
    """Every text an event streamed (text, reasoning, tool-call name, id and arguments)."""
    out: list[str] = []
    for e in events:
        if type(e) is TextEvent or type(e) is ReasoningEvent:
            out.append(e.text)
        elif type(e) is ToolCallDeltaEvent:
            out += [e.arguments, e.name or "", e.id or ""]
    return out


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "tether.agent" and r.levelno >= logging.WARNING
    ]


async def test_an_emoji_split_across_text_deltas_is_streamed_and_stored_whole(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    model = Chunked([TextDelta(0, f"smile {HIGH}"), TextDelta(0, f"{LOW}!")])
    events, result = await _stream(Agent(model), "hi", store=store, owner="alice")
    texts = [e.text for e in events if type(e) is TextEvent]
    assert not any(SURROGATE.search(t) for t in texts)
    assert "".join(texts) == result.output == f"smile {EMOJI}!"
    assert (await store.load("alice", result.conversation_id)).messages == result.messages
    assert _warnings(caplog) == []  # a joined pair is what the model meant: nothing to say


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
async def test_a_lone_surrogate_from_a_scripted_model_becomes_u_fffd_and_is_stored(
    store: Store, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(Script("bad \ud800 text").model)
    if streamed:
        events, result = await _stream(agent, "hi", store=store, owner="alice")
        assert "".join(e.text for e in events if type(e) is TextEvent) == "bad \ufffd text"
        assert not any(SURROGATE.search(t) for t in _streamed_texts(events))
    else:
        result = await agent.run("hi", store=store, owner="alice")
    assert result.output == "bad \ufffd text"
    assert (await store.load("alice", result.conversation_id)).messages == result.messages
    [warning] = _warnings(caplog)
    assert "1 lone UTF-16 surrogate" in warning
    assert "U+FFFD" in warning


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_stream"])
async def test_without_a_store_the_result_and_the_history_it_returns_are_valid_unicode(
    streamed: bool,
) -> None:
    agent = Agent(Chunked([TextDelta(0, f"{LOW}a{HIGH}"), TextDelta(0, f"{LOW}b{HIGH}")]))
    if streamed:
        _, result = await _stream(agent, "hi")
    else:
        result = await agent.run("hi")
    assert result.output == f"\ufffda{EMOJI}b\ufffd"
    assert loads(dumps(result.messages)) == list(result.messages)  # JSON carries every message


async def test_reasoning_and_tool_call_arguments_split_across_deltas_are_joined() -> None:
    seen: list[str] = []

    async def echo(s: str) -> str:
        """Echo ``s``."""
        seen.append(s)
        return s

    turn = [
        ReasoningDelta(0, f"think {HIGH}"),
        ReasoningDelta(0, f"{LOW} hard"),
        ToolCallDelta(1, "c1", "echo", '{"s": "'),
        ToolCallDelta(1, arguments=f"x{HIGH}"),
        ToolCallDelta(1, arguments=f'{LOW}"}}'),
    ]
    model = Chunked(turn, [TextDelta(0, "done")])
    events, result = await _stream(Agent(model, tools=[echo]), "hi")
    assert seen == [f"x{EMOJI}"]
    assert not any(SURROGATE.search(t) for t in _streamed_texts(events))
    message = result.new_messages[1]
    assert message.parts[0] == Reasoning(f"think {EMOJI} hard")
    assert message.parts[1].arguments == f'{{"s": "x{EMOJI}"}}'
    step1 = [e for e in events if getattr(e, "step", None) == 1]
    assert "".join(e.text for e in step1 if type(e) is ReasoningEvent) == f"think {EMOJI} hard"
    assert "".join(e.arguments for e in step1 if type(e) is ToolCallDeltaEvent) == message.parts[1].arguments


async def test_a_high_half_ending_the_stream_is_emitted_as_u_fffd_before_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = Chunked([TextDelta(0, "cut "), TextDelta(0, f"here{HIGH}")])
    events, result = await _stream(Agent(model), "hi")
    kinds = [type(e) for e in events]
    texts = [e.text for e in events if type(e) is TextEvent]
    assert texts == ["cut ", "here", "\ufffd"]
    last_delta = max(i for i, k in enumerate(kinds) if k is TextEvent)
    assert kinds[last_delta + 1] is MessageCompleted
    assert result.output == "cut here\ufffd"
    assert len(_warnings(caplog)) == 1


async def test_lone_surrogates_in_a_tool_calls_name_and_arguments_become_u_fffd(store: Store) -> None:
    seen: list[str] = []

    def echo(s: str) -> str:
        """Echo ``s``."""
        seen.append(s)
        return s

    script = Script(
        assistant(ToolCall("c1", "echo", '{"s": "a\ud800"}'), ToolCall("c2", "e\udc00", "{}")), "done"
    )
    result = await Agent(script.model, tools=[echo]).run("hi", store=store, owner="alice")
    assert seen == ["a\ufffd"]
    calls = result.new_messages[1].tool_calls
    assert [c.name for c in calls] == ["echo", "e\ufffd"]
    assert calls[0].arguments == '{"s": "a\ufffd"}'
    assert result.new_messages[2].tool_results[1].failed  # the unknown tool, now with a name JSON carries
    assert (await store.load("alice", result.conversation_id)).messages == result.messages


async def test_a_tools_output_holding_surrogate_halves_is_stored_as_valid_unicode(store: Store) -> None:
    """A tool that reads bytes with ``surrogateescape``, returns a structure holding a lone half,
    or fails quoting one: the results carry U+FFFD (or the joined pair) and the run is stored."""

    def read(name: str) -> str:
        """Read a file."""
        return b"caf\xe9 ok".decode("utf-8", "surrogateescape")

    def stat(name: str) -> dict[str, str]:
        """Stat a file."""
        return {"name\udc80": f"x{HIGH}{LOW}"}

    def broken(name: str) -> str:
        """Fail."""
        raise ValueError("cannot open \udcff")

    script = Script(
        calls(*((f"c{i}", tool, '{"name": "a"}') for i, tool in enumerate(["read", "stat", "broken"], 1))),
        "done",
    )
    result = await Agent(script.model, tools=[read, stat, broken]).run("hi", store=store, owner="alice")
    texts = [r.content[0].text for r in result.new_messages[2].tool_results]  # type: ignore[union-attr]
    assert texts[0] == "caf\ufffd ok"
    assert texts[1] == '{"name\ufffd":"x' + EMOJI + '"}'
    assert "cannot open \ufffd" in texts[2]
    assert result.new_messages[2].tool_results[2].failed
    assert not any(SURROGATE.search(t) for t in texts)
    assert (await store.load("alice", result.conversation_id)).messages == result.messages


def test_text_without_surrogate_halves_is_accepted_as_the_same_objects() -> None:
    message = assistant(Reasoning("héllo"), f"naïve {EMOJI}", ToolCall("c1", "é", '{"a": "ü"}'))
    assert accept_message(message) == (message, 0)
    assert accept_message(message)[0] is message
    text = f"ascii and {EMOJI}"
    assert valid_text(text) is text


pieces = st.lists(
    st.text(st.characters() | st.sampled_from([HIGH, LOW, EMOJI, "\udbff", "\udc00"]), max_size=6),
    max_size=8,
)


@given(pieces)
def test_deltas_never_carry_a_lone_half_and_add_up_to_the_accepted_text(deltas: list[str]) -> None:
    valid = DeltaText()
    out = [valid.text(0, d) for d in deltas]
    out += [e.text for e in valid.flush("r", "c", 1)]
    assert not any(SURROGATE.search(t) for t in out)
    assert "".join(out) == valid_text("".join(deltas))
    if not SURROGATE.search("".join(deltas)):
        assert all(a is b for a, b in zip(out, deltas, strict=True))  # untouched, not copied


async def test_a_summary_holding_surrogate_halves_is_kept_as_valid_unicode(store: Store) -> None:
    history, _ = task_conversation(301)
    await store.create("alice", "long")
    await store.append("alice", "long", history, expected_version=0)
    summarizer = FunctionModel(lambda messages, info: f"sum {HIGH}{LOW} \ud800", name="summarizer")
    seen: list[list[Message]] = []
    model = FunctionModel(lambda messages, info: seen.append(list(messages)) or "ok")
    compaction = Compaction(summarizer=summarizer, window=20_000, strategies=("summarize",))
    result = await Agent(model, compaction=compaction).run(
        "next", store=store, owner="alice", conversation_id="long"
    )
    assert result.output == "ok"
    assert result.compactions[0].error is None
    [record] = await store.records("alice", "long")
    assert record.summary == f"sum {EMOJI} \ufffd"
    assert record.summary in seen[-1][0].text  # the model got the summary it was given
