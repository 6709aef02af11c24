"""One streamed chat turn: print the agent's events as they come, and on Ctrl-C (the task is
cancelled) work out the partial turn that must be stored."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from tether.agent import (
    Agent,
    MessageCompleted,
    ReasoningEvent,
    TextEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.cli._render import preview
from tether.errors import RunCanceled, RunError
from tether.messages import Message, ToolCall, ToolResult, assistant, new_id, user

__all__ = ["StreamPrinter", "TurnOutcome", "run_turn"]

CANCELED = "canceled"
"""``stop_reason`` of the assistant message that keeps the text streamed before Ctrl-C."""


class StreamPrinter:
    """Prints a streamed reply: text as it arrives, tool calls and results on their own lines,
    reasoning collapsed to one line per step, a spinner while waiting for the model or a tool."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None
        self._mid_line = False
        self._reasoning_steps: set[int] = set()
        self._started: set[str | None] = set()

    def wait(self, text: str = "thinking…") -> None:
        """Show a spinner until the next output."""
        self._stop()
        if self.console.is_terminal:
            self._status = self.console.status(text, spinner="dots")
            self._status.start()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _newline(self) -> None:
        if self._mid_line:
            self.console.file.write("\n")
            self.console.file.flush()
            self._mid_line = False

    def text(self, text: str) -> None:
        self._stop()
        if not self._mid_line:
            self.console.print("[bold green]assistant>[/] ", end="")
        self.console.file.write(text)
        self.console.file.flush()
        if text:
            self._mid_line = not text.endswith("\n")

    def reasoning(self, step: int) -> None:
        if step in self._reasoning_steps:
            return
        self._reasoning_steps.add(step)
        self._stop()
        self._newline()
        self.console.print("[dim italic]▸ reasoning… (collapsed; tether logs show --reasoning shows it)[/]")
        self.wait()

    def tool_started(self, call: ToolCall) -> None:
        self._stop()
        self._newline()
        self._started.add(call.id)
        self.console.print(f"[magenta]→ {escape(call.name)}[/]({escape(preview(call.arguments, 80))})")
        self.wait(f"running {call.name}…")

    def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        if call.id not in self._started:  # answered without running (invalid arguments, denied)
            self.tool_started(call)
        self._stop()
        name, text, failed = result.name, result.text, result.failed
        style = "red" if failed else "magenta"
        self.console.print(f"[{style}]← {escape(name)}[/] {escape(preview(text, 100))}")
        self.wait()

    def done(self) -> None:
        self._stop()
        self._newline()


@dataclass(slots=True)
class TurnOutcome:
    """What one turn produced: the messages to store, its run id, and how it ended."""

    run_id: str
    new_messages: list[Message] = field(default_factory=lambda: [])
    canceled: bool = False
    error: str | None = None
    output: str | None = None


def _partial_turn(
    prompt: str,
    run_id: str,
    conversation_id: str,
    completed: Sequence[Message],
    partial: Sequence[Message] | None,
    streamed: str,
    model: tuple[str | None, str | None],
) -> list[Message]:
    """The evidence of a canceled or failed turn: the run's completed messages (the prompt first),
    then the text streamed since the last completed message as a ``canceled`` assistant message."""
    messages = list(partial) if partial else list(completed)
    if not messages or messages[0].role != "user":
        messages.insert(0, user(prompt, run_id=run_id, conversation_id=conversation_id))
    if streamed:
        messages.append(
            assistant(
                streamed,
                run_id=run_id,
                conversation_id=conversation_id,
                provider=model[0],
                model=model[1],
                stop_reason=CANCELED,
            )
        )
    return messages


async def run_turn(
    agent: Agent[Any, Any],
    prompt: str,
    *,
    history: Sequence[Message],
    conversation_id: str,
    printer: StreamPrinter,
    model: tuple[str | None, str | None] = (None, None),
    waiting: str = "thinking…",
) -> TurnOutcome:
    """Stream one run. Cancelling the task that awaits this (Ctrl-C) ends the run cleanly: the
    outcome then carries the partial turn instead of raising."""
    run_id = new_id()
    completed: list[Message] = []
    streamed: list[str] = []
    printer.wait(waiting)
    try:
        async with agent.run_stream(
            prompt, history=history, conversation_id=conversation_id, run_id=run_id
        ) as stream:
            async for event in stream:
                if isinstance(event, TextEvent):
                    streamed.append(event.text)
                    printer.text(event.text)
                elif isinstance(event, ReasoningEvent):
                    printer.reasoning(event.step)
                elif isinstance(event, ToolCallStarted):
                    printer.tool_started(event.call)
                elif isinstance(event, ToolCallFinished):
                    printer.tool_finished(event.call, event.result)
                elif isinstance(event, MessageCompleted):
                    completed.append(event.message)
                    streamed.clear()
                else:  # RunCompleted: the last event
                    result = event.result
                    printer.done()
                    return TurnOutcome(
                        run_id=result.run_id,
                        new_messages=list(result.new_messages),
                        output=str(result.output),
                    )
    except (asyncio.CancelledError, RunCanceled) as exc:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        printer.done()
        partial = exc.partial.new_messages if isinstance(exc, RunError) and exc.partial else None
        messages = _partial_turn(
            prompt, run_id, conversation_id, completed, partial, "".join(streamed), model
        )
        return TurnOutcome(run_id=run_id, new_messages=messages, canceled=True)
    except RunError as exc:
        printer.done()
        partial = exc.partial.new_messages if exc.partial else None
        messages: list[Message] = []
        if partial or completed:  # something completed: keep that evidence, resumable
            messages = _partial_turn(prompt, run_id, conversation_id, completed, partial, "", model)
        return TurnOutcome(run_id=run_id, new_messages=messages, error=f"{type(exc).__name__}: {exc}")
    printer.done()
    messages = _partial_turn(prompt, run_id, conversation_id, completed, None, "", model)
    return TurnOutcome(run_id=run_id, new_messages=messages, error="the run ended without a result")
