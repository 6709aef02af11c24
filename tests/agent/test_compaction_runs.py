"""``Agent(compaction=...)`` through real runs on Memory, SQLite and PostgreSQL stores: a long
stored conversation compacted across several runs (each summary reads the previous one plus only
the messages that aged out since), the record as a derived view (deleting it restores the full
log), summarizer failures that never cost the user's turn, ``recall`` through a real run, the
streamed event, ``agent.compact`` and runs without a store."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import pytest

from tether import Agent, Message, ToolCall, UserError, assistant
from tether.agent import Compaction, CompactionEvent, StoreRecorder
from tether.history import check_history, split_summary
from tether.models import Profile
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import MemoryStore, Store

from .compaction_data import Summaries, task_conversation

WINDOW = 20_000
OWNER = "alice"


class Recording:
    """The agent's model: answers ``ok`` (or runs ``then``) and records every request's messages."""

    def __init__(self) -> None:
        self.seen: list[list[Message]] = []
        self.tools: list[list[str]] = []
        self.model = FunctionModel(self._reply, name="agent")

    def _reply(self, messages: Sequence[Message], info: FunctionInfo) -> str | Message:
        self.seen.append(list(messages))
        self.tools.append([t.name for t in info.tools])
        return "ok"


def _labels(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"^\[(\d+)\] ", text, re.M)]


async def _stored(store: Store, n: int, cid: str = "long") -> list[Message]:
    history, _ = task_conversation(n)
    await store.create(OWNER, cid)
    await store.append(OWNER, cid, history, expected_version=0)
    return history


def _agent(summaries: Summaries, model: Recording, **config: object) -> Agent[None, str]:
    compaction = Compaction(summarizer=summaries.model, window=WINDOW, **config)  # type: ignore[arg-type]
    return Agent(model.model, compaction=compaction)


async def test_a_stored_conversation_is_compacted_incrementally_across_runs(store: Store) -> None:
    await _stored(store, 301)
    summaries, model = Summaries(max_lines=40), Recording()
    agent = _agent(summaries, model, strategies=("summarize",))

    first = await agent.run("next step", store=store, owner=OWNER, conversation_id="long")
    assert len(first.compactions) == 1
    assert first.compactions[0].steps == ("summarize",)
    records = await store.records(OWNER, "long")
    assert len(records) == 1
    r1 = records[0]
    assert r1.id == first.compactions[0].record_id
    assert r1.previous_boundary == 0
    assert r1.tokens_after < r1.tokens_before
    sent = model.seen[-1]
    summary, _ = split_summary(sent[0])
    assert summary == r1.summary
    assert check_history(sent) == []
    assert len(sent) < 302  # the view, not the log
    assert (await store.load(OWNER, "long")).version == 303  # the log keeps everything

    # the conversation goes on: more turns stored, then another run
    more, _ = task_conversation(300, seed=4)
    loaded = await store.load(OWNER, "long")
    await store.append(OWNER, "long", more, expected_version=loaded.version)
    summaries.inputs.clear()
    second = await agent.run("and now?", store=store, owner=OWNER, conversation_id="long")
    records = await store.records(OWNER, "long")
    assert len(records) == 2
    r2 = records[1]
    assert r2.previous_boundary == r1.boundary < r2.boundary
    assert second.compactions[0].record_id == r2.id
    # incremental: the previous summary plus only the messages after its boundary
    text = summaries.inputs[0]
    assert "<previous-summary>" in text
    assert r1.summary.splitlines()[-1] in text
    labels = _labels(text.split("</previous-summary>")[1])
    assert min(labels) == r1.boundary  # position boundary = seq boundary + 1: the first not summarized
    assert max(labels) < r2.boundary
    assert split_summary(model.seen[-1][0])[0] == r2.summary

    # a third run under the threshold starts from the latest record and compacts nothing
    third = await agent.run("thanks", store=store, owner=OWNER, conversation_id="long")
    assert third.compactions == ()
    assert split_summary(model.seen[-1][0])[0] == r2.summary
    assert split_summary(third.messages[0])[0] == r2.summary  # result.messages is the view


async def test_deleting_the_record_restores_the_full_view(store: Store) -> None:
    history = await _stored(store, 41, cid="short")
    summaries, model = Summaries(), Recording()
    agent = _agent(summaries, model)
    prepared = await agent.compact(store=store, owner=OWNER, conversation_id="short")
    assert prepared.record is not None
    assert (await store.latest_record(OWNER, "short")) == prepared.record
    await agent.run("go on", store=store, owner=OWNER, conversation_id="short")
    assert split_summary(model.seen[-1][0])[0] == prepared.record.summary
    assert len(model.seen[-1]) < len(history)

    await store.delete_record(OWNER, "short", prepared.record.id)
    await agent.run("and again", store=store, owner=OWNER, conversation_id="short")
    full = model.seen[-1]
    assert split_summary(full[0])[0] is None
    assert full[: len(history)] == history  # the whole log, as stored


async def test_a_failing_summarizer_never_costs_the_users_turn(store: Store) -> None:
    await _stored(store, 301)
    summaries = Summaries(fail=ConnectionError("summarizer down"))
    model = Recording()
    agent = _agent(summaries, model, strategies=("summarize",))
    events: list[CompactionEvent] = []
    async with agent.run_stream("next", store=store, owner=OWNER, conversation_id="long") as stream:
        async for event in stream:
            if isinstance(event, CompactionEvent):
                events.append(event)
        result = await stream.get_result()
    assert result.output == "ok"
    report = result.compactions[0]
    assert report.fallback
    assert "ConnectionError: summarizer down" in (report.error or "")
    assert report.steps[0] == "elide"
    assert report.tokens_after <= report.limit
    assert [e.report for e in events] == [report]
    assert events[0].step == 1
    assert events[0].conversation_id == "long"
    assert "the summarizer failed" in events[0].report.line()
    assert await store.records(OWNER, "long") == []  # no summary, no record
    assert check_history(model.seen[-1]) == []
    assert (await store.load(OWNER, "long")).version == 303  # the turn is stored


async def test_recall_brings_back_a_summarized_original_through_a_real_run(store: Store) -> None:
    history, facts = task_conversation(301)
    await store.create(OWNER, "long")
    await store.append(OWNER, "long", history, expected_version=0)
    fact = next(f for f in facts if f.where == "tool" and f.position < 100)
    answers: list[str] = []

    def reply(messages: Sequence[Message], info: FunctionInfo) -> str | Message:
        assert "recall" in [t.name for t in info.tools]
        last = messages[-1]
        if last.role == "user":
            return assistant(ToolCall("r1", "recall", json.dumps({"query": fact.text})))
        answers.append(last.tool_results[0].text)
        return "found it"

    summaries = Summaries(max_lines=40)
    agent = Agent(
        FunctionModel(reply, name="agent"),
        compaction=Compaction(summarizer=summaries.model, window=WINDOW, strategies=("summarize",)),
    )
    result = await agent.run("what was that?", store=store, owner=OWNER, conversation_id="long")
    assert result.output == "found it"
    assert f"--- message {fact.position} (tool) ---" in answers[0]
    assert fact.text in answers[0]
    # recall reads only this owner's conversation
    await store.create("bob", "long")
    bob_history, bob_facts = task_conversation(301, seed=9)
    await store.append("bob", "long", bob_history, expected_version=0)
    fact = bob_facts[0]
    answers.clear()
    await agent.run("what was that?", store=store, owner=OWNER, conversation_id="long")
    assert "No message" in answers[0]


async def test_a_run_without_a_store_returns_the_view_and_continues_from_it() -> None:
    history, _ = task_conversation(301)
    summaries, model = Summaries(max_lines=40), Recording()
    agent = _agent(summaries, model, strategies=("summarize",))
    result = await agent.run("next", history=history)
    summary, _ = split_summary(result.messages[0])
    assert summary is not None
    assert result.compactions[0].record_id is not None
    assert len(result.messages) < len(history)
    assert check_history(list(result.messages)) == []
    assert result.new_messages[-1].text == "ok"
    summaries.inputs.clear()
    again = await agent.run("more", history=result.messages)
    assert summaries.inputs == []  # under the threshold: continued, not summarized again
    assert split_summary(again.messages[0])[0] == summary


async def test_recall_is_offered_from_the_start_and_can_be_left_out() -> None:
    model = Recording()
    agent = Agent(model.model, compaction=Compaction(window=WINDOW))
    await agent.run("hi")
    assert model.tools[-1] == ["recall"]
    plain = Agent(model.model, compaction=Compaction(window=WINDOW, recall=False))
    await plain.run("hi")
    assert model.tools[-1] == []

    async def recall(query: str) -> str:
        return query

    with pytest.raises(UserError, match="tool named 'recall'"):
        Agent(model.model, tools=[recall], compaction=Compaction())


async def test_a_pinned_recorder_starts_from_the_record_its_view_reaches(store: Store) -> None:
    await _stored(store, 301)
    summaries, model = Summaries(max_lines=40), Recording()
    agent = _agent(summaries, model, strategies=("summarize",))
    await agent.run("next", store=store, owner=OWNER, conversation_id="long")
    record = await store.latest_record(OWNER, "long")
    assert record is not None
    # a client whose view ends before the record's boundary: the record is not its view
    recorder = StoreRecorder(store, OWNER, "long", at_version=record.boundary - 1, on_conflict="fork")
    opened = await recorder.open_compacted(repair=True)
    assert opened.record is None
    assert opened.offset == 0
    assert len(opened.history) == record.boundary - 1
    recorder = StoreRecorder(store, OWNER, "long", at_version=record.boundary + 2)
    opened = await recorder.open_compacted(repair=True)
    assert opened.record == record
    assert opened.offset == record.boundary
    assert len(opened.history) == 2


async def test_agent_compact_needs_compaction_and_a_window() -> None:
    with pytest.raises(UserError, match="needs Agent\\(compaction="):
        await Agent(Recording().model).compact(history=task_conversation(9)[0])
    with pytest.raises(UserError, match="context window of model 'agent'"):
        Agent(Recording().model, compaction=Compaction())
    with pytest.raises(UserError, match="nothing to compact"):
        await Agent(Recording().model, compaction=Compaction(window=WINDOW)).compact(
            store=MemoryStore(), owner=OWNER, conversation_id="none"
        )


async def test_no_record_is_stored_when_positions_are_not_the_stored_seqs(store: Store) -> None:
    # an older turn whose side-effecting call never got its result: opening the conversation
    # inserts a closing tool message that is not stored, so later positions are off by one
    crashed = assistant(ToolCall("c1", "charge", "{}"), run_id="r1")
    history, _ = task_conversation(300)
    await store.create(OWNER, "shifted")
    await store.append(OWNER, "shifted", [history[0], crashed, *history[4:]], expected_version=0)
    await store.record_tool_started(OWNER, "shifted", "r1", "c1", "charge", "{}")
    summaries, model = Summaries(max_lines=40), Recording()
    agent = _agent(summaries, model, strategies=("summarize",))
    result = await agent.run("next", store=store, owner=OWNER, conversation_id="shifted")
    assert result.compactions
    assert result.compactions[0].record_id is not None  # the view was compacted in this run
    assert await store.records(OWNER, "shifted") == []  # but no record names a wrong seq
    assert check_history(model.seen[-1]) == []


LONG = "x" * 400_000


@pytest.mark.parametrize("model", [FunctionModel(lambda m, i: "ok", name="plain"), "openai:gpt-unknown-9"])
def test_compaction_without_a_known_window_is_refused_at_agent(model: FunctionModel | str) -> None:
    """Neither ``window=`` nor the profile gives a window: ``Agent(...)`` refuses, naming the fix,
    instead of runs that never compact (a 400,000-character history ran with ``compactions == ()``
    and no word). ADR 0021."""
    with pytest.raises(UserError, match=r"context window of model .*pass Compaction\(window=<tokens>\)"):
        Agent(model, compaction=Compaction())
    Agent(model, compaction=Compaction(window=WINDOW))  # the fix it names


async def test_a_profile_window_compacts_a_long_history() -> None:
    """The other side of the refusal: a window from the model's profile is used (the local
    model's 4096 tokens included), and a 400,000-character history is compacted."""

    seen: list[int] = []

    def reply(messages: Sequence[Message], info: FunctionInfo) -> str:
        seen.append(sum(len(m.text) for m in messages))
        return "ok"

    windowed = FunctionModel(
        reply, name="windowed", profile=Profile(provider="function", context_window=WINDOW)
    )
    agent = Agent(windowed, compaction=Compaction(strategies=("elide",)))
    history, _ = task_conversation(300)
    result = await agent.run("next", history=[*history, assistant(LONG)])
    assert result.compactions
    assert seen[-1] < 400_000
