"""Recall and retention: the ``recall`` tool brings back the originals of what compaction
summarized or elided (bounded, with positions, owner-scoped by its loader); a stored
conversation resumes from its record on every store; planted facts are measured through
repeated compaction with a deterministic summarizer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, Message, ToolCall, assistant, user
from tether.agent import Compaction, Compactor, recall_tool
from tether.history import check_history
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import (
    CompactionRecord,
    Keyring,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    Store,
    dumps_record,
    loads_record,
)

from .compaction_data import Fact, Summaries, feed, retention, task_conversation

WINDOW = 20_000


def _agent_model() -> FunctionModel:
    return FunctionModel(lambda m, i: "unused", name="agent")


async def _compacted(n: int, **config: Any) -> tuple[Compactor, list[Message], list[Fact], Sequence[Message]]:
    summaries = Summaries(max_lines=40)
    compactor = Compactor(
        Compaction(summarizer=summaries.model, **config), _agent_model(), conversation_id="c"
    )
    history, facts = task_conversation(n)
    prepared = await feed(compactor, history, window=WINDOW)
    return compactor, history, facts, prepared[-1].messages


async def _recall(tool: Any, query: str, limit: int = 5) -> str:
    return await tool.invoke(None, {"query": query, "limit": limit})  # type: ignore[arg-type]


# -- recall ------------------------------------------------------------------------------------------
async def test_recall_returns_the_original_of_a_summarized_fact_with_its_position() -> None:
    compactor, _, facts, view = await _compacted(801)
    tool = compactor.recall_tool()
    assert tool.name == "recall"
    assert tool.definition.parameters["required"] == ["query"]
    gone = [f for f in facts if f.where == "tool" and f not in retention(view, facts)]
    assert gone, "the view should have lost some tool-output facts"
    fact = gone[0]
    text = await _recall(tool, fact.text, limit=3)
    assert f"--- message {fact.position} (tool) ---" in text
    assert fact.text in text
    assert text.splitlines()[0].startswith(f"1 of the {compactor.hidden:,} searched messages match")


async def test_recall_searches_only_what_the_view_does_not_show() -> None:
    _, facts = task_conversation(2_001)
    single = ("ticket", "path", "decision", "url")  # facts that are one search term
    last = next(f for f in facts if f.where == "user" and f.kind in single and f.position > 700)
    compactor, history, _, view = await _compacted(last.position + 1)  # it is the newest message
    assert last in retention(view, facts)
    assert last.position >= compactor.hidden
    text = await _recall(compactor.recall_tool(), last.text)
    assert text.startswith("No message among the")
    fresh = Compactor(Compaction(), _agent_model(), conversation_id="c")
    await fresh.prepare(history[:10], window=WINDOW)
    assert (await _recall(fresh.recall_tool(), "anything")).startswith("Nothing in this conversation")


async def test_recall_answers_are_bounded() -> None:
    compactor, *_ = await _compacted(801, keep_last=4)
    tool = compactor.recall_tool(max_chars=1_000)
    text = await _recall(tool, "settings connection service backoff latency", limit=8)
    hits = text.count("--- message ")
    assert hits == 8
    assert len(text) <= 1_000  # headers and excerpts together
    assert "[characters " in text  # long originals come as excerpts, and say which part


async def test_recall_answers_stay_within_max_chars_whatever_the_query_and_limit() -> None:
    """The model chooses the query and the limit: a huge query is not echoed back whole, and
    neither it nor a limit out of range takes the answer past its bound."""
    long_text = "alpha " * 20_000
    messages = [
        user(f"alpha beta {i} " + long_text) if i % 2 == 0 else assistant(f"alpha gamma {i} " + long_text)
        for i in range(40)
    ]

    async def load() -> list[Message]:
        return messages

    tool = recall_tool(load, max_chars=2_000)
    for query, limit in (("alpha", 100), ("alpha", -3), ("alpha beta 7", 8), ("x" * 100_000, 5)):
        text = await _recall(tool, query, limit=limit)
        assert len(text) <= 2_000, (query[:20], limit, len(text))
    found = await _recall(tool, "alpha beta 38", limit=8)
    assert found.count("--- message ") == 8
    assert "--- message 38 (user) ---" in found
    assert "beta 38" in found.split("--- message 38 (user) ---")[1]  # the match stays in the excerpt
    missed = await _recall(tool, "zeta " * 20_000)
    assert missed.startswith("No message among the 40 searched matches 'zeta zeta")
    assert "(100,000 characters)" in missed


async def test_recall_is_an_ordinary_tool_an_agent_can_call() -> None:
    compactor, _, facts, _ = await _compacted(801)
    fact = next(f for f in facts if f.where == "tool" and f.position < compactor.hidden)

    def script(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        if messages[-1].role == "user":
            return assistant(ToolCall("r1", "recall", f'{{"query": "{fact.text}"}}'))
        return "found: " + messages[-1].tool_results[0].text

    agent = Agent(FunctionModel(script), tools=[compactor.recall_tool()])
    result = await agent.run("what was the exact error?")
    assert fact.text in result.output
    assert f"message {fact.position}" in result.output


def test_recall_tool_checks_its_arguments() -> None:
    with pytest.raises(Exception, match="load"):
        recall_tool(None)  # type: ignore[arg-type]

    async def load() -> list[Message]:
        return []

    with pytest.raises(Exception, match="max_chars"):
        recall_tool(load, max_chars=10)


# -- retention -----------------------------------------------------------------------------------------------
async def test_retention_of_planted_facts_through_repeated_compaction() -> None:
    """The measurement the bench repeats with a real summarizer: how many planted facts the
    compacted view still holds, and how many ``recall`` brings back."""
    summaries = Summaries(max_lines=60)
    compactor = Compactor(Compaction(summarizer=summaries.model), _agent_model(), conversation_id="c")
    history, facts = task_conversation(2_001)
    prepared = await feed(compactor, history, window=WINDOW)
    records = [r for p in prepared for r in p.records]
    view = list(prepared[-1].messages)
    assert len(records) >= 5
    assert check_history(view) == []
    kept = retention(view, facts)
    # what the view shows verbatim keeps all its facts; the scripted summary keeps user and
    # assistant facts of its last 60 lines, never tool output
    assert all(f in kept for f in facts if f.position >= compactor.hidden)
    assert not any(f in kept for f in facts if f.where == "tool" and f.position < compactor.hidden)
    tool = compactor.recall_tool()
    recalled = 0
    lost = [f for f in facts if f not in kept]
    for fact in lost:
        text = await _recall(tool, fact.text, limit=1)
        recalled += f"--- message {fact.position} " in text and fact.text in text
    share = len(kept) / len(facts)
    print(f"\nretention: {len(kept)}/{len(facts)} = {share:.0%} in view; recall {recalled}/{len(lost)}")
    assert 0.05 < share < 1
    assert recalled == len(lost)


# -- stored conversations ------------------------------------------------------------------------------------
BACKENDS = ["memory", "sqlite", "sqlite-encrypted", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    kind = request.param
    if kind == "memory":
        yield MemoryStore()
        return
    if kind.startswith("sqlite"):
        keyring = Keyring({"k": Keyring.generate_key()}, current="k") if kind == "sqlite-encrypted" else None
        s = SQLiteStore(tmp_path / "t.db", keyring=keyring)
        yield s
        await s.close()
        return
    s = PostgresStore(request.getfixturevalue("pg_dsn"), schema=request.getfixturevalue("pg_schema"))
    yield s
    await s.close()


async def test_a_stored_conversation_resumes_from_its_record_and_recalls_its_owners_log(store: Store) -> None:
    history, facts = task_conversation(601)
    cid = await store.create("alice")
    await store.append("alice", cid, history, expected_version=0)
    other = await store.create("bob", cid)  # the same id, another owner, other facts
    await store.append("bob", other, [*task_conversation(41, seed=9)[0]], expected_version=0)
    summaries = Summaries(max_lines=40)
    cfg = Compaction(summarizer=summaries.model, strategies=("summarize",))
    loaded = await store.load("alice", cid)
    first = Compactor(cfg, _agent_model(), conversation_id=cid)
    prepared = await first.prepare(list(loaded.messages), window=WINDOW)
    record = prepared.record
    assert record is not None
    saved = dumps_record(record)  # what the store's record table would keep

    # the next run loads only the messages after the boundary
    since = await store.load("alice", cid, since=record.boundary)
    assert since.offset == record.boundary
    record = loads_record(saved)
    second = Compactor(cfg, _agent_model(), conversation_id=cid, record=record, offset=since.offset)
    resumed = await second.prepare(list(since.messages), window=WINDOW)
    assert list(resumed.messages) == list(prepared.messages)
    assert resumed.records == ()
    assert check_history(list(resumed.messages)) == []

    async def alice_log() -> Sequence[Message]:
        return (await store.load("alice", cid)).messages

    tool = second.recall_tool(alice_log)
    fact = next(f for f in facts if f.position < record.boundary and f.where == "tool")
    text = await _recall(tool, fact.text)
    assert f"--- message {fact.position} (tool) ---" in text
    bob_fact = task_conversation(41, seed=9)[1][0]
    assert "No message" in await _recall(tool, bob_fact.text)


def test_records_roundtrip_their_json_shape() -> None:
    record = CompactionRecord(
        id="0190-r",
        conversation_id="c",
        boundary=120,
        previous_boundary=40,
        summary="Task: ...",
        model="anthropic:claude-sonnet-4-5",
        tokens_before=160_000,
        tokens_after=80_000,
        created_at=CompactionRecord.now(),
    )
    data = record.to_dict()
    assert data["type"] == "compaction"
    assert data["conversationId"] == "c"
    assert data["previousBoundary"] == 40
    assert data["version"] == 1
    assert loads_record(dumps_record(record)) == record
