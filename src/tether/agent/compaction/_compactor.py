"""The ``Compactor``: what the run loop calls once per model request (its settings are
``_config``'s ``Compaction``, the summary request ``_summary``, the recall tool ``_recall``, the
run-time driver ``_run``; docs/adr/0010-compaction.md).

The compactor never rewrites the log. It keeps a state — the summary, the position it stands for,
how far old content is elided — and derives from it the view each request sends. Checking costs
O(new messages): token counts are prefix sums kept up to date from the counter's cache. When a
request would pass ``threshold`` of the model's window, the strategies run in order until the
view fits ``target``; a summary is written incrementally (the previous summary plus the messages
that aged out since) and comes back as a ``CompactionRecord`` for the store. A summarizer that
fails or times out never fails the run: elide, then budget, take over and the report says so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from tether.errors import UserError
from tether.history import (
    RECALL_HINT,
    SUMMARY_NOTE,
    ElideReport,
    TokenTally,
    Trigger,
    compacted_view,
    compaction_boundary,
    elide,
    split_summary,
    summary_chunks,
    summary_part,
)
from tether.messages import Message, Text, Usage, new_id
from tether.models import Model, ToolDefinition, infer_model
from tether.stores import CompactionRecord

from .._context import MessagesView
from .._tools import Tool
from ._config import Compaction, CompactionStrategy
from ._recall import recall_tool
from ._report import CompactionReport, CompactionStep
from ._summary import Plan, Summary, SummaryFailed, write_summary

__all__ = ["Compaction", "CompactionStrategy", "Compactor", "Prepared"]

RECALL_NOTE = SUMMARY_NOTE[:-1] + " and the recall tool can search them."


@dataclass(frozen=True, slots=True)
class Prepared:
    """What ``Compactor.prepare`` returns: the ``messages`` to send, the ``records`` to append
    to the store (oldest first; usually none, at most one per compaction), and the ``reports``
    of the compactions that happened during this call."""

    messages: Sequence[Message]
    records: tuple[CompactionRecord, ...] = ()
    reports: tuple[CompactionReport, ...] = ()

    @property
    def record(self) -> CompactionRecord | None:
        """The newest record made, or ``None``."""
        return self.records[-1] if self.records else None

    @property
    def report(self) -> CompactionReport | None:
        """The newest report, or ``None`` when nothing was compacted."""
        return self.reports[-1] if self.reports else None


class Compactor:
    """One run's compaction. Create it once per run, call ``prepare`` before every model request.

    ``model`` is the agent's model (the summarizer unless ``config.summarizer`` names another);
    ``conversation_id`` goes into the records. ``record`` is the latest stored record, if any;
    ``offset`` says where the messages given to ``prepare`` start: ``messages[i]`` is the
    message stored at seq ``offset + i + 1`` (``Loaded.offset`` of the load they came from).
    """

    def __init__(
        self,
        config: Compaction,
        model: Model,
        *,
        conversation_id: str,
        record: CompactionRecord | None = None,
        offset: int = 0,
    ) -> None:
        if not isinstance(config, Compaction):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"Compactor needs a Compaction, not {type(config).__name__}")
        if record is not None and not isinstance(record, CompactionRecord):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise UserError(f"record must be a CompactionRecord, not {type(record).__name__}")
        if type(offset) is not int or offset < 0:
            raise UserError(f"offset must be an int >= 0, not {offset!r}")
        if record is not None and record.conversation_id != conversation_id:
            raise UserError(
                f"the record belongs to conversation {record.conversation_id!r}, not {conversation_id!r}"
            )
        self.config = config
        self.summarizer: Model = model if config.summarizer is None else infer_model(config.summarizer)
        self.conversation_id = conversation_id
        self.offset = offset
        self.record = record
        self.tally = TokenTally(config.counter)
        self.reports: list[CompactionReport] = []
        self.elided = ElideReport()
        self._note = RECALL_NOTE if config.recall else SUMMARY_NOTE
        self._hint = RECALL_HINT if config.recall else None
        self._ready = False
        self._summary: str | None = record.summary if record is not None else None
        self._embedded = False
        self._start = 0
        self._elide_upto = 0
        self._gap: tuple[int, int] | None = None
        self._messages: Sequence[Message] = ()
        self._system = False
        self._checked = 0
        self._first: Message | None = None
        self._frozen_key: tuple[Any, ...] | None = None
        self._frozen: list[Message] = []
        self._frozen_upto = 0
        self._out: list[Message] = []
        self._out_upto = 0
        self._out_key: tuple[Any, ...] | None = None
        self._frozen_tokens = 0
        self._bg: asyncio.Task[Summary] | None = None

    # -- state ------------------------------------------------------------------------------------
    @property
    def compacted(self) -> bool:
        """True once the view stands for more than it shows (a summary, elisions or a cut)."""
        return self._summary is not None or self._start > 0 or self._elide_upto > self._start

    @property
    def boundary(self) -> int:
        """The conversation position where the verbatim (or elided) view starts: the messages
        before it are stood for by the summary (seq ``<= boundary``)."""
        return self.offset + self._start

    @property
    def hidden(self) -> int:
        """Positions below this are not in the view verbatim (summarized, cut or elided)."""
        return self.offset + max(self._start, self._elide_upto)

    @property
    def summary(self) -> str | None:
        return self._summary

    def _begin(self, msgs: Sequence[Message]) -> None:
        n = len(msgs)
        record = self.record
        if record is not None:
            start = record.boundary - self.offset
            if start < 0:
                raise UserError(
                    f"the messages start at seq {self.offset + 1}, after the record's boundary "
                    f"(seq {record.boundary}): load from seq {record.boundary + 1} or earlier"
                )
            if start > n:
                raise UserError(
                    f"the record stands for messages up to seq {record.boundary}, but the messages "
                    f"given end at seq {self.offset + n}"
                )
            self._start = self._elide_upto = start
        elif self.offset == 0 and n:
            embedded, _ = split_summary(msgs[0])
            if embedded is not None:  # a compacted view passed back in as history
                self._summary = embedded
                self._embedded = True
        self._ready = True

    def _scan(self, msgs: Sequence[Message]) -> None:
        """Note system messages (never sent) among the new messages: O(new)."""
        n = len(msgs)
        if n < self._checked or (n and msgs[0] is not self._first):
            self._checked, self._system = 0, False
            self._first = msgs[0] if n else None
        for i in range(self._checked, n):
            if msgs[i].role == "system":
                self._system = True
        self._checked = n

    def _head(self, gap_: tuple[int, int] | None = None) -> str | None:
        """The text standing for what the view leaves out: the summary and any cut after it
        (``gap_``: the cut to describe instead of the current one)."""
        gap = None
        cut = gap_ or self._gap
        if cut is not None:
            a, b = cut
            how = "recall can search them" if self.config.recall else "they are kept in the log"
            gap = (
                f"[Messages {a}-{b} of this conversation were left out of this view to fit the "
                f"context window, without a summary; {how}.]"
            )
        if self._summary is None:
            return gap
        return self._summary if gap is None else f"{self._summary}\n\n{gap}"

    def _freeze(self, msgs: Sequence[Message]) -> None:
        """Build (once per state) the fixed head of the view: summary, elided messages."""
        n = len(msgs)
        s = self._start
        text = self._head()
        upto = min(max(self._elide_upto, s + 1 if text is not None else s), n)
        key = (s, upto, self._elide_upto, text, msgs[upto - 1] if upto else None, self._system)
        if key == self._frozen_key:
            return
        part = [msgs[i] for i in range(s, upto)]
        if self._elide_upto > s:
            part, self.elided = elide(
                part,
                keep_last=upto - self._elide_upto,
                min_bytes=self.config.min_elide_bytes,
                hint=self._hint,
            )
        if self._embedded and part:
            _, rest = split_summary(part[0])
            part = ([rest] if rest is not None else []) + part[1:]
        if self._system:
            part = [m for m in part if m.role != "system"]
        if text is not None:
            part = compacted_view(part, text, 0, note=self._note)
        count = self.tally.count
        self._frozen, self._frozen_upto = part, upto
        self._frozen_tokens = sum(count(m) for m in part)
        self._frozen_key = key

    def _tokens(self, msgs: Sequence[Message]) -> int:
        """The counted tokens of the view's messages: O(1) once the tally and head are current."""
        self._freeze(msgs)
        return self._frozen_tokens + self.tally.total - self.tally.prefix(self._frozen_upto)

    def view(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The view of ``messages`` in the current state, compacting nothing: what a run returns
        as its messages when there is no store."""
        if not self._ready:
            self._begin(messages)
        self.tally.update(messages)
        self._scan(messages)
        return self._view(messages)

    def _view(self, msgs: Sequence[Message]) -> Sequence[Message]:
        """The frozen head, then the messages after it (system messages left out). One list is
        kept and extended by the messages added since the last call while the head stays the
        same, so a step costs O(new messages); the caller gets a fixed-length view of it."""
        self._freeze(msgs)
        upto = self._frozen_upto
        if not self._frozen and upto == 0 and not self._system:
            return msgs
        key = self._frozen_key
        if key != self._out_key or len(msgs) < self._out_upto:
            self._out, self._out_upto, self._out_key = list(self._frozen), upto, key
        n, out = len(msgs), self._out
        for i in range(self._out_upto, n):  # by index: O(new) for any sequence
            m = msgs[i]
            if m.role != "system":
                out.append(m)
        self._out_upto = n
        return MessagesView(self._out)

    def overhead(self, instructions: str | None, tools: Sequence[ToolDefinition] = ()) -> int:
        """Tokens every request carries besides its messages: the instructions and the tool
        definitions (as the JSON a provider receives), counted with this compactor's counter.
        Pass it to ``prepare(overhead=...)``; compute it once per run."""
        parts: list[Text] = [Text(instructions)] if instructions else []
        if tools:
            schema = [
                {"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools
            ]
            parts.append(Text(msgspec.json.encode(schema).decode()))
        return self.tally.counter(Message("user", tuple(parts))) if parts else 0

    # -- the call per request -----------------------------------------------------------------------
    async def prepare(
        self,
        messages: Sequence[Message],
        *,
        window: int | None = None,
        overhead: int = 0,
        force: bool = False,
    ) -> Prepared:
        """The view to send for ``messages`` (the run's messages so far, a sequence that only
        grows), compacting first when it is over the threshold of ``window`` (the model's context
        window; ``Compaction.window`` overrides it; ``None``: unknown, nothing is compacted).
        ``overhead``: tokens of the instructions and tool definitions. ``force`` compacts now
        (``/compact``). Summarizer failures never raise: they are in the report."""
        if not self._ready:
            self._begin(messages)
        done = max(self._start, self._elide_upto)
        if len(messages) < done:
            raise UserError(
                f"{len(messages)} messages given, fewer than this compactor has already compacted "
                f"({done}): use one Compactor per run, over messages that only grow"
            )
        self._messages = messages
        self.tally.update(messages)
        self._scan(messages)
        cfg = self.config
        size = cfg.window if cfg.window is not None else window
        if size is None:
            if force:
                raise UserError("compaction needs the model's context window: pass Compaction(window=...)")
            return Prepared(self._view(messages))
        trigger = Trigger(size, cfg.threshold, cfg.target, cfg.reserve, overhead)
        records: list[CompactionRecord] = []
        reports: list[CompactionReport] = []
        tokens = self._tokens(messages)
        bg = self._bg
        failed: str | None = None
        if bg is not None and (bg.done() or force or trigger.due(tokens)):
            await asyncio.wait({bg})  # it is bounded by its own timeout, started when it was
            failed = self._adopt(messages, trigger, tokens, records, reports)
            tokens = self._tokens(messages)
        if trigger.due(tokens) or (force and not records):
            await self._compact(messages, trigger, tokens, force, records, reports, failed)
        elif cfg.soft_threshold is not None and self._bg is None and tokens > trigger.at(cfg.soft_threshold):
            self._launch(messages, trigger)
        self.reports.extend(reports)
        return Prepared(self._view(messages), tuple(records), tuple(reports))

    async def aclose(self) -> None:
        """Cancel a background summary still running (call when the run ends)."""
        bg, self._bg = self._bg, None
        if bg is None:
            return
        if not bg.done():
            bg.cancel()
        with contextlib.suppress(asyncio.CancelledError, SummaryFailed):
            await bg  # also retrieves the failure of one that finished unadopted

    # -- strategies ---------------------------------------------------------------------------------
    async def _compact(
        self,
        msgs: Sequence[Message],
        trigger: Trigger,
        tokens: int,
        force: bool,
        records: list[CompactionRecord],
        reports: list[CompactionReport],
        failed: str | None = None,
    ) -> None:
        """Run the strategies until the view fits; ``failed``: the summarizer just failed in
        the background, so this compaction does not ask it again (fallbacks only)."""
        cfg = self.config
        goal = 0 if force else trigger.goal
        before = tokens
        steps: list[CompactionStep] = []
        error: str | None = failed
        done: Summary | None = None
        record: CompactionRecord | None = None
        elided_before = len(self.elided.elided)
        for strategy in cfg.strategies:
            if tokens <= goal:
                break
            if strategy == "elide":
                if self._elide(msgs):
                    steps.append("elide")
                    tokens = self._tokens(msgs)
                continue
            try:
                if failed is not None:
                    raise SummaryFailed(failed)
                done = await self._summarize(msgs, trigger, goal)
            except SummaryFailed as exc:
                error = str(exc)
                if self._elide(msgs):
                    steps.append("elide")
                tokens = self._tokens(msgs)
                break
            if done is not None:
                record = self._apply(msgs, done, before)
                records.append(record)
                steps.append("summarize")
                tokens = self._tokens(msgs)
        dropped = None
        if tokens > trigger.limit:
            dropped = self._budget(msgs, trigger)
            if dropped is not None:
                steps.append("budget")
                tokens = self._tokens(msgs)
        reports.append(
            self._report(
                steps,
                before,
                tokens,
                trigger,
                summary=done,
                record=record,
                error=error,
                dropped=dropped,
                forced=force,
                elided=max(len(self.elided.elided) - elided_before, 0) if "elide" in steps else 0,
            )
        )

    def _elide(self, msgs: Sequence[Message]) -> bool:
        """Elide everything before the last ``keep_last`` messages; True when the view shrank."""
        upto = max(len(msgs) - self.config.keep_last, self._start)
        if upto <= self._elide_upto:
            return False
        before = self._tokens(msgs)
        self._elide_upto = upto
        return self._tokens(msgs) < before

    def _budget(self, msgs: Sequence[Message], trigger: Trigger) -> tuple[int, int] | None:
        """Cut the view's oldest messages (after the summary) down to the goal; the positions cut."""
        # the head will say which messages were cut: size it with the widest positions
        widest = self.offset + len(msgs)
        text = self._head((widest, widest))
        assert text is not None
        head = self.tally.count(Message("user", (summary_part(text, note=self._note),)))
        cut = compaction_boundary(msgs, self.tally, start=self._start, target=trigger.goal, head=head)
        if cut is None:
            return None
        old = self.offset + self._start
        self._gap = (self._gap[0] if self._gap is not None else old, self.offset + cut - 1)
        self._start = cut
        self._elide_upto = max(self._elide_upto, cut)
        return (old, self.offset + cut - 1)

    async def _summarize(self, msgs: Sequence[Message], trigger: Trigger, goal: int) -> Summary | None:
        plan = self._plan(msgs, trigger, goal)
        return None if plan is None else await self._run_summary(msgs, plan)

    def _plan(self, msgs: Sequence[Message], trigger: Trigger, goal: int) -> Plan | None:
        """What the next summary covers and reads, fixed now (a background summary runs later)."""
        cfg = self.config
        start = self._start
        end = compaction_boundary(msgs, self.tally, start=start, target=goal, head=cfg.summary_tokens + 64)
        if end is None:
            return None
        chunk = cfg.chunk_tokens or max(trigger.limit - 2 * cfg.summary_tokens, 1_024)
        chunks = summary_chunks(
            msgs,
            start,
            end,
            chunk,
            max_chunks=cfg.max_calls,
            counter=self.tally.counter,
            max_part_chars=cfg.max_part_chars,
        )
        previous = self._head()
        skipped = None
        if chunks[0][0] > start:
            skipped = (self.offset + start, self.offset + chunks[0][0] - 1)
            how = "recall can search them" if cfg.recall else "they are kept in the log"
            note = f"[Messages {skipped[0]}-{skipped[1]} were not summarized (too many at once); {how}.]"
            previous = note if previous is None else f"{previous}\n\n{note}"
        return Plan(start, end, tuple(chunks), previous, skipped, (start, self._summary, self._gap))

    async def _run_summary(self, msgs: Sequence[Message], plan: Plan) -> Summary:
        return await write_summary(self.summarizer, self.config, msgs, plan, self.offset)

    def _apply(self, msgs: Sequence[Message], done: Summary, before: int) -> CompactionRecord:
        self._summary = done.text
        self._embedded = False
        self._gap = None
        self._start = done.end
        self._elide_upto = max(self._elide_upto, done.end)
        record = CompactionRecord(
            id=new_id(),
            conversation_id=self.conversation_id,
            boundary=self.offset + done.end,
            previous_boundary=self.offset + done.start,
            summary=done.text,
            model=self.summarizer.name,
            usage=done.usage,
            tokens_before=before,
            tokens_after=self._tokens(msgs),
            created_at=CompactionRecord.now(),
        )
        self.record = record
        return record

    # -- background -----------------------------------------------------------------------------------
    def _launch(self, msgs: Sequence[Message], trigger: Trigger) -> None:
        if "summarize" not in self.config.strategies:
            return
        plan = self._plan(msgs, trigger, trigger.goal)
        if plan is not None:
            self._bg = asyncio.create_task(self._run_summary(msgs, plan))

    def _adopt(
        self,
        msgs: Sequence[Message],
        trigger: Trigger,
        tokens: int,
        records: list[CompactionRecord],
        reports: list[CompactionReport],
    ) -> str | None:
        """Take the finished background summary (report it); the failure text if it failed."""
        bg, self._bg = self._bg, None
        assert bg is not None
        error: str | None = None
        done: Summary | None = None
        try:
            done = bg.result()
        except SummaryFailed as exc:
            error = str(exc)
        except asyncio.CancelledError:
            error = "the background summary was cancelled"
        if done is not None and done.key != (self._start, self._summary, self._gap):
            done, error = None, "the background summary was overtaken by another compaction"
        record = None
        if done is not None:
            record = self._apply(msgs, done, tokens)
            records.append(record)
        after = self._tokens(msgs)
        steps: list[CompactionStep] = ["summarize"] if done is not None else []
        reports.append(
            self._report(
                steps, tokens, after, trigger, summary=done, record=record, error=error, background=True
            )
        )
        return None if done is not None or error is None or "overtaken" in error else error

    # -- report and recall ------------------------------------------------------------------------------
    def _report(
        self,
        steps: list[CompactionStep],
        before: int,
        after: int,
        trigger: Trigger,
        *,
        summary: Summary | None,
        record: CompactionRecord | None,
        error: str | None,
        dropped: tuple[int, int] | None = None,
        forced: bool = False,
        background: bool = False,
        elided: int = 0,
    ) -> CompactionReport:
        summarized = None
        if summary is not None:
            summarized = (self.offset + summary.start, self.offset + summary.end - 1)
        return CompactionReport(
            steps=tuple(steps),
            tokens_before=before,
            tokens_after=after,
            limit=trigger.limit,
            goal=trigger.goal,
            window=trigger.window,
            boundary=self.boundary,
            hidden=self.hidden,
            summarized=summarized,
            skipped=summary.skipped if summary is not None else None,
            elided=elided,
            elided_bytes=self.elided.bytes if elided else 0,
            dropped=dropped,
            error=error,
            fallback=error is not None,
            background=background,
            forced=forced,
            summarizer_calls=summary.calls if summary is not None else 0,
            truncated=summary is not None and summary.truncated,
            usage=summary.usage if summary is not None else Usage(),
            record_id=record.id if record is not None else None,
        )

    def recall_tool(
        self,
        load: Callable[[], Awaitable[Sequence[Message]]] | None = None,
        *,
        name: str = "recall",
        max_chars: int = 8_000,
    ) -> Tool[Any]:
        """The ``recall`` tool over this run's compacted part. ``load`` returns the conversation's
        original messages from position 0 (bound to one owner and conversation, e.g. a store
        load); without it the messages last given to ``prepare`` are searched (positions start
        at ``offset``)."""
        if load is None:

            async def in_memory() -> Sequence[Message]:
                return self._messages

            return recall_tool(
                in_memory, hidden=lambda: self.hidden, offset=self.offset, name=name, max_chars=max_chars
            )
        return recall_tool(load, hidden=lambda: self.hidden, name=name, max_chars=max_chars)
