"""``tether chat``: an interactive, streaming, stored conversation.

Every turn runs through ``agent.run_stream(..., recorder=StoreRecorder(...))`` like any
application: the run stores its prompt and what it adds (tools get the tool-effect ledger), and
Ctrl-C stops the run exactly like a web client that goes away — the prompt, completed tool steps
and the text streamed so far (an assistant message with stop reason ``canceled``) are stored, and
the next prompt continues from there. A session pins the version its user saw: if another
session appended meanwhile, the turn goes to a fork instead of landing after a turn nobody here
saw. A long conversation is compacted (``Agent(compaction=...)``) at 80% of the model's context
window, one dim line saying so; ``/compact`` compacts now; the log itself is never cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from tether.agent import Agent, DeferredResults, StoreRecorder
from tether.agent.compaction import default_compaction
from tether.agent.demo_tools import DEMO_TOOLS
from tether.cli._approve import ask_in_terminal, decide
from tether.cli._common import fail, out_console
from tether.cli._compaction import render_with_records
from tether.cli._formats import export_messages
from tether.cli._history import build_processor
from tether.cli._logging import configure_logging
from tether.cli._mcp_tools import McpHeaderOpt, McpOpt, mcp_toolsets
from tether.cli._model import resolve_model
from tether.cli._store import (
    DEFAULT_OWNER,
    DbOpt,
    OwnerOpt,
    default_db_path,
    open_store,
    resolve_conversation,
    short_conversation_id,
)
from tether.cli._stream import StreamPrinter, TurnOutcome, run_turn
from tether.cli._trace import chat_trace
from tether.errors import HistoryError, NotFound, TetherError, UserError
from tether.history import BudgetHistory, TrimHistory
from tether.messages import Message, new_id
from tether.models import Model, aclose_model
from tether.models.wire import ConversionReport
from tether.stores import CompactionRecord, Store

__all__ = ["LOCAL_BUDGET", "SLASH_COMMANDS", "ChatSession", "chat", "interrupted_tail"]

LOCAL_BUDGET = 2048
"""Approximate tokens of history sent to the local model when neither --max-messages nor --budget
is given and compaction cannot run (its context window is 4096 tokens)."""

SLASH_COMMANDS: dict[str, str] = {
    "/history": "show this conversation so far, with where compaction records sit",
    "/compact": "compact this conversation now (older messages summarized or elided; the log is kept)",
    "/ids": "show the conversation id, the last run id, the database and the model",
    "/fork": "continue in a copy of this conversation under a new id",
    "/export FILE [FORMAT]": "write this conversation to FILE (tether JSON or a tether.convert format)",
    "/report": "show what the last request could not carry and the last response left out",
    "/help": "list these commands",
    "/quit": "leave (Ctrl-D works too)",
}


class ChatSession:
    """One chat: an agent, a store and the conversation being continued. ``messages`` and
    ``version`` are what this session's user has seen of the conversation."""

    def __init__(
        self,
        *,
        agent: Agent[Any, str],
        model: Model,
        store: Store,
        owner: str,
        conversation_id: str,
        messages: list[Message],
        version: int,
        console: Console,
        db_label: str,
    ) -> None:
        self.agent = agent
        self.model = model
        self.store = store
        self.owner = owner
        self.conversation_id = conversation_id
        self.messages = messages
        self.version = version
        self.console = console
        self.db_label = db_label
        self.last_run_id: str | None = None
        self.turns = 0
        self.approve: Callable[[str], bool] = ask_in_terminal
        """Asks whether a paused tool call may run (no terminal to ask: the call is denied)."""

    # -- turns -----------------------------------------------------------------------------------
    async def send(self, prompt: str | None) -> TurnOutcome:
        """Run one turn, streaming it to the console; the run stores what it produces. A tool
        that needs approval (an MCP tool that may be destructive) is asked about first.
        ``None``: continue the stored conversation (an interrupted turn)."""
        outcome = await self._turn(prompt, None)
        while outcome.deferred is not None and outcome.deferred.approvals and outcome.error is None:
            outcome = await self._turn(None, decide(outcome.deferred, self.approve))
        return outcome

    async def _turn(self, prompt: str | None, deferred: DeferredResults | None) -> TurnOutcome:
        recorder = StoreRecorder(
            self.store, self.owner, self.conversation_id, on_conflict="fork", at_version=self.version
        )
        first_local = not self.turns and self.model.profile.provider == "local"
        outcome = await run_turn(
            self.agent,
            prompt,
            recorder=recorder,
            printer=StreamPrinter(self.console),
            waiting="loading the model…" if first_local else "thinking…",
            deferred=deferred,
        )
        self.turns += 1
        self.last_run_id = outcome.run_id
        await self._follow(recorder.conversation_id or self.conversation_id)
        if outcome.canceled:
            self.console.print("[yellow]⏹ reply canceled; the partial turn is stored.[/]")
        elif outcome.error is not None:
            self.console.print(f"[red]run failed:[/] {escape(outcome.error)}")
        elif outcome.truncated:
            self.console.print(
                "[dim](the reply reached its length limit and was cut; it is stored as it is)[/]"
            )
        self.console.print(f"[dim]conversation {self.conversation_id} · run {outcome.run_id}[/]")
        return outcome

    async def _follow(self, conversation_id: str) -> None:
        """Catch up with what the turn stored (in this conversation, or in the fork it moved to
        because another session had appended meanwhile)."""
        old, base = self.conversation_id, self.version
        try:
            if conversation_id != old:
                loaded = await self.store.load(self.owner, conversation_id)
                self.messages = list(loaded.messages)
                self.console.print(
                    f"[yellow]the conversation changed in another session; this turn is stored in a "
                    f"new conversation [bold]{conversation_id}[/] (a fork of {old} at {base} messages)[/]"
                )
            else:
                loaded = await self.store.load(self.owner, conversation_id, since=base)
                self.messages.extend(loaded.messages)
        except NotFound:  # the turn failed before its conversation was created
            return
        self.conversation_id, self.version = conversation_id, loaded.version

    # -- slash commands ---------------------------------------------------------------------------
    async def command(self, line: str) -> bool:
        """Run a slash command; False means leave the session."""
        name, _, rest = line.strip().partition(" ")
        arg = rest.strip()
        if name in ("/quit", "/exit", "/q"):
            return False
        if name == "/history":
            if not self.messages:
                self.console.print("[dim](no messages yet)[/]")
            render_with_records(self.console, self.messages, await self._records())
        elif name == "/compact":
            await self.compact()
        elif name == "/ids":
            short = await short_conversation_id(self.store, self.owner, self.conversation_id)
            self.console.print(f"conversation {self.conversation_id} (short: {short})")
            self.console.print(f"last run     {self.last_run_id or '-'}")
            self.console.print(f"database     {escape(self.db_label)}")
            self.console.print(f"model        {escape(self.model.name)}")
        elif name == "/fork":
            await self.fork()
        elif name == "/export":
            self.export(arg)
        elif name == "/report":
            self.report()
        elif name == "/help":
            for usage, text in SLASH_COMMANDS.items():
                self.console.print(f"  [bold]{escape(usage)}[/]  {text}")
        else:
            self.console.print(f"[red]unknown command {escape(name)}[/]; /help lists the commands")
        return True

    async def _records(self) -> list[CompactionRecord]:
        try:
            return [
                r
                for r in await self.store.records(self.owner, self.conversation_id)
                if r.boundary <= self.version
            ]
        except NotFound:  # nothing stored yet
            return []

    async def compact(self) -> None:
        """``/compact``: compact the stored conversation now, as far as this session has seen it."""
        if self.agent.compaction is None:
            self.console.print(
                "[dim]compaction is off: this model's context window is not known, or --max-messages "
                "or --budget chose what is sent[/]"
            )
            return
        recorder = StoreRecorder(self.store, self.owner, self.conversation_id, at_version=self.version)
        try:
            prepared = await self.agent.compact(recorder=recorder)
        except UserError as exc:
            self.console.print(f"[dim]{escape(str(exc))}[/]")
            return
        report = prepared.report
        if report is None:
            self.console.print("[dim]nothing could be compacted[/]")
            return
        self.console.print(f"[dim]⋯ {escape(report.line())}[/]")
        if prepared.record is not None:
            self.console.print(f"[dim]  kept as compaction record {prepared.record.id}; /history shows it[/]")

    async def fork(self) -> None:
        """Continue in a copy: the stored conversation is forked (or, before the first turn, a new
        id is simply taken)."""
        old = self.conversation_id
        try:
            self.conversation_id = await self.store.fork(self.owner, old, at_version=self.version)
        except NotFound:  # nothing stored yet: a new id is the copy
            self.conversation_id = new_id()
        else:
            loaded = await self.store.load(self.owner, self.conversation_id)
            self.messages, self.version = list(loaded.messages), loaded.version
        self.console.print(f"forked {old} → [bold]{self.conversation_id}[/]")

    def report(self) -> None:
        """``/report``: what the model's last request dropped or approximated, and what its last
        response held that tether cannot keep."""
        report: ConversionReport | None = getattr(self.model, "last_request_report", None)
        if report is None:
            self.console.print("[dim](no request made yet, or this model keeps no report)[/]")
            return
        if not report.losses:
            self.console.print("the last request carried everything (no losses)")
        for loss in report.losses:
            where = f"message {loss.message}" + ("" if loss.part is None else f" part {loss.part}")
            self.console.print(f"  {loss.kind} {escape(where)} {escape(loss.what)}: {escape(loss.reason)}")
        response: ConversionReport | None = getattr(self.model, "last_response_report", None)
        for loss in response.losses if response is not None else ():
            where = "" if loss.part is None else f" part {loss.part}"
            self.console.print(f"  response {loss.kind}{where} {escape(loss.what)}: {escape(loss.reason)}")

    def export(self, arg: str) -> None:
        """``/export FILE [FORMAT]``."""
        file, _, fmt = arg.partition(" ")
        if not file:
            self.console.print("[red]usage: /export FILE [FORMAT][/]")
            return
        try:
            data, report = export_messages(self.messages, fmt.strip() or "tether")
            Path(file).expanduser().write_bytes(data)
        except Exception as exc:  # an interactive session reports and goes on
            self.console.print(f"[red]export failed:[/] {escape(str(exc))}")
            return
        losses = len(report.losses)
        self.console.print(
            f"wrote {len(self.messages)} messages to {escape(file)} ({losses} losses reported)"
        )


def interrupted_tail(messages: Sequence[Message]) -> str | None:
    """What a conversation's stored tail says about a turn that never finished (the process
    stopped mid-turn: every completed step is stored, ADR 0015), or ``None`` when it ended
    normally. A reply stopped with Ctrl-C is stored with its text and is not continued."""
    last = next((m for m in reversed(messages) if m.role != "system"), None)
    if last is None:
        return None
    if last.role == "user":
        return "the last prompt was not answered (the session stopped before the reply finished)"
    if last.role == "tool":
        return "the last turn stopped after its tools ran, before the model answered"
    if last.tool_calls:  # the last message: none of its calls has a result
        return "the last turn stopped before its tools ran"
    return None


def _lenient(processor: TrimHistory | BudgetHistory) -> Callable[[Sequence[Message]], list[Message]]:
    """The processor, except that a history it cannot cut (the newest message alone is over the
    budget, or nothing left could open a request) sends no history instead of failing every later
    turn of the conversation: the new prompt opens the request on its own."""

    def process(history: Sequence[Message]) -> list[Message]:
        try:
            return processor(history)
        except HistoryError:
            return []

    return process


def _read_line(console: Console, prompt: str) -> str | None:
    try:
        return console.input(prompt)
    except EOFError:
        return None


def _interactive(runner: asyncio.Runner, session: ChatSession) -> None:
    """The prompt loop. Input is read synchronously (Ctrl-C there just clears the line); each turn
    runs on the same event loop, where asyncio turns Ctrl-C into cancelling that turn only."""
    console = session.console
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if callable(reconfigure):  # undecodable bytes become lone surrogates, refused below, not a crash
        reconfigure(errors="surrogateescape")
    console.print("[dim]/help lists commands · Ctrl-C cancels a reply · /quit or Ctrl-D leaves[/]")
    while True:
        try:
            line = _read_line(console, "[bold cyan]you>[/] ")
        except KeyboardInterrupt:
            console.print("\n[dim](use /quit or Ctrl-D to leave)[/]")
            continue
        if line is None:
            console.print()
            return
        if not line.strip():
            continue
        problem = _not_unicode(line)
        if problem is not None:
            console.print(
                f"[red]that line is not valid text ({problem}: bytes that are not UTF-8?); nothing was "
                "sent[/]"
            )
            continue
        try:
            if line.startswith("/"):
                if not runner.run(session.command(line)):
                    return
                continue
            runner.run(session.send(line))
        except KeyboardInterrupt:  # Ctrl-C during a slash command (a long /compact): stop it only
            console.print("\n[yellow]⏹ canceled[/]")
        except (TetherError, sqlite3.Error, OSError) as exc:  # one line, and the session goes on
            console.print(f"[red]failed:[/] {escape(type(exc).__name__)}: {escape(str(exc))}")


def _not_unicode(text: str) -> str | None:
    """Why ``text`` cannot be sent or stored (a lone surrogate: the terminal gave bytes that are
    not UTF-8), or ``None``."""
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return f"a lone surrogate at character {exc.start}"
    return None


async def _open_session(
    *,
    stack: contextlib.AsyncExitStack,
    console: Console,
    model: Model,
    agent: Agent[Any, str],
    db: Path | None,
    owner: str,
    resume: bool,
    cid: str | None,
    fork: bool,
) -> tuple[ChatSession, str]:
    store = await stack.enter_async_context(open_store(db))
    stack.push_async_callback(aclose_model, model)  # the SDK client, or the local model's weights
    messages: list[Message] = []
    version = 0
    if resume or cid:
        conversation_id = await resolve_conversation(store, owner, cid)
        state = "continued"
        if fork:
            source = conversation_id
            conversation_id = await store.fork(owner, source)
            state = f"forked from {source}"
        loaded = await store.load(owner, conversation_id)
        messages, version = list(loaded.messages), loaded.version
        state += f", {version} messages"
    else:
        conversation_id = new_id()
        state = "new"
    session = ChatSession(
        agent=agent,
        model=model,
        store=store,
        owner=owner,
        conversation_id=conversation_id,
        messages=messages,
        version=version,
        console=console,
        db_label=str(db) if db is not None else str(default_db_path()),
    )
    return session, state


def _chat(
    *,
    prompt: str | None,
    model_spec: str | None,
    db: Path | None,
    owner: str,
    resume: bool,
    cid: str | None,
    fork: bool,
    instructions: str | None,
    max_messages: int | None,
    budget: int | None,
    tools: bool,
    verbose: bool,
    trace: Path | None = None,
    mcp: list[str] | None = None,
    mcp_header: list[str] | None = None,
) -> int:
    console = out_console()
    configure_logging(verbose)
    if resume and cid:
        fail("give either -c/--continue or --cid, not both")
    if fork and not (resume or cid):
        fail("--fork needs -c/--continue or --cid (which conversation to copy)")
    if prompt is not None and not prompt.strip():  # an interactive session skips blank lines too
        fail("the PROMPT argument is empty: give a message, or leave it out for an interactive session")
    for what, text in (("the PROMPT argument", prompt), ("-s/--instructions", instructions)):
        problem = _not_unicode(text) if text is not None else None
        if problem is not None:  # before the model loads or anything is stored
            fail(f"{what} is not valid text ({problem}: bytes that are not UTF-8?)")
    processor = build_processor(max_messages, budget)
    try:
        toolsets = mcp_toolsets(mcp, mcp_header)
    except TetherError as exc:
        fail(str(exc), cause=exc)
    with console.status("loading model…", spinner="dots"):
        model = resolve_model(model_spec)
    # a long conversation is compacted at 80% of the model's window, unless the options cut it
    compaction = default_compaction(model, recall=tools) if processor is None else None
    if processor is None and compaction is None and model.profile.provider == "local":
        processor = build_processor(None, LOCAL_BUDGET)  # pragma: no cover - the local window is known
    agent: Agent[Any, str] = Agent(
        model,
        instructions=instructions,
        tools=[*(DEMO_TOOLS if tools else ()), *toolsets],
        history_processor=_lenient(processor) if processor is not None else None,
        accept_truncated=True,  # a reply cut at its length limit is shown and stored, with a note
        compaction=compaction,
    )
    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        stack.enter_context(chat_trace(trace))
        stack.push_async_callback(agent.aclose)  # the --mcp connections
        try:
            session, state = runner.run(
                _open_session(
                    stack=stack,
                    console=console,
                    model=model,
                    agent=agent,
                    db=db,
                    owner=owner,
                    resume=resume,
                    cid=cid,
                    fork=fork,
                )
            )
            short = runner.run(short_conversation_id(session.store, owner, session.conversation_id))
            console.print(
                f"[bold]tether chat[/] · model [bold]{escape(model.name)}[/] · conversation "
                f"[bold]{session.conversation_id}[/] ({escape(state)}) · short id [bold]{short}[/]"
            )
            unfinished = interrupted_tail(session.messages)
            if unfinished is not None:  # a process that died mid-turn (ADR 0015): continue it
                console.print(f"[yellow]⏵ {escape(unfinished)}; continuing it[/]")
                outcome = runner.run(session.send(None))
                if outcome.error is not None and prompt is not None:
                    return 1
            if prompt is not None:
                outcome = runner.run(session.send(prompt))
                return 1 if outcome.error is not None else 0
            _interactive(runner, session)
        finally:
            runner.run(stack.aclose())
    return 0


def chat(
    prompt: Annotated[
        str | None,
        typer.Argument(
            help="Send this one message, print the reply and exit (no interactive session).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            envvar="TETHER_MODEL",
            help="provider:model (openai:…, anthropic:…, google:…, local, test), or the path of a .gguf "
            "file; default: the bundled local model. API keys come from the provider's usual "
            "environment variable.",
            show_default=False,
        ),
    ] = None,
    db: DbOpt = None,
    owner: OwnerOpt = DEFAULT_OWNER,
    resume: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the most recent conversation.")
    ] = False,
    cid: Annotated[
        str | None,
        typer.Option(
            "--cid", help="Continue the conversation with this id (or unique id prefix).", show_default=False
        ),
    ] = None,
    fork: Annotated[
        bool, typer.Option("--fork", help="With -c/--cid: continue in a copy under a new conversation id.")
    ] = False,
    instructions: Annotated[
        str | None,
        typer.Option(
            "--instructions", "-s", help="Instructions (system prompt) for every reply.", show_default=False
        ),
    ] = None,
    max_messages: Annotated[
        int | None,
        typer.Option(
            "--max-messages",
            help="Send only the newest N stored messages, plus the prompt (trim_history).",
            show_default=False,
        ),
    ] = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            help="Send only the newest stored messages within TOKENS, plus the prompt (budget_history).",
            show_default=False,
        ),
    ] = None,
    tools: Annotated[
        bool, typer.Option("--tools", help="Give the model the demo tools: current_time and calculator.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Show tether's log on stderr (e.g. what a request could not carry)."
        ),
    ] = False,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace", help="Write the session's spans to FILE as OTLP JSON lines.", show_default=False
        ),
    ] = None,
    mcp: McpOpt = None,
    mcp_header: McpHeaderOpt = None,
) -> None:
    """Chat with a model; every turn is stored and a conversation survives restarts."""
    code = _chat(
        prompt=prompt,
        model_spec=model,
        db=db,
        owner=owner,
        resume=resume,
        cid=cid,
        fork=fork,
        instructions=instructions,
        max_messages=max_messages,
        budget=budget,
        tools=tools,
        verbose=verbose,
        trace=trace,
        mcp=mcp,
        mcp_header=mcp_header,
    )
    if code:
        raise typer.Exit(code)
