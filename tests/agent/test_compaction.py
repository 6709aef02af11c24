"""The Compactor the run loop calls once per request: the trigger, incremental summaries and
their records, the elide-then-summarize order, fallbacks when the summarizer fails, background
compaction, forced compaction, a compacted view passed back in, and the configuration."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence

import pytest

from tether import Message, Text, UserError, assistant, system, user
from tether.agent import Compaction, CompactionReport, Compactor, MessagesView
from tether.history import SUMMARY_OPEN, approximate_counter, check_history, split_summary
from tether.messages import Usage
from tether.models import ModelResponse, ToolDefinition
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import CompactionRecord, dumps_record, loads_record

from .compaction_data import Summaries, feed, task_conversation

WINDOW = 20_000  # tokens: 80% = 16,000; each 4-message turn of task_conversation is ~600


def _agent_model() -> FunctionModel:
    def never(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise AssertionError("the agent's model must not be asked to summarize here")

    return FunctionModel(never, name="agent")


def _compactor(summaries: Summaries, **config: object) -> Compactor:
    cfg = Compaction(summarizer=summaries.model, **config)  # type: ignore[arg-type]
    return Compactor(cfg, _agent_model(), conversation_id="conv-1")


def _positions(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"^\[(\d+)\] ", text, re.M)]


# -- the trigger -------------------------------------------------------------------------------------
async def test_under_the_threshold_the_messages_go_out_as_they_are() -> None:
    summaries = Summaries()
    compactor = _compactor(summaries)
    history, _ = task_conversation(40)
    prepared = await compactor.prepare(history, window=WINDOW)
    assert prepared.messages is history
    assert prepared.records == ()
    assert prepared.report is None
    assert summaries.inputs == []
    assert not compactor.compacted


async def test_no_window_means_no_compaction_and_config_window_overrides() -> None:
    summaries = Summaries()
    history, _ = task_conversation(400)
    compactor = _compactor(summaries, strategies=("summarize",))
    assert (await compactor.prepare(history)).messages is history
    with pytest.raises(UserError, match="context window"):
        await compactor.prepare(history, force=True)
    compactor = _compactor(summaries, strategies=("summarize",), window=WINDOW)
    prepared = await compactor.prepare(history, window=10**9)  # the configured window wins
    assert prepared.record is not None
    assert prepared.report is not None
    assert prepared.report.window == WINDOW


async def test_checking_before_each_request_counts_only_the_new_messages() -> None:
    counted: list[Message] = []
    approximate = approximate_counter()

    def counter(message: Message) -> int:
        counted.append(message)
        return approximate(message)

    summaries = Summaries(max_lines=40)
    compactor = _compactor(summaries, counter=counter)
    history, _ = task_conversation(801)
    grown: list[Message] = []
    for m in history:
        grown.append(m)
        if m.role not in ("user", "tool"):
            continue
        before = len(counted)
        prepared = await compactor.prepare(MessagesView(grown), window=WINDOW)  # as the run passes it
        if not prepared.reports:  # a plain check: the one new message (or two), nothing else
            assert len(counted) - before <= 2
    assert compactor.compacted
    with pytest.raises(UserError, match="one Compactor per run"):
        await compactor.prepare(history[:10], window=WINDOW)


async def test_instructions_and_tools_count_against_the_window() -> None:
    compactor = _compactor(Summaries(), strategies=("summarize",))
    tools = [ToolDefinition("read_file", "Read a file " * 50, {"type": "object", "properties": {}})]
    overhead = compactor.overhead("You are a careful engineer. " * 500, tools)
    assert overhead > 4_500
    assert compactor.overhead(None) == 0
    history, _ = task_conversation(81)  # about 12,000 tokens: under 16,000 alone
    assert (await compactor.prepare(history, window=WINDOW)).report is None
    prepared = await compactor.prepare(history, window=WINDOW, overhead=overhead)
    assert prepared.report is not None
    assert prepared.report.limit == 16_000 - overhead


# -- summaries and records --------------------------------------------------------------------------------
async def test_a_summary_stands_for_everything_before_a_pair_safe_boundary() -> None:
    summaries = Summaries()
    compactor = _compactor(summaries, strategies=("summarize",))
    history, _ = task_conversation(201)
    prepared = await compactor.prepare(history, window=WINDOW)
    record, report = prepared.record, prepared.report
    assert record is not None
    assert report is not None
    view = list(prepared.messages)
    assert check_history(view) == []
    summary, rest = split_summary(view[0])
    assert summary == record.summary
    assert [*([rest] if rest else []), *view[1:]] == history[record.boundary :]
    assert record.previous_boundary == 0
    assert record.conversation_id == "conv-1"
    assert record.model == "scripted-summarizer"
    assert record.usage.output_tokens > 0
    assert record.tokens_before == report.tokens_before > report.limit
    assert record.tokens_after == report.tokens_after <= report.goal
    assert report.steps == ("summarize",)
    assert report.summarized == (0, record.boundary - 1)
    assert report.record_id == record.id
    assert summaries.instructions[0] == Compaction().prompt
    assert loads_record(dumps_record(record)) == record


async def test_each_summary_reads_the_previous_one_plus_only_the_messages_aged_out_since() -> None:
    summaries = Summaries(max_lines=40)  # a summary of bounded size, as summary_tokens asks
    compactor = _compactor(summaries, strategies=("summarize",))
    history, _ = task_conversation(1_201)
    records = [r for p in await feed(compactor, history, window=WINDOW) for r in p.records]
    assert len(records) >= 5
    assert len(summaries.inputs) == len(records)
    for k, (record, text) in enumerate(zip(records, summaries.inputs, strict=True)):
        positions = _positions(text.split("<messages", 1)[1])
        assert positions == list(range(record.previous_boundary, record.boundary)), k
        if k == 0:
            assert "<previous-summary>" not in text
            continue
        assert record.previous_boundary == records[k - 1].boundary
        assert f"<previous-summary>\n{records[k - 1].summary}\n</previous-summary>" in text
    # the cost of a compaction does not grow with the conversation: the last reads about as
    # many messages as the second
    sizes = [r.boundary - r.previous_boundary for r in records[1:]]
    assert max(sizes) <= 2 * min(sizes)


async def test_elide_runs_first_and_the_summarizer_only_when_still_over_the_target() -> None:
    summaries = Summaries()
    compactor = _compactor(summaries, keep_last=4)
    history, _ = task_conversation(123, result_bytes=6_000)
    prepared = await compactor.prepare(history, window=WINDOW)
    report = prepared.report
    assert report is not None
    assert report.steps == ("elide",)
    assert summaries.inputs == []
    assert prepared.records == ()
    assert report.elided > 20
    assert report.elided_bytes > 20 * 6_000
    assert report.tokens_after <= report.goal
    view = list(prepared.messages)
    assert check_history(view) == []
    assert "[elided: 6,000 bytes of read_file output; use recall to fetch it]" in view[2].tool_results[0].text
    assert view[-2] is history[-2]  # the recent window is untouched, the same objects


# -- failures never cost the turn ---------------------------------------------------------------------------
async def test_a_failing_summarizer_falls_back_to_elide_and_the_report_says_why() -> None:
    summaries = Summaries(fail=RuntimeError("provider overloaded"))
    compactor = _compactor(summaries, strategies=("summarize",), keep_last=4)
    history, _ = task_conversation(131, result_bytes=6_000)
    prepared = await compactor.prepare(history, window=WINDOW)
    report = prepared.report
    assert report is not None
    assert report.error == "the summarizer failed: RuntimeError: provider overloaded"
    assert report.fallback
    assert report.steps == ("elide",)
    assert prepared.records == ()
    assert report.tokens_after <= report.limit
    assert check_history(list(prepared.messages)) == []
    assert report.line().endswith("(the summarizer failed: RuntimeError: provider overloaded)")


async def test_when_eliding_is_not_enough_the_budget_cuts_and_says_what_it_left_out() -> None:
    summaries = Summaries(fail=ValueError("bad gateway"))
    compactor = _compactor(summaries, keep_last=4)
    history, _ = task_conversation(601, result_bytes=100)  # nothing worth eliding
    prepared = await compactor.prepare(history, window=WINDOW)
    report = prepared.report
    assert report is not None
    assert report.steps == ("budget",)
    assert report.dropped is not None
    first, last = report.dropped
    assert first == 0
    assert report.boundary == last + 1
    assert report.tokens_after <= report.goal
    view = list(prepared.messages)
    assert check_history(view) == []
    note, rest = split_summary(view[0])
    assert note is not None
    assert f"Messages 0-{last} of this conversation were left out" in note
    assert [*([rest] if rest else []), *view[1:]] == history[last + 1 :]


async def test_a_summarizer_that_hangs_times_out_and_the_run_goes_on() -> None:
    async def hang(messages: Sequence[Message], info: FunctionInfo) -> str:
        await asyncio.sleep(30)
        return "never"

    cfg = Compaction(summarizer=FunctionModel(hang), timeout=0.05, strategies=("summarize",))
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(301)
    prepared = await compactor.prepare(history, window=WINDOW)
    assert prepared.report is not None
    assert prepared.report.error == "the summarizer timed out after 0.05 s"
    assert prepared.report.fallback
    assert prepared.report.steps[-1] in ("elide", "budget")
    assert prepared.report.tokens_after <= prepared.report.limit


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (ModelResponse(assistant("no"), "content_filter", Usage(1, 1)), "stopped with 'content_filter'"),
        ("   ", "returned no text"),
    ],
)
async def test_a_refused_or_empty_summary_is_a_failure(reply: object, error: str) -> None:
    cfg = Compaction(summarizer=FunctionModel(lambda m, i: reply), strategies=("summarize",))  # type: ignore[arg-type,return-value]
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(301)
    prepared = await compactor.prepare(history, window=WINDOW)
    assert prepared.report is not None
    assert prepared.report.error is not None
    assert error in prepared.report.error
    assert prepared.records == ()


async def test_a_summary_cut_at_its_token_limit_is_kept_and_reported() -> None:
    cut = ModelResponse(assistant("Task: migrate DEP-4471; decisions: advisory lo"), "length", Usage(9, 400))
    cfg = Compaction(summarizer=FunctionModel(lambda m, i: cut), strategies=("summarize",))
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(301)
    prepared = await compactor.prepare(history, window=WINDOW)
    assert prepared.record is not None
    assert prepared.record.summary == "Task: migrate DEP-4471; decisions: advisory lo"
    assert prepared.report is not None
    assert prepared.report.truncated
    assert prepared.report.error is None
    assert prepared.report.line().endswith("(the summary was cut at its token limit)")


async def test_a_summary_far_over_its_token_limit_is_a_failure_and_the_view_still_shrinks() -> None:
    """A summarizer that ignores ``max_tokens`` (a local model, a function) would make the view
    larger than the log it stands for, and the request would pass the window: it is a failure,
    the fallbacks run, and no record is made."""
    asked: list[int | None] = []

    def verbose(messages: Sequence[Message], info: FunctionInfo) -> str:
        asked.append(info.settings.max_tokens if info.settings is not None else None)
        return "Task: migrate DEP-4471. " + "and more detail " * 5_000

    cfg = Compaction(summarizer=FunctionModel(verbose), strategies=("summarize",), summary_tokens=500)
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(301)
    before = approximate_counter()
    prepared = await compactor.prepare(history, window=WINDOW)
    assert asked == [500]
    assert prepared.record is None
    report = prepared.report
    assert report is not None
    assert report.fallback
    assert report.error is not None
    assert re.fullmatch(
        r"the summary was [\d,]+ tokens, more than 2 times summary_tokens \(500\)", report.error
    )
    assert "summarize" not in report.steps
    view = list(prepared.messages)
    assert sum(before(m) for m in view) <= report.limit < sum(before(m) for m in history)
    assert check_history(view) == []
    # a summary within twice its limit (about 930 tokens: the counter is approximate) is kept
    fair = Compaction(
        summarizer=FunctionModel(lambda m, i: "word " * 550), strategies=("summarize",), summary_tokens=500
    )
    kept = await Compactor(fair, _agent_model(), conversation_id="c").prepare(history, window=WINDOW)
    assert kept.record is not None
    # counted over twice its limit, but the summarizer reports writing within it (its tokenizer
    # is denser than the approximate count): it honoured max_tokens, so the summary is kept
    dense = "Summary: DEP-4471 migrated; retry kept at 3; next, review part 9. " * 55  # ~1,240 counted

    def honest(messages: Sequence[Message], info: FunctionInfo) -> Message:
        return Message("assistant", (Text(dense),), usage=Usage(output_tokens=495))

    assert approximate_counter()(Message("user", (Text(dense),))) > 2 * 500
    trusted = Compaction(summarizer=FunctionModel(honest), strategies=("summarize",), summary_tokens=500)
    adopted = await Compactor(trusted, _agent_model(), conversation_id="c").prepare(history, window=WINDOW)
    assert adopted.record is not None
    assert adopted.record.summary == dense.strip()


# -- forced, background, passed back in ---------------------------------------------------------------------
async def test_forced_compaction_summarizes_all_but_the_newest_turn() -> None:
    summaries = Summaries()
    compactor = _compactor(summaries, strategies=("summarize",))
    history, _ = task_conversation(40)
    prepared = await compactor.prepare(history, window=WINDOW, force=True)
    assert prepared.record is not None
    assert prepared.report is not None
    assert prepared.report.forced
    assert prepared.record.boundary == 39  # the last message: an assistant answer
    view = list(prepared.messages)
    assert [m.role for m in view] == ["user", "assistant"]
    assert view[1] is history[39]


async def test_background_summary_starts_at_the_soft_threshold_and_is_adopted_later() -> None:
    release = asyncio.Event()
    seen: list[str] = []

    async def slow(messages: Sequence[Message], info: FunctionInfo) -> str:
        seen.append(messages[-1].text)
        await release.wait()
        return "background summary"

    cfg = Compaction(summarizer=FunctionModel(slow), soft_threshold=0.65)
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(600)
    grown: list[Message] = []
    launched_at = None
    adopted = None
    for m in history:
        grown.append(m)
        if m.role not in ("user", "tool"):
            continue
        prepared = await compactor.prepare(grown, window=WINDOW)
        await asyncio.sleep(0)
        if seen and launched_at is None:
            launched_at = len(grown)
            assert prepared.messages is grown  # the run goes on with the full view meanwhile
            release.set()
        if prepared.record is not None:
            adopted = prepared
            break
    assert launched_at is not None
    assert adopted is not None
    assert adopted.report is not None
    assert adopted.report.background
    assert adopted.report.tokens_before < adopted.report.limit  # adopted before it was due
    assert split_summary(adopted.messages[0])[0] == "background summary"
    await compactor.aclose()


async def test_aclose_cancels_a_background_summary() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def forever(messages: Sequence[Message], info: FunctionInfo) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "x"

    cfg = Compaction(summarizer=FunctionModel(forever), soft_threshold=0.6)
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(601)
    grown: list[Message] = []
    for m in history:
        grown.append(m)
        await compactor.prepare(grown, window=WINDOW)
        await asyncio.sleep(0)
        if started.is_set():
            break
    assert started.is_set()
    await compactor.aclose()
    assert cancelled.is_set()


async def test_a_failed_background_summary_is_not_retried_in_the_same_request() -> None:
    calls: list[int] = []

    async def failing(messages: Sequence[Message], info: FunctionInfo) -> str:
        calls.append(1)
        raise ConnectionError("reset by peer")

    cfg = Compaction(summarizer=FunctionModel(failing), soft_threshold=0.6, keep_last=4)
    compactor = Compactor(cfg, _agent_model(), conversation_id="c")
    history, _ = task_conversation(601)
    grown: list[Message] = []
    both = 0
    for m in history:
        grown.append(m)
        if m.role not in ("user", "tool"):
            continue
        before = len(calls)
        prepared = await compactor.prepare(grown, window=WINDOW)
        background = [r for r in prepared.reports if r.background]
        assert all(r.error == "the summarizer failed: ConnectionError: reset by peer" for r in background)
        if background and len(prepared.reports) == 2:  # adopted a failure, then had to compact
            both += 1
            assert len(calls) - before <= 1  # only the background attempt itself
            assert prepared.reports[1].fallback
            assert prepared.reports[1].error == background[0].error
        await asyncio.sleep(0)
    assert both
    await compactor.aclose()


async def test_a_compacted_view_passed_back_as_history_is_continued_not_resummarized() -> None:
    summaries = Summaries(max_lines=40)
    first = _compactor(summaries, strategies=("summarize",))
    history, _ = task_conversation(201)
    view = list((await first.prepare(history, window=WINDOW)).messages)
    first_summary = split_summary(view[0])[0]
    asked = len(summaries.inputs)
    more, _ = task_conversation(201, seed=1)
    continued = view + more
    second = _compactor(summaries, strategies=("summarize",))
    prepared = await second.prepare(continued, window=WINDOW)
    assert prepared.record is not None
    text = summaries.inputs[asked]
    assert text.startswith(f"<previous-summary>\n{first_summary}\n</previous-summary>")
    assert text.count(SUMMARY_OPEN) == 0
    # the summary's own message (before an assistant turn) is not rendered again
    assert _positions(text.split("<messages", 1)[1])[0] == (0 if split_summary(view[0])[1] else 1)
    out = list(prepared.messages)
    assert sum(1 for m in out for p in m.parts if type(p) is Text and p.text.startswith(SUMMARY_OPEN)) == 1
    assert check_history(out) == []


async def test_system_messages_are_never_in_the_view() -> None:
    summaries = Summaries()
    compactor = _compactor(summaries, strategies=("summarize",))
    history, _ = task_conversation(301)
    history = [system("imported instructions"), *history[:150], system("another"), *history[150:]]
    prepared = await compactor.prepare(history, window=WINDOW)
    assert all(m.role != "system" for m in prepared.messages)
    small = await _compactor(summaries).prepare([system("s"), user("hi")], window=WINDOW)
    assert [m.role for m in small.messages] == ["user"]


# -- a stored conversation resumed from its record -------------------------------------------
async def test_a_new_run_resumes_from_the_record_with_the_messages_after_its_boundary() -> None:
    summaries = Summaries()
    history, _ = task_conversation(301)
    first = _compactor(summaries, strategies=("summarize",))
    before = (await first.prepare(history, window=WINDOW)).messages
    record = loads_record(dumps_record(first.record))  # type: ignore[arg-type]
    b = record.boundary

    def resumed(record: CompactionRecord | None, offset: int = 0) -> Compactor:
        return Compactor(Compaction(), _agent_model(), conversation_id="conv-1", record=record, offset=offset)

    # loaded from the store since the boundary (Loaded.offset == record.boundary)
    assert list(resumed(record, b).view(history[b:])) == list(before)
    # loaded whole
    assert list(resumed(record).view(history)) == list(before)
    # without the record, the full log is the view again
    assert resumed(None).view(history) is history
    with pytest.raises(UserError, match="after the record's boundary"):
        resumed(record, b + 1).view(history[b + 1 :])
    with pytest.raises(UserError, match="belongs to conversation"):
        Compactor(Compaction(), _agent_model(), conversation_id="other", record=record)


# -- configuration and report ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"strategies": ("elide", "shrink")}, "unknown compaction strategy 'shrink'"),
        ({"strategies": "summarize"}, "tuple"),
        ({"threshold": 0.4, "target": 0.5}, "target"),
        ({"threshold": 1.2}, "threshold"),
        ({"soft_threshold": 0.9}, "soft_threshold"),
        ({"window": 100, "reserve": 100}, "reserve"),
        ({"timeout": 0}, "timeout"),
        ({"prompt": " "}, "prompt"),
        ({"keep_last": -1}, "keep_last"),
        ({"summary_tokens": 0}, "summary_tokens"),
        ({"summarizer": 3}, "summarizer"),
    ],
)
def test_bad_configuration_is_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UserError, match=match):
        Compaction(**kwargs)  # type: ignore[arg-type]


def test_the_default_prompt_asks_for_what_a_continuation_needs() -> None:
    prompt = Compaction().prompt
    for needed in ("constraint", "Decisions", "file path", "URL", "error message", "next step", "[42]"):
        assert needed in prompt


def test_report_serializes() -> None:
    report = CompactionReport(
        steps=("elide", "summarize"),
        tokens_before=20_000,
        tokens_after=9_000,
        limit=16_000,
        goal=10_000,
        window=20_000,
        boundary=120,
        hidden=140,
        summarized=(40, 119),
        elided=3,
        usage=Usage(900, 120),
        record_id="r",
    )
    data = json.loads(report.to_json())
    assert data["summarized"] == [40, 119]
    assert data["usage"] == {"inputTokens": 900, "outputTokens": 120}
    assert report.line() == (
        "compacted 20,000 -> 9,000 tokens: summarized messages 40-119, elided 3 old outputs"
    )


def test_record_rejects_impossible_values() -> None:
    now = CompactionRecord.now()
    with pytest.raises(UserError, match="boundary"):
        CompactionRecord(id="r", conversation_id="c", boundary=0, summary="s", created_at=now)
    with pytest.raises(UserError, match="previous_boundary"):
        CompactionRecord(
            id="r", conversation_id="c", boundary=3, previous_boundary=3, summary="s", created_at=now
        )
    with pytest.raises(UserError, match="summary"):
        CompactionRecord(id="r", conversation_id="c", boundary=3, summary="", created_at=now)
