"""Chained and forked runs, printing their ids (runs offline with a scripted model).

    python examples/run_ids.py

A run mints a fresh ``run_id``; the conversation id is donated by the history it continues, or
given explicitly to fork the conversation into a new one.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether import Message, dumps, new_id
from tether.agent import Agent
from tether.models.testing import FunctionInfo, FunctionModel


def echo(messages: Sequence[Message], info: FunctionInfo) -> str:
    """A scripted model: answers with what it was asked and how much history it saw."""
    return f"you said {messages[-1].text!r} ({len(messages)} messages so far)"


def main() -> None:
    agent = Agent(FunctionModel(echo))
    first = agent.run_sync("hello")
    print(f"first   run {first.run_id}  conversation {first.conversation_id}")
    chained = agent.run_sync("and again", history=first.messages)
    print(f"chained run {chained.run_id}  conversation {chained.conversation_id}")
    forked = agent.run_sync("a new branch", history=first.messages, conversation_id=new_id())
    print(f"forked  run {forked.run_id}  conversation {forked.conversation_id}")
    assert chained.conversation_id == first.conversation_id != forked.conversation_id
    assert len({first.run_id, chained.run_id, forked.run_id}) == 3
    print(chained.output)
    print(dumps(chained.new_messages).decode())


if __name__ == "__main__":
    main()
