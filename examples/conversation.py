"""A chat loop whose requests are bounded to the newest 20 messages (``trim_history``).

    python examples/conversation.py

Offline: a scripted model answers (and calls a tool every third turn). At a terminal you type the
turns; otherwise a canned list of 15 turns is used. ``trim_history(20)`` runs once per run on the
supplied history and never splits a tool call from its result; ``result.messages`` is what the run
continued from plus what it added, so the conversation carried between turns stays bounded too.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from tether import Message, ToolCall, assistant
from tether.agent import Agent
from tether.history import trim_history
from tether.models.testing import FunctionInfo, FunctionModel

CANNED = [f"message number {i}" for i in range(1, 16)]


def clock() -> str:
    """The time of day."""
    return "12:00"


class Scripted:
    """Answers each turn; every third turn it first asks for the time."""

    def __init__(self) -> None:
        self.turn = 0
        self.sent: list[int] = []

    def __call__(self, messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        last = messages[-1]
        if last.role == "user":
            self.turn += 1
            self.sent.append(len(messages))
            if self.turn % 3 == 0:
                return assistant(ToolCall(f"clock_{self.turn}", "clock", "{}"))
            return f"noted: {last.text}"
        return f"it is {last.tool_results[0].text}"


def turns() -> Iterator[str]:
    if sys.stdin.isatty():
        while (line := input("you> ").strip()) not in ("", "quit"):
            yield line
    else:
        yield from CANNED


def main() -> None:
    model = Scripted()
    agent = Agent(FunctionModel(model), tools=[clock], history_processor=trim_history(20))
    history: list[Message] = []
    for text in turns():
        result = agent.run_sync(text, history=history)
        history = list(result.messages)
        print(f"turn {model.turn:>2}: sent={model.sent[-1]} carried={len(history)} -> {result.output}")
    print(f"kept {len(history)} messages")


if __name__ == "__main__":
    main()
