"""One streamed chat turn: print the agent's events as they come. The run stores itself (its
recorder); Ctrl-C cancels the task awaiting the turn, which stops the run exactly like a web
client that goes away: the run records its partial turn and ends with ``RunCanceled``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from tether.agent import (
    Agent,
    CompactionEvent,
    Deferred,
    DeferredResults,
    MessageCompleted,
    ReasoningEvent,
    RunRecorder,
    TextEvent,
    ToolCallDeltaEvent,
    ToolCallFinished,
    ToolCallStarted,
)
from tether.cli._render import preview
from tether.errors import RunCanceled, RunError
from tether.messages import ToolCall, ToolResult, new_id

__all__ = ["StreamPrinter", "TurnOutcome", "run_turn"]


class StreamPrinter:
    """Prints a streamed reply: text as it arrives, tool calls and results on their own lines,
    reasoning collapsed to one line per step, and a spinner with the elapsed time and the tokens
    received so far while waiting for the model or a tool."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None
        self._label = ""
        self._since = time.monotonic()
        self._tokens = 0
        self._mid_line = False
        self._replying = False  # "assistant>" was printed for the message being streamed
        self._reasoning_steps: set[int] = set()
        self._started: set[str | None] = set()

    def _spinner_text(self) -> str:
        seconds = time.monotonic() - self._since
        tokens = f" · {self._tokens} tokens" if self._tokens else ""
        return f"{self._label} {seconds:.0f}s{tokens}"

    def wait(self, text: str = "thinking…") -> None:
        """Show a spinner until the next output."""
        self._stop()
        self._label = text
        self._since = time.monotonic()
        if self.console.is_terminal:
            self._status = self.console.status(self._spinner_text(), spinner="dots")
            self._status.start()

    def tick(self) -> None:
        """Refresh the spinner (called about once a second while nothing else prints)."""
        if self._status is not None:
            self._status.update(self._spinner_text())

    def token(self) -> None:
        """A piece of a streamed tool call or of reasoning arrived: counted on the spinner."""
        self._tokens += 1
        self.tick()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _newline(self) -> None:
        self._replying = False  # whatever comes next is not a continuation of this reply line
        if self._mid_line:
            self.console.file.write("\n")
            self.console.file.flush()
            self._mid_line = False

    def text(self, text: str) -> None:
        self._stop()
        self._tokens += 1
        if not self._replying:  # once per message: a reply's own line breaks continue it
            self.console.print("[bold green]assistant>[/] ", end="")
            self._replying = True
        self.console.file.write(text)
        self.console.file.flush()
        if text:
            self._mid_line = not text.endswith("\n")

    def reasoning(self, step: int) -> None:
        self.token()
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

    def compacted(self, line: str) -> None:
        """The conversation was compacted before a request: one dim line."""
        self._stop()
        self._newline()
        self.console.print(f"[dim]⋯ {escape(line)}[/]")
        self.wait()

    def message(self) -> None:
        """A message was completed: the next text starts a new line."""
        self._newline()

    def done(self) -> None:
        self._stop()
        self._newline()


@dataclass(slots=True)
class TurnOutcome:
    """How one turn ended: its run id, the reply, and whether it was canceled, cut at the token
    limit, or failed. Where it was stored is the recorder's to say."""

    run_id: str
    output: str | None = None
    canceled: bool = False
    truncated: str | None = None
    """Why a reply was cut and kept: the answer's stop reason (``"length"``, or ``"repetition"``
    when the local model's loop detector stopped it)."""
    error: str | None = None
    deferred: Deferred | None = None
    """The calls the run paused on (a tool that needs approval)."""


async def _ticker(printer: StreamPrinter) -> None:
    while True:
        await asyncio.sleep(1)
        printer.tick()


async def run_turn(
    agent: Agent[None, str],
    prompt: str | None,
    *,
    recorder: RunRecorder,
    printer: StreamPrinter,
    waiting: str = "thinking…",
    deferred: DeferredResults | None = None,
) -> TurnOutcome:
    """Stream one stored run (``prompt=None``: continue the stored conversation). Cancelling the
    task that awaits this (Ctrl-C) stops the run: the outcome then says so instead of raising;
    the partial turn is already stored."""
    run_id = new_id()
    printer.wait(waiting)
    ticker = asyncio.ensure_future(_ticker(printer))
    try:
        async with agent.run_stream(prompt, recorder=recorder, run_id=run_id, deferred=deferred) as stream:
            async for event in stream:
                if isinstance(event, TextEvent):
                    printer.text(event.text)
                elif isinstance(event, ToolCallDeltaEvent | ReasoningEvent):
                    if isinstance(event, ReasoningEvent):
                        printer.reasoning(event.step)
                    else:
                        printer.token()
                elif isinstance(event, ToolCallStarted):
                    printer.tool_started(event.call)
                elif isinstance(event, ToolCallFinished):
                    printer.tool_finished(event.call, event.result)
                elif isinstance(event, MessageCompleted):
                    printer.message()
                elif isinstance(event, CompactionEvent):
                    printer.compacted(event.report.line())
                else:
                    result = event.result
                    printer.done()
                    cut = None
                    if result.stop_reason == "length":
                        cut = result.messages[-1].stop_reason or "length"
                    if result.deferred is not None:  # paused: no output yet
                        return TurnOutcome(run_id, deferred=result.deferred)
                    return TurnOutcome(run_id, result.output, truncated=cut)
    except asyncio.CancelledError:  # Ctrl-C: the stream stopped the run, which stored its partial
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        printer.done()
        return TurnOutcome(run_id, canceled=True)
    except RunCanceled:
        printer.done()
        return TurnOutcome(run_id, canceled=True)
    except RunError as exc:
        printer.done()
        return TurnOutcome(run_id, error=f"{type(exc).__name__}: {exc}")
    finally:
        ticker.cancel()
        printer.done()  # the spinner stops whatever ends the turn (an error raised here too)
    printer.done()  # pragma: no cover - a stream always ends with RunCompleted or raises
    return TurnOutcome(run_id, error="the run ended without a result")
