"""``tether demo``: an offline chain of runs (no model download), printed as tether JSON.

A scripted ``FunctionModel`` turns arithmetic questions into calculator calls and reports the
result. Three runs go through a store: a first question, a follow-up that continues the same
conversation, and a third run on a fork of the first turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from tether.agent import Agent
from tether.agent.demo_tools import calculator, current_time
from tether.cli._common import json_option, print_json, write_output
from tether.cli._render import preview
from tether.cli._store import DEFAULT_OWNER, open_store
from tether.messages import Message, ToolCall, assistant, dumps
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import MemoryStore, Store

__all__ = ["demo", "run_demo", "scripted_reply"]

_WORDS = {"times": "*", "plus": "+", "minus": "-", "divided by": "/", "over": "/"}
_ARITHMETIC = re.compile(r"[\d.][\d.\s+\-*/()]*[\d)]|\d")
PROMPTS = ("What is 21 times 2?", "And that plus 100?", "Instead, what is that divided by 4?")


def scripted_reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
    """The demo model: a question with arithmetic becomes a calculator call (``that`` is the last
    calculator result); a tool result becomes the answer."""
    last = messages[-1]
    if last.role == "tool":
        result = last.tool_results[0]
        return f"The calculator says {result.text}." if not result.failed else f"That failed: {result.text}"
    previous = next((r.text for m in reversed(messages) for r in m.tool_results if not r.failed), "0")
    question = last.text.lower().replace("that", previous)
    for word, symbol in _WORDS.items():
        question = question.replace(word, symbol)
    found = _ARITHMETIC.search(question)
    if found is None or not any(t.name == "calculator" for t in info.tools):
        return "This demo only does arithmetic."
    arguments = msgspec.json.encode({"expression": found.group(0).strip()}).decode()
    return assistant(ToolCall(None, "calculator", arguments))


async def run_demo(
    store: Store, owner: str = DEFAULT_OWNER
) -> tuple[list[dict[str, Any]], dict[str, list[Message]]]:
    """Run the three demo runs through ``store``; return a line per run and each conversation."""
    agent = Agent(
        FunctionModel(scripted_reply, name="demo-script"),
        instructions="Use the calculator for arithmetic.",
        tools=[calculator, current_time],
    )
    runs: list[dict[str, Any]] = []
    first = await agent.run(PROMPTS[0], store=store, owner=owner)
    second = await agent.run(PROMPTS[1], store=store, owner=owner, conversation_id=first.conversation_id)
    after_first_turn = len(first.messages)
    fork_id = await store.fork(owner, first.conversation_id, after_first_turn)
    third = await agent.run(PROMPTS[2], store=store, owner=owner, conversation_id=fork_id)
    for prompt, result, note in (
        (PROMPTS[0], first, "new conversation"),
        (PROMPTS[1], second, "continues it"),
        (PROMPTS[2], third, f"forked after message {after_first_turn}"),
    ):
        runs.append(
            {
                "prompt": prompt,
                "output": result.output,
                "run_id": result.run_id,
                "conversation_id": result.conversation_id,
                "new_messages": len(result.new_messages),
                "note": note,
            }
        )
    conversations: dict[str, list[Message]] = {}
    for cid in (first.conversation_id, fork_id):
        conversations[cid] = list((await store.load(owner, cid)).messages)
    return runs, conversations


def demo(
    db: Annotated[
        Path | None,
        typer.Option(
            "--db", help="Also store the demo conversations in this SQLite file.", show_default=False
        ),
    ] = None,
    as_json: Annotated[bool, json_option("Print {runs, conversations} as one JSON object instead.")] = False,
) -> None:
    """Run an offline chain of agent runs (scripted model, calculator tool) and print the conversation."""

    async def run() -> tuple[list[dict[str, Any]], dict[str, list[Message]]]:
        async with contextlib.AsyncExitStack() as stack:
            store: Store = (
                await stack.enter_async_context(open_store(db)) if db is not None else MemoryStore()
            )
            return await run_demo(store)

    runs, conversations = asyncio.run(run())
    if as_json:
        print_json(
            {
                "runs": runs,
                "conversations": {cid: msgspec.json.decode(dumps(m)) for cid, m in conversations.items()},
            }
        )
        return
    for number, line in enumerate(runs, 1):
        typer.echo(
            f"run {number}  {line['run_id']}  conversation {line['conversation_id']} ({line['note']}): "
            f"{line['prompt']} → {preview(str(line['output']), 60)}",
            err=True,
        )
    first = runs[0]["conversation_id"]
    write_output("-", msgspec.json.format(dumps(conversations[first]), indent=2))
