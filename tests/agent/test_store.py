"""Runs against a store: load, run, append; partial evidence; the tool-effect ledger.

Every test runs with MemoryStore, SQLiteStore on a real file and PostgresStore on the real server
(its own schema, dropped afterwards); the crash test kills a child process with SIGKILL while a
side-effecting tool runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from msgspec.structs import replace

from tether import (
    ConflictError,
    HistoryError,
    Message,
    ModelError,
    RunCanceled,
    RunError,
    Text,
    ToolCall,
    ToolResult,
    UserError,
    assistant,
    tool,
    user,
)
from tether.agent import (
    CANCELED_WHILE_RUNNING_TEXT,
    UNKNOWN_OUTCOME_TEXT,
    Agent,
    StoreRecorder,
    Tool,
    ToolCanceled,
)
from tether.agent._batch import run_jobs
from tether.agent._ledger import ledger_closures
from tether.history import INTERRUPTED_TEXT, check_history
from tether.models.testing import FunctionInfo, FunctionModel, TestModel
from tether.stores import MemoryStore, SQLiteStore, Store, ToolEffect

from .scripts import Script, calls

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"store-test-secret-0123456789"


class _Crash(BaseException):
    """Stands in for the process dying: nothing in the run catches it."""


async def test_run_appends_new_messages_and_chains(store: Store) -> None:
    script = Script("first", "second")
    agent = Agent(script.model)
    r1 = await agent.run("one", store=store, owner="alice")
    loaded = await store.load("alice", r1.conversation_id)
    assert loaded.messages == r1.messages
    assert loaded.version == 2
    r2 = await agent.run("two", store=store, owner="alice", conversation_id=r1.conversation_id)
    assert [m.text for m in script.seen[1]] == ["one", "first", "two"]
    loaded = await store.load("alice", r1.conversation_id)
    assert loaded.messages == r2.messages
    assert loaded.version == 4
    assert r2.conversation_id == r1.conversation_id


async def test_new_conversation_id_given_by_the_caller_is_created(store: Store) -> None:
    result = await Agent(Script("hi").model).run("x", store=store, owner="o", conversation_id="chat-1")
    assert result.conversation_id == "chat-1"
    assert (await store.load("o", "chat-1")).version == 2


async def test_owner_scoping(store: Store) -> None:
    script = Script("private answer", "bob answer")
    agent = Agent(script.model)
    alice = await agent.run("alice secret", store=store, owner="alice")
    await agent.run("hello", store=store, owner="bob", conversation_id=alice.conversation_id)
    assert [m.text for m in script.seen[1]] == ["hello"]  # bob never sees alice's messages
    assert (await store.load("alice", alice.conversation_id)).version == 2


async def test_failure_appends_partial_evidence_and_resumes(store: Store) -> None:
    def noop() -> str:
        return "ok"

    def fail(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise ModelError("overloaded", stage="model")

    script = Script(calls(("c1", "noop", "{}")), fail, "recovered")
    agent = Agent(script.model, tools=[noop])
    with pytest.raises(ModelError) as info:
        await agent.run("go", store=store, owner="o", conversation_id="conv")
    partial = info.value.partial
    assert partial is not None
    stored = await store.load("o", "conv")
    assert stored.messages == partial.messages
    resumed = await agent.run(store=store, owner="o", conversation_id="conv")
    assert resumed.output == "recovered"
    assert (await store.load("o", "conv")).messages == resumed.messages


async def test_conflicting_writer_fails_the_append_with_partial(store: Store) -> None:
    async def meddle() -> str:
        await store.append("o", "conv", [user("someone else")])
        return "meddled"

    script = Script(calls(("c1", "meddle", "{}")), "done")
    await store.create("o", "conv")
    with pytest.raises(RunError) as info:
        await Agent(script.model, tools=[meddle]).run("go", store=store, owner="o", conversation_id="conv")
    assert info.value.stage == "store"
    assert isinstance(info.value.__cause__, ConflictError)
    assert info.value.partial is not None
    # the step after the meddling is refused before the next (paid) request (ADR 0015)
    assert info.value.partial.new_messages[-1].tool_results[0].text == "meddled"
    assert len(script.seen) == 1
    stored = (await store.load("o", "conv")).messages
    assert [(m.role, m.text) for m in stored] == [("user", "go"), ("assistant", ""), ("user", "someone else")]


async def test_side_effecting_tool_checkpoints_then_records_started_and_finished(store: Store) -> None:
    seen_at_start: list[int] = []

    async def charge(amount: int) -> str:
        seen_at_start.append((await store.load("o", "conv")).version)
        assert [e.call_id for e in await store.pending_tool_effects("o", "conv")] == ["c1"]
        return f"charged {amount}"

    script = Script(calls(("c1", "charge", '{"amount": 3}')), "done")
    agent = Agent(script.model, tools=[Tool(charge, idempotent=False)])
    result = await agent.run("pay", store=store, owner="o", conversation_id="conv")
    assert seen_at_start == [2]  # the prompt and the requesting turn were stored first
    assert (await store.load("o", "conv")).messages == result.messages
    assert await store.pending_tool_effects("o", "conv") == []


async def test_crash_after_start_is_closed_as_unknown_and_never_rerun(store: Store) -> None:
    runs: list[str] = []

    def charge(amount: int) -> str:
        runs.append("charged")
        raise _Crash

    def lookup() -> str:
        return "idempotent"

    script = Script(calls(("c1", "charge", '{"amount": 3}'), ("c2", "lookup", "{}")), "resumed answer")
    agent = Agent(script.model, tools=[Tool(charge, idempotent=False, in_thread=False), lookup])
    with pytest.raises(_Crash):
        await agent.run("pay", store=store, owner="o", conversation_id="conv")
    assert runs == ["charged"]
    effects = await store.pending_tool_effects("o", "conv")
    assert [(e.call_id, e.finished) for e in effects] == [("c1", False)]
    resumed = await agent.run(store=store, owner="o", conversation_id="conv")
    assert runs == ["charged"]  # not re-executed
    results = {r.call_id: r for m in resumed.messages for r in m.tool_results}
    assert results["c1"].text == UNKNOWN_OUTCOME_TEXT
    assert results["c1"].synthesized
    assert results["c2"].text == INTERRUPTED_TEXT  # the idempotent sibling: a neutral repair
    assert resumed.output == "resumed answer"
    assert check_history(resumed.messages) == []
    assert await store.pending_tool_effects("o", "conv") == []
    stored = await store.load("o", "conv")
    assert stored.messages[-1].text == "resumed answer"
    assert check_history(stored.messages) == []  # the stored log holds both results, not only c1's
    closing = stored.messages[2]
    assert [(r.call_id, r.text) for r in closing.tool_results] == [
        ("c1", UNKNOWN_OUTCOME_TEXT),
        ("c2", INTERRUPTED_TEXT),
    ]  # one tool message, in call order
    assert not resumed.repair.changed  # the run itself repaired nothing
    assert script.seen[-1][2] == closing


async def test_store_needs_owner_and_no_history(store: Store) -> None:

    agent = Agent(Script().model)
    with pytest.raises(UserError, match="owner"):
        await agent.run("x", store=store)
    with pytest.raises(UserError, match="either history"):
        await agent.run("x", store=store, owner="o", history=[user("h")])


CHILD = """
import asyncio, os, signal, sys
from tether import ToolCall, assistant
from tether.agent import Agent, Tool
from tether.models.testing import FunctionModel
from tether.stores import SQLiteStore

db, marker = sys.argv[1], sys.argv[2]

def transfer(amount: int) -> str:
    with open(marker, "a") as f:
        f.write("sent\\n")
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"

def reply(messages, info):
    return assistant(ToolCall("pay-1", "transfer", '{"amount": 10}'))

async def main():
    store = SQLiteStore(db)
    agent = Agent(FunctionModel(reply), tools=[Tool(transfer, idempotent=False)])
    await agent.run("pay ten", store=store, owner="o", conversation_id="conv")

asyncio.run(main())
"""


def _again(amount: int) -> str:
    return "again"


def _seen(q: str) -> str:
    return "seen"


async def test_sigkill_during_a_side_effect_then_resume(tmp_path: Path) -> None:
    db, marker, child = tmp_path / "c.db", tmp_path / "marker", tmp_path / "child.py"
    child.write_text(textwrap.dedent(CHILD))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(child), str(db), str(marker)], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert marker.read_text() == "sent\n"
    store = SQLiteStore(db)
    try:
        stored = await store.load("o", "conv")
        assert [m.role for m in stored.messages] == ["user", "assistant"]
        agent = Agent(
            FunctionModel(lambda m, i: "I could not confirm the transfer"),
            tools=[Tool(_again, name="transfer", idempotent=False)],
        )
        resumed = await agent.run(store=store, owner="o", conversation_id="conv")
        closing = resumed.messages[2].tool_results[0]
        assert closing.call_id == "pay-1"
        assert closing.text == UNKNOWN_OUTCOME_TEXT
        assert "interrupted before execution" not in closing.text
        assert resumed.output == "I could not confirm the transfer"
        assert marker.read_text() == "sent\n"  # the transfer was not repeated
        assert await store.pending_tool_effects("o", "conv") == []
    finally:
        await store.close()


async def test_approval_round_trip_through_the_store(store: Store) -> None:
    sent: list[int] = []

    def transfer(amount: int) -> str:
        sent.append(amount)
        return "sent"

    script = Script(calls(("c1", "transfer", '{"amount": 9}')), "transfer done")
    agent = Agent(
        script.model, tools=[Tool(transfer, requires_approval=True, idempotent=False)], approval_secret=SECRET
    )
    first = await agent.run("pay", store=store, owner="o", conversation_id="conv")
    assert first.deferred is not None
    assert (await store.load("o", "conv")).messages[-1].tool_calls[0].id == "c1"
    second = await agent.run(
        store=store, owner="o", conversation_id="conv", deferred=first.deferred.approve_all()
    )
    assert sent == [9]
    assert second.output == "transfer done"
    assert (await store.load("o", "conv")).messages == second.messages
    assert await store.pending_tool_effects("o", "conv") == []


def test_ledger_closures_for_finished_and_answered_effects() -> None:
    turn = assistant(ToolCall("a", "pay", "{}"), ToolCall("b", "pay", "{}"), ToolCall("c", "log", "{}"))
    answered = tool(ToolResult("b", "pay", (Text("done"),)))
    history = [user("q"), turn, answered, user("later")]
    now = datetime.now(UTC)
    effects = [
        ToolEffect("conv", "r", "a", "pay", "{}", now, finished=True, failed=True),
        ToolEffect("conv", "r", "b", "pay", "{}", now),
    ]
    closures = ledger_closures(history, effects)
    assert len(closures) == 1
    at, message = closures[0]
    assert at == 3  # right after the call's block of tool messages, before the later user turn
    (result,) = message.tool_results
    assert result.call_id == "a"
    assert result.failed
    assert result.synthesized
    assert "finished with a failure" in result.text
    assert message.run_id is None


async def test_tool_canceled_closes_a_started_side_effect_as_unknown(store: Store) -> None:
    entered = asyncio.Event()

    async def charge(amount: int) -> str:
        entered.set()
        await asyncio.sleep(10)
        return "never"

    async def stop() -> str:
        await entered.wait()
        raise ToolCanceled("user pressed stop")

    script = Script(calls(("c1", "charge", '{"amount": 3}'), ("c2", "stop", "{}")), "after")
    agent = Agent(script.model, tools=[Tool(charge, idempotent=False), stop])
    with pytest.raises(RunCanceled) as info:
        await agent.run("pay", store=store, owner="o", conversation_id="conv")
    partial = info.value.partial
    assert partial is not None
    results = {r.call_id: r for r in partial.messages[-1].tool_results}
    assert results["c1"].text == CANCELED_WHILE_RUNNING_TEXT
    assert "interrupted before execution" not in results["c1"].text
    assert results["c1"].synthesized
    assert "user pressed stop" in results["c2"].text
    assert "interrupted before execution" not in results["c2"].text
    stored = await store.load("o", "conv")
    assert stored.messages == partial.messages
    assert check_history(stored.messages) == []
    assert await store.pending_tool_effects("o", "conv") == []


async def test_a_later_run_reusing_a_call_id_runs_its_side_effect(store: Store) -> None:
    # TestModel numbers call ids per instance: every run's first call is "test_1"
    charged: list[int] = []

    def charge(amount: int) -> str:
        charged.append(amount)
        return "charged"

    def agent() -> Agent[None, str]:
        return Agent(TestModel(), tools=[Tool(charge, idempotent=False)])

    first = await agent().run("pay", store=store, owner="o", conversation_id="conv")
    second = await agent().run("pay again", store=store, owner="o", conversation_id="conv")
    assert len(charged) == 2  # the second run's call is a new call, not "started before"
    (result,) = [r for m in second.new_messages for r in m.tool_results]
    assert result.call_id == next(r.call_id for m in first.new_messages for r in m.tool_results)
    assert (result.text, result.synthesized) == ("charged", False)
    assert result.text != UNKNOWN_OUTCOME_TEXT
    stored = await store.load("o", "conv")
    assert stored.messages == second.messages
    assert check_history(stored.messages) == []
    assert await store.pending_tool_effects("o", "conv") == []


async def test_run_jobs_without_jobs_is_a_no_op() -> None:
    await run_jobs([])  # asyncio.wait would raise "Set of Tasks/Futures is empty"


async def test_every_call_suppressed_by_the_ledger_ends_in_a_valid_history(store: Store) -> None:
    # another process of the same run already started this call and never stored its result
    await store.create("o", "conv")
    assert await store.record_tool_started("o", "conv", "run-1", "c1", "charge", '{"amount": 1}')
    charged: list[int] = []

    def charge(amount: int) -> str:
        charged.append(amount)
        return "charged"

    script = Script(calls(("c1", "charge", '{"amount": 1}')), "done")
    agent = Agent(script.model, tools=[Tool(charge, idempotent=False)])
    result = await agent.run("pay", store=store, owner="o", conversation_id="conv", run_id="run-1")
    assert charged == []
    assert result.output == "done"
    (closing,) = [r for m in result.new_messages for r in m.tool_results]
    assert (closing.call_id, closing.text, closing.synthesized) == ("c1", UNKNOWN_OUTCOME_TEXT, True)
    stored = await store.load("o", "conv")
    assert stored.messages == result.messages
    assert check_history(stored.messages) == []


async def test_a_finished_side_effect_is_stored_before_the_next_model_call(store: Store) -> None:
    def charge(amount: int) -> str:
        return f"charged {amount}"

    def look(q: str) -> str:
        return f"saw {q}"

    def crash(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise _Crash

    turn = calls(("c1", "look", '{"q": "card"}'), ("c2", "charge", '{"amount": 5}'))
    agent = Agent(Script(turn, crash).model, tools=[look, Tool(charge, idempotent=False)])
    with pytest.raises(_Crash):
        await agent.run("pay", store=store, owner="o", conversation_id="conv")
    stored = await store.load("o", "conv")
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool"]
    assert [(r.call_id, r.text) for r in stored.messages[2].tool_results] == [
        ("c1", "saw card"),
        ("c2", "charged 5"),
    ]
    assert await store.pending_tool_effects("o", "conv") == []
    script = Script("done")
    resumed = await Agent(script.model, tools=[look, Tool(charge, idempotent=False)]).run(
        store=store, owner="o", conversation_id="conv"
    )
    assert script.seen[0] == list(stored.messages)  # the real results, no lost-result closure
    assert not resumed.repair.changed


async def test_a_bare_pending_turn_is_continued_without_a_prompt(store: Store) -> None:
    # a run stores its turn before running its tools (ADR 0015): a process that died there left
    # this; continuing without a prompt runs the calls, not a new model request for the turn
    turn = calls(("c1", "look", "{}"))
    await store.create("o", "conv")
    await store.append("o", "conv", [user("q"), turn], expected_version=0)
    script = Script("answer")
    result = await Agent(script.model, tools=[Tool(lambda: "x", name="look")]).run(
        store=store, owner="o", conversation_id="conv"
    )
    assert result.output == "answer"
    assert len(script.seen) == 1
    assert [m.role for m in script.seen[0]] == ["user", "assistant", "tool"]
    stored = await store.load("o", "conv")
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool", "assistant"]
    assert stored.messages[2].tool_results[0].text == "x"


async def test_a_bare_gated_turn_is_left_for_deferred_but_closed_for_a_prompt(store: Store) -> None:
    turn = calls(("c1", "look", "{}"))
    await store.create("o", "conv")
    await store.append("o", "conv", [user("q"), turn], expected_version=0)
    agent = Agent(Script("answer").model, tools=[Tool(lambda: "x", name="look", requires_approval=True)])
    with pytest.raises(HistoryError, match="no results"):
        await agent.run(store=store, owner="o", conversation_id="conv")
    assert (await store.load("o", "conv")).version == 2  # nothing stored: deferred= may answer it
    result = await agent.run("go on", store=store, owner="o", conversation_id="conv")
    assert not result.repair.changed
    stored = await store.load("o", "conv")
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert stored.messages[2].tool_results[0].text == INTERRUPTED_TEXT
    assert check_history(stored.messages) == []


MIXED_CHILD = """
import asyncio, os, signal, sys
from tether import ToolCall, assistant
from tether.agent import Agent, Tool
from tether.models.testing import FunctionModel
from tether.stores import SQLiteStore

db, marker = sys.argv[1], sys.argv[2]

def look(q: str) -> str:
    return "seen"

def charge(amount: int) -> str:
    with open(marker, "a") as f:
        f.write("charged\\n")
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"

def reply(messages, info):
    return assistant(ToolCall("c1", "look", '{"q": "a"}'), ToolCall("c2", "charge", '{"amount": 5}'))

async def main():
    agent = Agent(FunctionModel(reply), tools=[look, Tool(charge, idempotent=False, in_thread=False)])
    await agent.run("pay", store=SQLiteStore(db), owner="o", conversation_id="conv")

asyncio.run(main())
"""


async def test_sigkill_in_a_mixed_batch_resumes_from_a_valid_stored_log(tmp_path: Path) -> None:
    db, marker, child = tmp_path / "c.db", tmp_path / "marker", tmp_path / "child.py"
    child.write_text(textwrap.dedent(MIXED_CHILD))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(child), str(db), str(marker)], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    store = SQLiteStore(db)
    try:
        assert [m.role for m in (await store.load("o", "conv")).messages] == ["user", "assistant"]
        script = Script("final")
        agent = Agent(
            script.model,
            tools=[
                Tool(_seen, name="look"),
                Tool(_again, name="charge", idempotent=False),
            ],
        )
        resumed = await agent.run("continue", store=store, owner="o", conversation_id="conv")
        assert not resumed.repair.changed
        stored = await store.load("o", "conv")
        assert check_history(stored.messages) == []
        assert [m.role for m in stored.messages] == ["user", "assistant", "tool", "user", "assistant"]
        assert [(r.call_id, r.text) for r in stored.messages[2].tool_results] == [
            ("c1", INTERRUPTED_TEXT),
            ("c2", UNKNOWN_OUTCOME_TEXT),
        ]
        assert script.seen[0][2] == stored.messages[2]
        assert marker.read_text() == "charged\n"
        assert await store.pending_tool_effects("o", "conv") == []
    finally:
        await store.close()


def test_ledger_closures_match_the_run_that_made_the_call() -> None:
    # run A's "c1" was started and lost; run B reused the id "c1" and got its result
    turn_a = replace(assistant(ToolCall("c1", "pay", "{}")), run_id="A")
    turn_b = replace(assistant(ToolCall("c1", "pay", "{}")), run_id="B")
    answered_b = replace(tool(ToolResult("c1", "pay", (Text("paid"),))), run_id="B")
    history = [user("q"), turn_a, user("again"), turn_b, answered_b, user("later")]
    effect = ToolEffect("conv", "A", "c1", "pay", "{}", datetime.now(UTC))
    closures = ledger_closures(history, [effect])
    assert [(at, [r.text for r in m.tool_results]) for at, m in closures] == [(2, [UNKNOWN_OUTCOME_TEXT])]
    effect_b = ToolEffect("conv", "B", "c1", "pay", "{}", datetime.now(UTC))
    assert ledger_closures(history, [effect_b]) == []  # B's call is answered


async def test_a_run_that_fails_before_its_first_turn_keeps_the_prompt(store: Store) -> None:
    def broken(messages: Sequence[Message], info: FunctionInfo) -> str:
        raise RuntimeError("401 invalid api key")

    with pytest.raises(ModelError) as info:
        await Agent(FunctionModel(broken)).run("hello", store=store, owner="o", conversation_id="fresh")
    assert info.value.partial is None  # nothing completed
    # the prompt was stored before the request (ADR 0015): what the user said is never lost
    assert [m.text for m in (await store.load("o", "fresh")).messages] == ["hello"]
    resumed = await Agent(Script("hi").model).run(store=store, owner="o", conversation_id="fresh")
    assert [m.text for m in resumed.messages] == ["hello", "hi"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"write_timeout": "30"},
        {"write_timeout": True},
        {"write_timeout": float("nan")},
        {"write_timeout": 0},
        {"on_conflict": "merge"},
        {"at_version": -1},
    ],
)
def test_bad_store_recorder_arguments_raise_user_error_naming_them(kwargs: dict[str, object]) -> None:
    with pytest.raises(UserError, match=next(iter(kwargs))):
        StoreRecorder(MemoryStore(), "o", "c", **kwargs)  # type: ignore[arg-type]
