"""A run in a process of its own, for the kill tests (``test_crash.py``): it stops at a named point
(prints ``AT <point>`` and waits to be killed with SIGKILL), or continues a stored conversation.

    python crash_child.py STORE CID POINT DIR [start|continue]

``STORE`` is ``sqlite:<file>`` or ``postgres:<schema>`` (the DSN from TETHER_TEST_POSTGRES_DSN).
Every model request appends ``request <messages sent>`` to ``DIR/requests``; every tool run
appends its name to ``DIR/effects`` (written and synced before the tool waits to be killed), so
the test counts what ran, across processes. ``start`` runs the prompt ``"plan the trip"``
streamed; ``continue`` runs the stored conversation without a prompt and prints its output.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from tether import Agent, Message, Tool, ToolCall, assistant
from tether.messages import Usage
from tether.models import ModelResponse, Profile, StreamEvent, TextDelta, ToolCallDelta
from tether.stores import PostgresStore, SQLiteStore, Store

OWNER = "crash"
PROMPT = "plan the trip"


def _note(directory: Path, name: str, line: str) -> None:
    with open(directory / name, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


async def _stop_here(point: str) -> None:
    print(f"AT {point}", flush=True)
    await asyncio.sleep(3600)  # SIGKILL arrives here
    raise SystemExit(f"not killed at {point}")


class Planned:
    """A model whose first turn calls the tools of the plan and whose next turn answers."""

    def __init__(self, point: str, directory: Path, first: bool) -> None:
        self.point = point
        self.directory = directory
        self.first = first  # the process that starts the run (kill points apply there only)

    @property
    def name(self) -> str:
        return "planned"

    @property
    def profile(self) -> Profile:
        return Profile(provider="function", family="planned")

    async def aclose(self) -> None:
        """Nothing to release."""

    def _turn(self, messages: Sequence[Message]) -> Message:
        if not any(m.role == "tool" for m in messages):
            calls = [ToolCall("c-lookup", "lookup", '{"q": "rome"}')]
            if self.point != "tool_lookup":
                calls.insert(0, ToolCall("c-effect", "book", '{"seats": 2}'))
            return assistant("Let me look that up.", *calls)
        results = " / ".join(r.text for m in messages if m.role == "tool" for r in m.tool_results)
        return assistant(f"done: {results}")

    async def _begin(self, messages: Sequence[Message]) -> Message:
        _note(self.directory, "requests", f"request {len(messages)}")
        if self.first and self.point == "before_request":
            await _stop_here(self.point)
        return self._turn(messages)

    def _response(self, message: Message) -> ModelResponse:
        stop = "tool_calls" if message.tool_calls else "stop"
        usage = Usage(input_tokens=1, output_tokens=1)
        return ModelResponse(
            Message("assistant", message.parts, provider="function", model="planned", stop_reason=stop),
            stop,
            usage,
        )

    async def generate(self, messages: Sequence[Message], **_: Any) -> ModelResponse:
        return self._response(await self._begin(messages))

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[StreamEvent]:
        message = await self._begin(messages)
        yield TextDelta(0, "Let me ")
        yield TextDelta(0, "look that up.")
        if self.first and self.point == "mid_stream":
            await _stop_here(self.point)
        for i, call in enumerate(message.tool_calls, start=1):
            yield ToolCallDelta(i, call.id, call.name, call.arguments)
        yield self._response(message)


def _tools(point: str, directory: Path, first: bool) -> list[Tool[Any]]:
    async def book(seats: int) -> str:
        """Book seats (a side effect: never run twice)."""
        _note(directory, "effects", "book")
        if first and point == "tool_effect":
            await _stop_here(point)
        return f"booked {seats}"

    async def lookup(q: str) -> str:
        """Look something up (safe to repeat)."""
        _note(directory, "effects", "lookup")
        if first and point == "tool_lookup":
            await _stop_here(point)
        return f"found {q}"

    return [Tool(book, idempotent=False), Tool(lookup)]


def _store_class(kind: str) -> type[Any]:
    return SQLiteStore if kind == "sqlite" else PostgresStore


def _open(spec: str, point: str, first: bool) -> Store:
    kind, _, where = spec.partition(":")
    base = _store_class(kind)

    class Stopping(base):  # type: ignore[misc, valid-type]
        async def append(self, owner: str, cid: str, messages: Sequence[Message], **kw: Any) -> int:
            turn = any(m.role == "assistant" and m.tool_calls for m in messages)
            if first and turn and point == "during_append":
                task = asyncio.ensure_future(super().append(owner, cid, messages, **kw))
                print(f"AT {point}", flush=True)  # the kill lands while the append is in flight
                await task
                await _stop_here(point)
            version: int = await super().append(owner, cid, messages, **kw)
            if first and turn and point == "after_turn_stored":
                await _stop_here(point)
            answer = any(m.role == "assistant" and not m.tool_calls for m in messages)
            if first and answer and point == "after_answer_stored":
                await _stop_here(point)  # the run is stored to its end; its caller never heard
            return version

    if kind == "sqlite":
        return Stopping(where)
    dsn = os.environ.get("TETHER_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
    return Stopping(dsn, schema=where)


async def main(spec: str, cid: str, point: str, directory: Path, mode: str) -> None:
    first = mode == "start"
    store = _open(spec, point, first)
    agent: Agent[None, str] = Agent(Planned(point, directory, first), tools=_tools(point, directory, first))
    try:
        if first:
            async with agent.run_stream(PROMPT, store=store, owner=OWNER, conversation_id=cid) as stream:
                async for _ in stream:
                    pass
            print("FINISHED", flush=True)
        else:
            result = await agent.run(store=store, owner=OWNER, conversation_id=cid)
            print(f"OUTPUT {result.output}", flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    spec_, cid_, point_, dir_ = sys.argv[1:5]
    mode_ = sys.argv[5] if len(sys.argv) > 5 else "start"
    asyncio.run(main(spec_, cid_, point_, Path(dir_), mode_))
