"""Properties over random scripted runs: whatever the model does, the conversation stays paired,
new messages carry the run's ids, received history never does, and failures are resumable."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from tether import Message, RunError, ToolCall, assistant, user
from tether.agent import Agent, Tool, ToolCanceled
from tether.history import check_history
from tether.models.testing import FunctionInfo, FunctionModel


def ok(n: int) -> int:
    return n


def broken(n: int) -> int:
    raise ValueError(f"bad {n}")


def stopper(n: int) -> int:
    raise ToolCanceled("stop")


def fatal(n: int) -> int:
    raise RuntimeError("fatal")


TOOLS = [ok, broken, Tool(stopper, in_thread=False), Tool(fatal, propagate=True, in_thread=False)]
NAMES = ["ok", "broken", "stopper", "fatal", "missing"]
ARGS = ['{"n": 1}', '{"n": "x"}', '{"n": 1', "{}"]

call_st = st.tuples(st.sampled_from(NAMES), st.sampled_from(ARGS))
turn_st = st.one_of(st.just("text"), st.lists(call_st, min_size=1, max_size=3))
history_st = st.lists(st.sampled_from(["q", "a"]), max_size=4)


@given(turns=st.lists(turn_st, min_size=1, max_size=6), hist=history_st, max_steps=st.integers(1, 6))
def test_random_runs_keep_the_invariants(
    turns: list[str | list[tuple[str, str]]], hist: list[str], max_steps: int
) -> None:
    history = [user(t) if t == "q" else assistant(t) for t in hist]
    script = list(turns)
    counter = [0]

    def fn(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        assert check_history(messages) == []  # every request is well paired
        step = script.pop(0) if script else "text"
        if step == "text":
            return "answer"
        counter[0] += 1
        return assistant(*(ToolCall(f"c{counter[0]}_{i}", n, a) for i, (n, a) in enumerate(step)))

    agent = Agent(FunctionModel(fn), tools=TOOLS, max_steps=max_steps, retries=2)
    try:
        result = asyncio.run(agent.run("go", history=history))
    except RunError as err:
        partial = err.partial
        assert partial is not None  # the prompt is in, and every failure here follows a model turn
        messages, new, run_id, conv = (
            partial.messages,
            partial.new_messages,
            partial.run_id,
            partial.conversation_id,
        )
        resumed = asyncio.run(Agent(FunctionModel(lambda m, i: "resumed")).run("continue", history=messages))
        assert check_history(resumed.messages) == []
        assert resumed.conversation_id == conv
    else:
        assert result.output == "answer"
        messages, new, run_id, conv = (
            result.messages,
            result.new_messages,
            result.run_id,
            result.conversation_id,
        )
        assert check_history(messages) == []
    assert messages[: len(history)] == tuple(history)
    assert messages[len(messages) - len(new) :] == new
    assert all(m.run_id == run_id and m.conversation_id == conv for m in new)
    assert all(m.run_id is None for m in messages[: len(history)])
