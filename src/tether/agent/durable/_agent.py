"""``DurableAgent``: an agent whose runs are DBOS workflows over a conversation store.

A durable run is started under its run id (the workflow id). If its process dies, DBOS hands the
workflow to a live executor (the next start of the same executor on SQLite; another process on
PostgreSQL after ``recover``), which continues the run from the store: the prompt and every
completed step are there (ADR 0015), so a completed model turn is not requested again and a
finished tool is not run again; a started ``idempotent=False`` tool is closed by the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

import msgspec
from dbos import DBOS, SetWorkflowID

from tether.errors import NotFound, RunError, UserError
from tether.messages import Message, new_id
from tether.stores import Store

from .._agent import Agent
from .._output import OUTPUT_TOOL
from ._workflow import durable_run, register, registered

__all__ = ["DurableAgent", "DurableOutcome", "DurableRun", "RunProgress", "RunStatus", "run_progress"]

Output = TypeVar("Output")
RunStatus = Literal["completed", "paused", "failed"]


@dataclass(frozen=True, slots=True)
class DurableOutcome(Generic[Output]):
    """How a durable run ended. ``continued_from``: the stored version the last execution
    continued from (``None``: it ran from the prompt, no crash); ``requests``: model requests of
    the last execution; ``error``: the failure's message when ``status == "failed"``."""

    run_id: str
    conversation_id: str
    status: RunStatus
    output: Output | None
    requests: int
    continued_from: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RunProgress:
    """What a conversation store holds of one run: whether any of its messages is stored
    (``started``), the conversation's ``version``, and the run's last message when that message
    ended the run (``finished``: an answer, an accepted output; ``None`` otherwise)."""

    started: bool
    version: int
    finished: Message | None


def run_progress(messages: Sequence[Message], version: int, run_id: str) -> RunProgress:
    """What the stored ``messages`` (at ``version``) say about ``run_id`` (one pass over them, so a
    run whose conversation another writer appended to since is still recognized)."""
    started = any(m.run_id == run_id for m in messages)
    last = messages[-1] if messages else None
    finished = None
    if started and last is not None and last.run_id == run_id:
        answered = last.role == "assistant" and not last.tool_calls
        accepted = last.role == "tool" and any(
            r.name == OUTPUT_TOOL and not r.failed and not r.synthesized for r in last.tool_results
        )
        finished = last if answered or accepted else None
    return RunProgress(started, version, finished)


class DurableRun(Generic[Output]):
    """A handle on a durable run (started here or on any process sharing the DBOS database)."""

    def __init__(
        self, agent: DurableAgent[Output], run_id: str, conversation_id: str | None, handle: Any = None
    ) -> None:
        self._agent = agent
        self.run_id = run_id
        self.conversation_id = conversation_id
        self._handle = handle
        """The workflow's handle when it runs in this process (awaited directly, not polled)."""

    async def result(self) -> DurableOutcome[Output]:
        """Wait for the run's end (on whichever process runs it) and return its outcome."""
        handle: Any = self._handle or await DBOS.retrieve_workflow_async(self.run_id)
        raw = cast(dict[str, Any], await handle.get_result())
        return self._agent.outcome(raw)


class DurableAgent(Generic[Output]):
    """Run ``agent`` durably. ``name`` identifies the agent in the DBOS database: every process
    that may continue its runs creates a ``DurableAgent`` with the same name before
    ``DBOS.launch()``. ``store`` opens the conversation store (called once per execution, on the
    event loop that runs it; the execution closes it)."""

    def __init__(self, agent: Agent[Any, Output], *, name: str, store: Callable[[], Store]) -> None:
        if not isinstance(name, str) or not name:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError("a durable agent needs a non-empty name")
        if not callable(store):
            raise UserError("store= must be a function that opens the conversation store")
        other = registered(name)
        if other is not None and getattr(other, "agent", None) is not agent:
            raise UserError(f"another durable agent is registered as {name!r} in this process")
        self.agent = agent
        self.name = name
        self._open = store
        register(self)

    async def start(
        self,
        prompt: str | None = None,
        *,
        owner: str,
        conversation_id: str | None = None,
        run_id: str | None = None,
    ) -> DurableRun[Output]:
        """Start a durable run (a DBOS workflow keyed by its run id; starting the same run id
        again attaches to it instead of running it twice)."""
        if not isinstance(owner, str) or not owner:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError("a durable run needs owner= (the authenticated caller or tenant)")
        if prompt is not None and not isinstance(prompt, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"a durable run's prompt is text, not {type(prompt).__name__}")
        cid = conversation_id or new_id()
        rid = run_id or new_id()
        with SetWorkflowID(rid):
            handle = await DBOS.start_workflow_async(durable_run, self.name, owner, cid, rid, prompt)
        return DurableRun(self, rid, cid, handle)

    async def run(
        self,
        prompt: str | None = None,
        *,
        owner: str,
        conversation_id: str | None = None,
        run_id: str | None = None,
    ) -> DurableOutcome[Output]:
        """``start``, then wait for the outcome."""
        run = await self.start(prompt, owner=owner, conversation_id=conversation_id, run_id=run_id)
        return await run.result()

    def attach(self, run_id: str) -> DurableRun[Output]:
        """A handle on a run started before (by this or another process)."""
        return DurableRun(self, run_id, None)

    # -- the workflow's body --------------------------------------------------------------------
    async def execute(
        self, owner: str, conversation_id: str, run_id: str, prompt: str | None
    ) -> dict[str, Any]:
        store = self._open()
        try:
            messages: Sequence[Message] = ()
            try:
                loaded = await store.load(owner, conversation_id)
                messages = loaded.messages
                progress = run_progress(messages, loaded.version, run_id)
            except NotFound:
                progress = RunProgress(False, 0, None)
            base = {"run_id": run_id, "conversation_id": conversation_id}
            continued = progress.version if progress.started else None
            if progress.finished is not None:  # stored to its end; only DBOS had not heard
                output = self._stored_output(progress.finished, messages)
                done = {"status": "completed", "output": output, "requests": 0}
                return {**base, **done, "continued_from": continued}
            try:
                result = await self.agent.run(
                    None if progress.started else prompt,
                    store=store,
                    owner=owner,
                    conversation_id=conversation_id,
                    run_id=run_id,
                )
            except RunError as exc:
                return {
                    **base,
                    "status": "failed",
                    "output": None,
                    "requests": exc.partial.requests if exc.partial is not None else 0,
                    "continued_from": continued,
                    "error": f"{type(exc).__name__}: {exc}",
                }
            return {
                **base,
                "conversation_id": result.conversation_id,
                "status": "paused" if result.deferred is not None else "completed",
                "output": msgspec.to_builtins(result.output) if result.deferred is None else None,
                "requests": result.requests,
                "continued_from": continued,
            }
        finally:
            await store.close()

    def _stored_output(self, last: Message, messages: Sequence[Message]) -> Any:
        spec = self.agent._base.output  # pyright: ignore[reportPrivateUsage]
        if last.role == "assistant":
            return last.text
        turn = next(m for m in reversed(messages) if m.role == "assistant")
        call = next(c for c in turn.tool_calls if c.name == OUTPUT_TOOL)
        return msgspec.to_builtins(spec.parse(call))

    def outcome(self, raw: dict[str, Any]) -> DurableOutcome[Output]:
        spec = self.agent._base.output  # pyright: ignore[reportPrivateUsage]
        output = raw.get("output")
        if output is not None and not spec.is_text:
            output = msgspec.convert(output, spec.type)
        return DurableOutcome(
            raw["run_id"],
            raw["conversation_id"],
            raw["status"],
            output,
            raw["requests"],
            raw["continued_from"],
            raw.get("error"),
        )
