"""Compaction inside a run: one ``Compactor`` per run, called before every model request, its
records kept through the recorder once the messages they stand for are stored, its reports
emitted as ``CompactionEvent`` and recorded on the run span (docs/adr/0010-compaction.md).

A run of an agent without ``compaction=`` holds ``NO_COMPACTION`` instead, whose every step is
empty: it opens the plain history, sends the run's own messages and keeps no record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tether.errors import StoreError
from tether.messages import Message
from tether.models import Model, ModelSettings, ToolDefinition

from .._context import MessagesView
from .._recorder import CompactedLog, RunRecorder
from .._result import CompactionEvent, Event
from .._tools import Tool
from .._trace import Trace
from ._compactor import Compactor
from ._config import Compaction
from ._defaults import compaction_window
from ._recall import recall_tool
from ._report import CompactionReport

if TYPE_CHECKING:
    from tether.stores import CompactionRecord

__all__ = [
    "COMPACT_EVENT",
    "NO_COMPACTION",
    "RECALL_TOOL",
    "NoCompaction",
    "RunCompaction",
    "compaction_for",
    "report_attributes",
]

COMPACT_EVENT = "tether.history.compact"
"""The history-pass event a compaction adds to the run span."""
RECALL_TOOL = "recall"
_log = logging.getLogger("tether.agent")


def compaction_for(config: Compaction, model: Model, settings: ModelSettings | None) -> Compaction:
    """The run's settings: unless ``reserve`` is set, the answer's ``max_tokens`` (the request's,
    else the model's published output limit) is kept free, at most half the window."""
    if config.reserve:
        return config
    window = compaction_window(config, model)
    reserve = (settings.max_tokens if settings is not None else None) or model.profile.max_output_tokens or 0
    reserve = min(reserve, window // 2)
    return replace(config, reserve=reserve) if reserve else config


def report_attributes(report: CompactionReport) -> dict[str, Any]:
    """A report as span-event attributes (counts and flags, never text)."""
    attributes: dict[str, Any] = {
        "tether.compaction.steps": ",".join(report.steps) or "none",
        "tether.compaction.tokens_before": report.tokens_before,
        "tether.compaction.tokens_after": report.tokens_after,
        "tether.compaction.window": report.window,
        "tether.compaction.boundary": report.boundary,
        "tether.compaction.elided": report.elided,
        "tether.compaction.fallback": report.fallback,
        "tether.compaction.background": report.background,
        "tether.compaction.forced": report.forced,
        "tether.compaction.summarizer_calls": report.summarizer_calls,
    }
    if report.error is not None:
        attributes["tether.compaction.error"] = error_kind(report.error)
    return attributes


def error_kind(error: str) -> str:
    """A report's error without the summarizer's own message, which may quote the conversation
    it was given (a provider echoing its request): ``the summarizer failed: ModelHTTPError``.
    The other errors are tether's own words (timed out, stopped with, returned no text)."""
    head, sep, rest = error.partition(": ")
    if head == "the summarizer failed" and sep:
        return f"{head}: {rest.partition(':')[0]}"[:200]
    return error[:200]


class RunCompaction:
    """A run's compaction: the compactor (made when the history is prepared), the records waiting
    for their messages to be stored, and the recall tool's loader."""

    def __init__(self, config: Compaction, model: Model, settings: ModelSettings | None) -> None:
        self.window = compaction_window(config, model)  # UserError: no window known
        self.config = compaction_for(config, model, settings)
        self.model = model
        self.compactor: Compactor | None = None
        self.overhead = 0
        self.keep = True
        """False when positions do not match stored seqs: no record is stored (see ``start``)."""
        self.force = False
        self.pending: list[CompactionRecord] = []
        self.log: Callable[[], Any] | None = None

    # -- setup ------------------------------------------------------------------------------------
    def start(
        self,
        conversation_id: str,
        *,
        record: CompactionRecord | None,
        offset: int,
        exact: bool,
        stored: bool,
    ) -> None:
        """Make the compactor over the run's prepared history (``history[i]`` at seq
        ``offset + i + 1`` when ``exact``); ``stored``: the run has a store to keep records in."""
        self.compactor = Compactor(
            self.config, self.model, conversation_id=conversation_id, record=record, offset=offset
        )
        self.keep = exact and stored

    async def open(self, recorder: RunRecorder, *, repair: bool) -> CompactedLog:
        """The recorder's conversation from its latest compaction record."""
        return await recorder.open_compacted(repair=repair)

    def measure(self, instructions: str | None, definitions: Sequence[ToolDefinition]) -> None:
        """Count what every request carries besides the messages (once per run)."""
        if self.compactor is not None:
            self.overhead = self.compactor.overhead(instructions, definitions)

    def recall(self, recorder: RunRecorder | None, messages: Callable[[], list[Message]]) -> Tool[Any]:
        """The ``recall`` tool of this run: with a recorder it searches the stored log (one
        owner's conversation), plus this run's messages not stored yet; without one, the run's
        own messages."""

        async def load() -> Sequence[Message]:
            own = messages()
            offset = self.compactor.offset if self.compactor is not None else 0
            if recorder is None:
                return own  # positions are indices: a run without a store starts at 0
            log = await recorder.load_log()
            stored = len(log) - offset  # own[i] is at seq offset + i + 1
            return [*log, *own[stored:]] if 0 <= stored < len(own) else log

        def hidden() -> int:
            return self.compactor.hidden if self.compactor is not None else 0

        return recall_tool(load, hidden=hidden, name=RECALL_TOOL)

    # -- per request ----------------------------------------------------------------------------------
    async def prepare(
        self,
        messages: list[Message],
        *,
        step: int,
        ids: tuple[str, str],
        emit: Callable[[Event], None],
        trace: Trace,
        reports: list[CompactionReport],
    ) -> Sequence[Message]:
        """The view to send before model request ``step``; new records wait in ``pending``."""
        compactor = self.compactor
        assert compactor is not None
        force, self.force = self.force, False
        prepared = await compactor.prepare(
            MessagesView(messages), window=self.window, overhead=self.overhead, force=force
        )
        if prepared.reports:
            if self.keep:
                self.pending.extend(prepared.records)
            for report in prepared.reports:
                reports.append(report)
                emit(CompactionEvent(ids[0], ids[1], step, report))
                trace.history_event(COMPACT_EVENT, report_attributes(report))
        return prepared.messages

    async def flush(self, recorder: RunRecorder) -> None:
        """Store the waiting records (their messages are stored). A record that cannot be stored
        costs nothing but the next run's work to make it again: logged, never fatal."""
        while self.pending:
            record = self.pending.pop(0)
            try:
                await recorder.record_compaction(record)
            except StoreError as exc:
                _log.warning("a compaction record could not be stored: %s", exc)

    def view(self, messages: list[Message]) -> Sequence[Message] | None:
        """The compacted view of the run's messages, or ``None`` when nothing is compacted."""
        compactor = self.compactor
        if compactor is None or not compactor.compacted:
            return None
        return compactor.view(MessagesView(messages))

    async def aclose(self) -> None:
        if self.compactor is not None:
            await self.compactor.aclose()

    async def abandon(self) -> None:
        """Cancel a background summary the run no longer needs (shielded: the run is ending)."""
        with contextlib.suppress(asyncio.CancelledError):  # a second cancel: the run ends anyway
            await asyncio.shield(self.aclose())


class NoCompaction:
    """The compaction of a run without ``compaction=``: the plain history is opened, the run's
    own messages are sent (``prepare`` gives no view of its own), nothing is kept or closed."""

    __slots__ = ()

    def start(
        self,
        conversation_id: str,
        *,
        record: CompactionRecord | None,
        offset: int,
        exact: bool,
        stored: bool,
    ) -> None:
        pass

    async def open(self, recorder: RunRecorder, *, repair: bool) -> CompactedLog:
        cid, history = await recorder.open(repair=repair)
        return CompactedLog(cid, history)

    def measure(self, instructions: str | None, definitions: Sequence[ToolDefinition]) -> None:
        pass

    async def prepare(
        self,
        messages: list[Message],
        *,
        step: int,
        ids: tuple[str, str],
        emit: Callable[[Event], None],
        trace: Trace,
        reports: list[CompactionReport],
    ) -> Sequence[Message] | None:
        return None

    async def flush(self, recorder: RunRecorder) -> None:
        pass

    def view(self, messages: list[Message]) -> Sequence[Message] | None:
        return None

    async def aclose(self) -> None:
        pass

    async def abandon(self) -> None:
        pass


NO_COMPACTION = NoCompaction()
