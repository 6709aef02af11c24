"""The Store contract, run against MemoryStore, SQLiteStore and PostgresStore alike."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from msgspec.structs import replace

from tether import ConflictError, Message, NotFound, Text, ToolResult, UserError, assistant, tool, user
from tether.stores import ConversationInfo, Store

from .conftest import Clock, OpenStore
from .data import conversation

ALICE, BOB = "alice", "bob"


async def test_append_and_load_round_trip_every_part_kind(store: Store) -> None:
    cid = await store.create(ALICE)
    messages = conversation(23)
    version = await store.append(ALICE, cid, messages[:10], expected_version=0)
    assert version == 10
    assert await store.append(ALICE, cid, messages[10:]) == 23
    loaded = await store.load(ALICE, cid)
    assert loaded.messages == tuple(messages)
    assert (loaded.version, loaded.offset, loaded.corrupt, loaded.conversation_id) == (23, 0, (), cid)


async def test_create_ids_duplicates_and_exist_ok(store: Store) -> None:
    generated = await store.create(ALICE)
    assert uuid.UUID(generated).version == 7
    assert await store.create(ALICE, "chat-1") == "chat-1"
    await store.append(ALICE, "chat-1", [user("hi")])
    with pytest.raises(ConflictError) as info:
        await store.create(ALICE, "chat-1")
    assert info.value.actual == 1
    assert await store.create(ALICE, "chat-1", exist_ok=True) == "chat-1"
    assert (await store.load(ALICE, "chat-1")).version == 1  # exist_ok did not reset it


async def test_tail_and_since(store: Store) -> None:
    cid = await store.create(ALICE)
    messages = conversation(12)
    await store.append(ALICE, cid, messages)
    tail = await store.load(ALICE, cid, tail=5)
    assert (tail.messages, tail.offset, tail.version) == (tuple(messages[7:]), 7, 12)
    assert (await store.load(ALICE, cid, tail=50)).messages == tuple(messages)
    assert (await store.load(ALICE, cid, tail=0)).messages == ()
    since = await store.load(ALICE, cid, since=9)
    assert (since.messages, since.offset) == (tuple(messages[9:]), 9)
    assert (await store.load(ALICE, cid, since=12)).messages == ()
    with pytest.raises(UserError, match="beyond"):
        await store.load(ALICE, cid, since=13)
    with pytest.raises(UserError, match="not both"):
        await store.load(ALICE, cid, tail=1, since=1)
    with pytest.raises(UserError, match="tail"):
        await store.load(ALICE, cid, tail=-1)


async def test_expected_version_conflict_writes_nothing(store: Store) -> None:
    cid = await store.create(ALICE)
    await store.append(ALICE, cid, [user("one"), assistant("two")], expected_version=0)
    with pytest.raises(ConflictError) as info:
        await store.append(ALICE, cid, [user("stale")], expected_version=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert cid in str(info.value)
    with pytest.raises(ConflictError):
        await store.append(ALICE, cid, [], expected_version=0)  # an empty batch still checks
    assert await store.append(ALICE, cid, [], expected_version=2) == 2
    assert [m.text for m in (await store.load(ALICE, cid)).messages] == ["one", "two"]


async def test_bad_batches_are_rejected_whole(store: Store) -> None:
    cid = await store.create(ALICE)
    bad: list[object] = [user("fine"), {"role": "user"}]
    with pytest.raises(UserError, match="item 1 is a dict"):
        await store.append(ALICE, cid, bad)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="sequence"):
        await store.append(ALICE, cid, "text")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="expected_version"):
        await store.append(ALICE, cid, [user("x")], expected_version=-1)
    with pytest.raises(UserError, match="owner"):
        await store.append("", cid, [user("x")])
    assert (await store.load(ALICE, cid)).version == 0


async def test_listing_is_newest_first_with_summary(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    first = await store.create(ALICE, "first")
    clock.advance(10)
    second = await store.create(ALICE, "second")
    clock.advance(10)
    await store.append(ALICE, first, [user("Where is my parcel?"), assistant("Checking", model="m-1")])
    clock.advance(10)
    await store.append(ALICE, first, [assistant("It is here", model="m-2"), user("thanks")])
    listing = await store.conversations(ALICE)
    assert [c.conversation_id for c in listing] == [first, second]
    top = listing[0]
    assert (top.preview, top.last_model, top.message_count, top.version) == (
        "Where is my parcel?",
        "m-2",
        4,
        4,
    )
    assert top.updated_at > top.created_at
    assert (listing[1].preview, listing[1].last_model, listing[1].message_count) == (None, None, 0)
    assert [c.conversation_id for c in await store.conversations(ALICE, limit=1, offset=1)] == [second]
    assert await store.info(ALICE, first) == top
    long = await store.create(ALICE)
    await store.append(ALICE, long, [assistant("no user yet", model="m")])
    await store.append(ALICE, long, [user("x" * 500)])
    info = await store.info(ALICE, long)
    assert info.preview == "x" * 200


async def test_empty_or_conflicting_append_leaves_the_listing_alone(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    cid = await store.create(ALICE)
    await store.append(ALICE, cid, [user("first words"), assistant("hello", model="m-1")])
    before = await store.info(ALICE, cid)
    clock.advance(60)
    assert await store.append(ALICE, cid, [], expected_version=2) == 2
    with pytest.raises(ConflictError):
        await store.append(ALICE, cid, [user("late"), assistant("x", model="m-2")], expected_version=1)
    after = await store.info(ALICE, cid)
    assert (after.updated_at, after.last_model, after.preview, after.version) == (
        before.updated_at,
        "m-1",
        "first words",
        2,
    )
    clock.advance(60)
    await store.append(ALICE, cid, [user("second words")], expected_version=2)
    moved = await store.info(ALICE, cid)
    assert (moved.updated_at, moved.preview) == (before.updated_at + timedelta(seconds=120), "first words")


async def test_fork_copies_a_prefix_and_leaves_the_original(store: Store) -> None:
    cid = await store.create(ALICE)
    messages = conversation(10)
    await store.append(ALICE, cid, messages)
    forked = await store.fork(ALICE, cid, 4)
    assert (await store.load(ALICE, forked)).messages == tuple(messages[:4])
    info = await store.info(ALICE, forked)
    assert (info.forked_from, info.version, info.last_model) == ((cid, 4), 4, "model-1")
    await store.append(ALICE, forked, [user("diverge")], expected_version=4)
    assert (await store.load(ALICE, cid)).messages == tuple(messages)
    whole = await store.fork(ALICE, cid, new_id="copy")
    assert whole == "copy"
    assert (await store.load(ALICE, "copy")).version == 10
    with pytest.raises(ConflictError):
        await store.fork(ALICE, cid, 2, new_id="copy")
    with pytest.raises(UserError, match="at_version"):
        await store.fork(ALICE, cid, 11)


async def test_delete(store: Store) -> None:
    cid = await store.create(ALICE)
    await store.append(ALICE, cid, [user("bye")])
    await store.record_tool_started(ALICE, cid, "run", "c1", "rm", "{}")
    await store.delete(ALICE, cid)
    with pytest.raises(NotFound):
        await store.load(ALICE, cid)
    with pytest.raises(NotFound):
        await store.delete(ALICE, cid)
    assert await store.conversations(ALICE) == []
    await store.create(ALICE, cid)  # the id can be used again, empty
    assert await store.pending_tool_effects(ALICE, cid) == []


async def test_purge_by_idle_age_with_hook(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    old_a = await store.create(ALICE, "old-a")
    await store.append(ALICE, old_a, [user("old question")])
    await store.create(ALICE, "old-keep")
    await store.create(BOB, "old-b")
    clock.advance(3 * 86400)
    fresh = await store.create(ALICE, "fresh")
    clock.advance(3600)
    seen: list[tuple[str, tuple[Message, ...]]] = []

    async def on_expire(info: ConversationInfo, messages: tuple[Message, ...]) -> bool:
        seen.append((info.conversation_id, messages))
        return info.conversation_id != "old-keep"

    assert await store.purge(timedelta(days=1), owner=ALICE, on_expire=on_expire) == 1
    assert sorted(cid for cid, _ in seen) == ["old-a", "old-keep"]
    assert next(m for cid, m in seen if cid == "old-a")[0].text == "old question"
    assert {c.conversation_id for c in await store.conversations(ALICE)} == {"old-keep", fresh}
    assert [c.conversation_id for c in await store.conversations(BOB)] == ["old-b"]
    assert await store.purge(timedelta(days=1)) == 2  # every owner, no hook
    assert [c.conversation_id for c in await store.conversations(ALICE)] == [fresh]
    assert await store.conversations(BOB) == []


async def test_wrong_owner_is_indistinguishable_from_missing(store: Store) -> None:
    cid = await store.create(ALICE, "secret")
    await store.append(ALICE, cid, [user("private")])
    await store.record_tool_started(ALICE, cid, "run", "c1", "pay", '{"amount": 5}')
    calls: dict[str, Callable[[str, str], Awaitable[object]]] = {
        "append": lambda o, c: store.append(o, c, [user("intrude")]),
        "append_expected": lambda o, c: store.append(o, c, [user("intrude")], expected_version=1),
        "load": lambda o, c: store.load(o, c),
        "load_tail": lambda o, c: store.load(o, c, tail=1),
        "info": lambda o, c: store.info(o, c),
        "fork": lambda o, c: store.fork(o, c, 1),
        "delete": lambda o, c: store.delete(o, c),
        "record_tool_started": lambda o, c: store.record_tool_started(o, c, "run", "c2", "pay", "{}"),
        "record_tool_finished": lambda o, c: store.record_tool_finished(o, c, "run", "c1"),
        "pending_tool_effects": lambda o, c: store.pending_tool_effects(o, c),
    }
    for name, call in calls.items():
        with pytest.raises(NotFound) as foreign:
            await call(BOB, "secret")
        with pytest.raises(NotFound) as missing:
            await call(BOB, "absent")
        assert str(foreign.value) == str(missing.value).replace("absent", "secret"), name
    assert await store.conversations(BOB) == []
    assert await store.purge(timedelta(0), owner=BOB) == 0
    # the same id under another owner is another conversation
    assert await store.create(BOB, "secret") == "secret"
    assert (await store.load(BOB, "secret")).version == 0
    assert [m.text for m in (await store.load(ALICE, "secret")).messages] == ["private"]
    assert len(await store.pending_tool_effects(ALICE, "secret")) == 1


async def test_tool_effect_ledger(store: Store) -> None:
    cid = await store.create(ALICE)
    assert await store.record_tool_started(ALICE, cid, "run-1", "call-a", "send_email", '{"to": "x"}')
    assert await store.record_tool_started(ALICE, cid, "run-1", "call-b", "charge", '{"eur": 5}')
    assert not await store.record_tool_started(ALICE, cid, "run-1", "call-a", "send_email", "{}")
    await store.record_tool_finished(ALICE, cid, "run-1", "call-b", failed=True)
    with pytest.raises(NotFound, match="call-zz"):
        await store.record_tool_finished(ALICE, cid, "run-1", "call-zz")
    with pytest.raises(NotFound):
        await store.record_tool_finished(ALICE, cid, "run-2", "call-a")  # started by run-1
    pending = await store.pending_tool_effects(ALICE, cid)
    assert [(e.call_id, e.run_id, e.tool_name, e.arguments, e.finished, e.failed) for e in pending] == [
        ("call-a", "run-1", "send_email", '{"to": "x"}', False, False),
        ("call-b", "run-1", "charge", '{"eur": 5}', True, True),
    ]
    assert all(e.conversation_id == cid for e in pending)
    # storing the result message closes the entry, atomically with the append
    await store.append(ALICE, cid, [tool(ToolResult("call-b", "charge", (Text("declined"),), failed=True))])
    assert [e.call_id for e in await store.pending_tool_effects(ALICE, cid)] == ["call-a"]
    await store.append(
        ALICE, cid, [tool(ToolResult("call-a", "send_email", (Text("outcome unknown"),), synthesized=True))]
    )
    assert await store.pending_tool_effects(ALICE, cid) == []
    # a closed entry (its result is stored) does not block a later call of the run reusing the id
    assert await store.record_tool_started(ALICE, cid, "run-1", "call-a", "send_email", '{"to": "y"}')
    pending = await store.pending_tool_effects(ALICE, cid)
    assert [(e.call_id, e.arguments, e.finished) for e in pending] == [("call-a", '{"to": "y"}', False)]
    assert not await store.record_tool_started(ALICE, cid, "run-1", "call-a", "send_email", "{}")


async def test_ledger_entries_are_per_run_so_reused_call_ids_are_new_calls(store: Store) -> None:
    # many models number call ids per response: every run's first call may be "call_1"
    cid = await store.create(ALICE)
    assert await store.record_tool_started(ALICE, cid, "run-1", "call_1", "charge", '{"eur": 1}')
    await store.record_tool_finished(ALICE, cid, "run-1", "call_1")
    done = tool(ToolResult("call_1", "charge", (Text("charged"),)))
    await store.append(ALICE, cid, [replace(done, run_id="run-1")])
    assert await store.pending_tool_effects(ALICE, cid) == []
    # a later run's call with the reused id is a new entry, not "already started"
    assert await store.record_tool_started(ALICE, cid, "run-2", "call_1", "charge", '{"eur": 2}')
    assert not await store.record_tool_started(ALICE, cid, "run-2", "call_1", "charge", '{"eur": 2}')
    pending = await store.pending_tool_effects(ALICE, cid)
    assert [(e.run_id, e.call_id, e.arguments) for e in pending] == [("run-2", "call_1", '{"eur": 2}')]
    # a result stamped with another run does not close it; the run's own result does
    await store.append(ALICE, cid, [replace(done, run_id="run-9")])
    assert [e.run_id for e in await store.pending_tool_effects(ALICE, cid)] == ["run-2"]
    await store.record_tool_finished(ALICE, cid, "run-2", "call_1")
    await store.append(ALICE, cid, [replace(done, run_id="run-2")])
    assert await store.pending_tool_effects(ALICE, cid) == []
    # an unstamped closure (a resumed run's ledger closure) closes the open entry of any run
    assert await store.record_tool_started(ALICE, cid, "run-3", "call_1", "charge", "{}")
    await store.append(ALICE, cid, [done])
    assert await store.pending_tool_effects(ALICE, cid) == []


async def test_concurrent_appends_in_one_process_lose_nothing(store: Store) -> None:
    cid = await store.create(ALICE)

    async def writer(k: int) -> int:
        conflicts = 0
        version = 0
        for i in range(15):
            while True:
                try:
                    version = await store.append(ALICE, cid, [user(f"{k}:{i}")], expected_version=version)
                    break
                except ConflictError as exc:
                    conflicts += 1
                    version = exc.actual
        return conflicts

    await asyncio.gather(*(writer(k) for k in range(6)))
    texts = [m.text for m in (await store.load(ALICE, cid)).messages]
    assert len(texts) == 90
    assert sorted(texts) == sorted(f"{k}:{i}" for k in range(6) for i in range(15))
    for k in range(6):  # each writer's messages in its own order
        mine = [t for t in texts if t.startswith(f"{k}:")]
        assert mine == [f"{k}:{i}" for i in range(15)]


async def test_bad_arguments_are_user_errors_on_every_store(store: Store) -> None:
    cid = await store.create("alice")
    with pytest.raises(UserError):
        await store.record_tool_started("alice", cid, "run", "call", "tool", 42)  # type: ignore[arg-type]
    with pytest.raises(UserError):
        await store.conversations("alice", limit=-1)
    with pytest.raises(UserError):
        await store.purge(timedelta(days=1), owner="")


async def test_a_deleted_conversation_is_not_created_again_implicitly(store: Store) -> None:
    """A deleted conversation stays deleted: ``create(..., exist_ok=True)`` (what a run does when
    the conversation it was started on is missing) refuses its id; an explicit ``create`` of the
    id is a new, empty conversation."""
    cid = await store.create(ALICE)
    await store.append(ALICE, cid, [user("hi")])
    await store.delete(ALICE, cid)
    with pytest.raises(ConflictError, match="was deleted"):
        await store.create(ALICE, cid, exist_ok=True)
    with pytest.raises(NotFound):
        await store.info(ALICE, cid)
    assert await store.create(BOB, cid, exist_ok=True) == cid  # another owner's id
    fork = await store.fork(BOB, cid)
    await store.delete(BOB, fork)
    with pytest.raises(ConflictError, match="was deleted"):
        await store.create(BOB, fork, exist_ok=True)
    assert await store.create(ALICE, cid) == cid
    assert (await store.load(ALICE, cid)).version == 0
    assert await store.create(ALICE, cid, exist_ok=True) == cid


async def test_a_purged_conversation_is_not_created_again_implicitly(open_store: OpenStore) -> None:
    clock = Clock()
    store = open_store(clock=clock)
    cid = await store.create(ALICE)
    clock.t += 10 * 86400
    assert await store.purge(timedelta(days=1)) == 1
    with pytest.raises(ConflictError, match="was deleted"):
        await store.create(ALICE, cid, exist_ok=True)


async def test_a_run_racing_a_delete_never_brings_the_conversation_back(store: Store) -> None:
    """A run's recorder (load, then create the conversation if it is missing, then append) and a
    delete, at the same moment and one after the other: the conversation stays deleted."""
    from tether.agent import StoreRecorder

    for i in range(16):
        cid = await store.create(ALICE)
        await store.append(ALICE, cid, [user("before")])
        recorder = StoreRecorder(store, ALICE, cid)

        async def run(recorder: StoreRecorder = recorder) -> None:
            await recorder.open(repair=True)
            await recorder.record([user("after"), assistant("answer")])

        async def delete(cid: str = cid) -> None:
            await store.delete(ALICE, cid)

        if i % 2:
            await delete()
            outcomes = [await asyncio.gather(run(), return_exceptions=True)]
        else:
            outcomes = [await asyncio.gather(run(), delete(), return_exceptions=True)]
        for outcome in (o for batch in outcomes for o in batch):
            assert outcome is None or isinstance(outcome, ConflictError | NotFound), repr(outcome)
        with pytest.raises(NotFound):
            await store.load(ALICE, cid)
