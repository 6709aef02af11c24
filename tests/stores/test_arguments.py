"""Bad arguments are the same ``UserError`` on every store, naming the argument — never a
``UnicodeEncodeError``, an ``OverflowError``, a ``TypeError`` or a driver error — and good ones
give the same answer on every store."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest

from tether import ConflictError, Message, Text, ToolCall, Usage, UserError, assistant, user
from tether.stores import Keyring, MemoryStore, PostgresStore, SQLiteStore, Store

from .conftest import Clock, OpenStore, durable

ALICE = "alice"
LONE = "\ud800"  # what json.loads makes of a client's "\ud800"
Call = Callable[[object], Awaitable[object]]

BAD_IDS: dict[str, object] = {
    "lone surrogate": f"abc{LONE}",
    "lone low surrogate": "\udfff",
    "NUL": "a\x00b",
    "only NUL": "\x00",
    "empty": "",
    "too long": "x" * 513,
    "int": 7,
    "bytes": b"alice",
}


def id_calls(store: Store, cid: str) -> dict[tuple[str, str], Call]:
    """Every id argument of every store method: (method, argument) -> call with that argument."""
    rec = store.record_tool_started
    fin = store.record_tool_finished
    return {
        ("create", "owner"): lambda v: store.create(v),  # type: ignore[arg-type]
        ("create", "conversation_id"): lambda v: store.create(ALICE, v),  # type: ignore[arg-type]
        ("append", "owner"): lambda v: store.append(v, cid, [user("x")]),  # type: ignore[arg-type]
        ("append", "conversation_id"): lambda v: store.append(ALICE, v, [user("x")]),  # type: ignore[arg-type]
        ("load", "owner"): lambda v: store.load(v, cid),  # type: ignore[arg-type]
        ("load", "conversation_id"): lambda v: store.load(ALICE, v),  # type: ignore[arg-type]
        ("conversations", "owner"): lambda v: store.conversations(v),  # type: ignore[arg-type]
        ("info", "owner"): lambda v: store.info(v, cid),  # type: ignore[arg-type]
        ("info", "conversation_id"): lambda v: store.info(ALICE, v),  # type: ignore[arg-type]
        ("fork", "owner"): lambda v: store.fork(v, cid),  # type: ignore[arg-type]
        ("fork", "conversation_id"): lambda v: store.fork(ALICE, v),  # type: ignore[arg-type]
        ("fork", "new_id"): lambda v: store.fork(ALICE, cid, new_id=v),  # type: ignore[arg-type]
        ("delete", "owner"): lambda v: store.delete(v, cid),  # type: ignore[arg-type]
        ("delete", "conversation_id"): lambda v: store.delete(ALICE, v),  # type: ignore[arg-type]
        ("purge", "owner"): lambda v: store.purge(timedelta(days=1), owner=v),  # type: ignore[arg-type]
        ("record_tool_started", "owner"): lambda v: rec(v, cid, "r", "c", "t", "{}"),  # type: ignore[arg-type]
        ("record_tool_started", "conversation_id"): lambda v: rec(ALICE, v, "r", "c", "t", "{}"),  # type: ignore[arg-type]
        ("record_tool_started", "run_id"): lambda v: rec(ALICE, cid, v, "c", "t", "{}"),  # type: ignore[arg-type]
        ("record_tool_started", "call_id"): lambda v: rec(ALICE, cid, "r", v, "t", "{}"),  # type: ignore[arg-type]
        ("record_tool_started", "tool_name"): lambda v: rec(ALICE, cid, "r", "c", v, "{}"),  # type: ignore[arg-type]
        ("record_tool_finished", "owner"): lambda v: fin(v, cid, "r", "c"),  # type: ignore[arg-type]
        ("record_tool_finished", "conversation_id"): lambda v: fin(ALICE, v, "r", "c"),  # type: ignore[arg-type]
        ("record_tool_finished", "run_id"): lambda v: fin(ALICE, cid, v, "c"),  # type: ignore[arg-type]
        ("record_tool_finished", "call_id"): lambda v: fin(ALICE, cid, "r", v),  # type: ignore[arg-type]
        ("pending_tool_effects", "owner"): lambda v: store.pending_tool_effects(v, cid),  # type: ignore[arg-type]
        ("pending_tool_effects", "conversation_id"): lambda v: store.pending_tool_effects(ALICE, v),  # type: ignore[arg-type]
    }


async def _snapshot(store: Store, cid: str) -> tuple[object, ...]:
    loaded = await store.load(ALICE, cid)
    listing = [c.conversation_id for c in await store.conversations(ALICE)]
    return loaded.messages, listing, await store.pending_tool_effects(ALICE, cid)


@pytest.mark.parametrize("kind", list(BAD_IDS))
async def test_a_bad_id_anywhere_is_a_user_error_naming_the_argument(store: Store, kind: str) -> None:
    cid = await store.create(ALICE, "chat")
    await store.append(ALICE, cid, [user("hello")])
    await store.record_tool_started(ALICE, cid, "r", "c", "t", "{}")
    before = await _snapshot(store, cid)
    for (method, argument), call in id_calls(store, cid).items():
        with pytest.raises(UserError) as info:
            await call(BAD_IDS[kind])
        assert argument in str(info.value), (method, argument, str(info.value))
    assert await _snapshot(store, cid) == before  # nothing was written


async def test_bad_tool_arguments_flags_and_batches_are_user_errors(store: Store) -> None:
    cid = await store.create(ALICE)
    with pytest.raises(UserError, match="arguments are not valid Unicode"):
        await store.record_tool_started(ALICE, cid, "r", "c", "t", f'{{"q": "{LONE}"}}')
    await store.record_tool_started(ALICE, cid, "r", "c", "t", '{"q": "\\u0000 NUL is fine in JSON text"}')
    for failed in ("yes", 1, None):
        with pytest.raises(UserError, match="failed"):
            await store.record_tool_finished(ALICE, cid, "r", "c", failed=failed)  # type: ignore[arg-type]
    # a message the JSON contract cannot carry: refused by every store, MemoryStore included
    with pytest.raises(UserError, match=r"append: item 1: .*not valid Unicode.*\$\.parts\[0\]\.text"):
        await store.append(ALICE, cid, [user("fine"), assistant(f"half a pair {LONE}")])
    with pytest.raises(UserError, match="older_than"):
        await store.purge(7)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="older_than must not be negative"):
        await store.purge(timedelta(days=-1))
    with pytest.raises(UserError, match="on_expire"):
        await store.purge(timedelta(days=1), on_expire="yes")  # type: ignore[arg-type]
    assert (await store.load(ALICE, cid)).version == 0
    assert [e.arguments for e in await store.pending_tool_effects(ALICE, cid)] == [
        '{"q": "\\u0000 NUL is fine in JSON text"}'
    ]


@pytest.mark.parametrize(
    ("bad", "path"),
    [
        (Message("assistant", (Text("a"),), usage=Usage(cache_read_tokens=True)), "usage.cacheReadTokens"),
        (Message("assistant", (Text("a"),), usage=Usage(output_tokens="12")), "usage.outputTokens"),  # type: ignore[arg-type]
        (Message("assistant", (Text(5),)), "parts[0].text"),  # type: ignore[arg-type]
        (Message("assistant", (ToolCall("c", "f", {"x": 1}),)), "parts[0].arguments"),  # type: ignore[arg-type]
        (Message("user", (Text("a"),), run_id=7), "runId"),  # type: ignore[arg-type]
    ],
    ids=["bool count", "str count", "int text", "dict arguments", "int run id"],
)
async def test_no_store_writes_a_record_its_own_reader_refuses(store: Store, bad: Message, path: str) -> None:
    """Constructors do not check types: a message built with ``True`` for a count encodes, and
    its row would answer ``CorruptRecord`` forever. Every store reads each encoding back before
    it writes (ADR 0021): a ``UserError`` naming the item and the field, nothing written."""
    cid = await store.create(ALICE)
    with pytest.raises(UserError, match=rf"append: item 1 .*no reader accepts.*\$\.{re.escape(path)}"):
        await store.append(ALICE, cid, [user("fine"), bad])
    assert (await store.load(ALICE, cid)).version == 0
    await store.append(ALICE, cid, [user("fine")])
    assert [m.text for m in (await store.load(ALICE, cid)).messages] == ["fine"]


async def test_a_nul_in_a_model_name_is_listed_the_same_on_every_store(store: Store) -> None:
    cid = await store.create(ALICE)
    await store.append(ALICE, cid, [user("q"), assistant("a", model="m\x00x")])
    assert (await store.info(ALICE, cid)).last_model == "m\ufffdx"
    assert (await store.load(ALICE, cid)).messages[1].model == "m\x00x"  # the message is kept as it is


async def test_an_id_of_a_str_subclass_is_the_same_id_on_every_store(store: Store) -> None:
    class Name(str):
        __hash__ = object.__hash__  # equal to the plain string, but hashed differently

    cid = await store.create(Name(ALICE), Name("chat"))
    assert type(cid) is str
    await store.append(Name(ALICE), "chat", [user("x")])
    assert (await store.load(ALICE, Name("chat"))).version == 1
    assert [c.conversation_id for c in await store.conversations(Name(ALICE))] == ["chat"]


# -- paging and version arguments ---------------------------------------------------------------------
BAD_COUNTS: list[object] = [-1, -(2**63), 2**63, 2**64, 10**30, 10**5000, True, False, 1.0, 0.5, "3", b"3"]
MAX = 2**63 - 1


def count_calls(store: Store, cid: str) -> dict[str, Call]:
    """Every paging or version argument: name -> call taking the value."""
    return {
        "limit": lambda v: store.conversations(ALICE, limit=v),  # type: ignore[arg-type]
        "offset": lambda v: store.conversations(ALICE, offset=v),  # type: ignore[arg-type]
        "expected_version": lambda v: store.append(ALICE, cid, [], expected_version=v),  # type: ignore[arg-type]
        "tail": lambda v: store.load(ALICE, cid, tail=v),  # type: ignore[arg-type]
        "since": lambda v: store.load(ALICE, cid, since=v),  # type: ignore[arg-type]
        "at_version": lambda v: store.fork(ALICE, cid, v),  # type: ignore[arg-type]
    }


async def test_bad_paging_and_version_arguments_are_user_errors(store: Store) -> None:
    cid = await store.create(ALICE, "chat")
    await store.append(ALICE, cid, [user("one"), assistant("two")])
    for name, call in count_calls(store, cid).items():
        for value in BAD_COUNTS:
            with pytest.raises(UserError) as info:
                await call(value)
            assert name in str(info.value), (name, value)
            assert len(str(info.value)) < 300  # a huge value is described, not printed
    with pytest.raises(UserError, match="offset"):
        await store.conversations(ALICE, offset=None)  # type: ignore[arg-type]
    assert [c.conversation_id for c in await store.conversations(ALICE)] == ["chat"]  # no fork made


@durable
async def test_a_bad_reencrypt_batch_is_a_user_error(open_store: OpenStore) -> None:
    store = open_store(keyring=Keyring({"k": Keyring.generate_key()}, current="k"))
    assert isinstance(store, SQLiteStore | PostgresStore)
    for batch in (0, -1, 2**63, True, 2.0, "5"):
        with pytest.raises(UserError, match="batch"):
            await store.reencrypt(batch=batch)  # type: ignore[arg-type]
    assert await store.reencrypt(batch=MAX) == 0


async def test_the_largest_counts_are_accepted_everywhere(store: Store) -> None:
    cid = await store.create(ALICE, "chat")
    await store.append(ALICE, cid, [user("one"), assistant("two")])
    assert [c.conversation_id for c in await store.conversations(ALICE, limit=MAX)] == ["chat"]
    assert await store.conversations(ALICE, offset=MAX) == []
    assert (await store.load(ALICE, cid, tail=MAX)).offset == 0
    with pytest.raises(UserError, match="beyond"):
        await store.load(ALICE, cid, since=MAX)
    with pytest.raises(ConflictError) as info:
        await store.append(ALICE, cid, [user("x")], expected_version=MAX)
    assert (info.value.expected, info.value.actual) == (MAX, 2)
    with pytest.raises(UserError, match="at_version"):
        await store.fork(ALICE, cid, MAX)


async def _outcome(call: Awaitable[object]) -> tuple[str, object]:
    """What a call gave, comparable across stores: the result or the error type."""
    try:
        result = await call
    except (UserError, ConflictError) as exc:
        return "error", type(exc).__name__
    if isinstance(result, list):
        return "listing", [c.conversation_id for c in result]  # type: ignore[union-attr]
    if hasattr(result, "messages"):
        return "loaded", ([m.text for m in result.messages], result.offset, result.version)  # type: ignore[attr-defined]
    return "value", result


async def fill(store: Store, clock: Clock) -> None:
    """The same data in every store: listing ties on ``updated_at`` included."""
    for name in ("a", "b", "c"):
        await store.create(ALICE, name)  # same time: ties broken by creation order
    clock.advance(5)
    await store.create(ALICE, "d")
    clock.advance(5)
    await store.append(ALICE, "b", [user("bump")])
    messages: list[Message] = [user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(6)]
    await store.create("bob", "log")
    await store.append("bob", "log", messages)


async def test_paging_answers_are_the_same_on_every_store(open_store: OpenStore, backend: str) -> None:
    """The listing order (ties included) and every window, compared to MemoryStore's answers."""
    clock, reference_clock = Clock(), Clock()
    store = open_store(clock=clock)
    reference = MemoryStore(clock=reference_clock)
    await fill(store, clock)
    await fill(reference, reference_clock)
    values: list[object] = [None, 0, 1, 2, 3, 5, 6, 7, MAX, -1, 2**63, True, 1.5]
    for value in values:
        for name, call in count_calls(store, "log").items():
            if name in ("limit", "offset"):
                got = await _outcome(call(value))
                want = await _outcome(count_calls(reference, "log")[name](value))
            else:
                got = await _outcome(_bob(store, name, value))
                want = await _outcome(_bob(reference, name, value))
            assert got == want, (backend, name, value)


def _bob(store: Store, name: str, value: object) -> Awaitable[object]:
    if name == "expected_version":
        return store.append("bob", "log", [], expected_version=value)  # type: ignore[arg-type]
    if name == "at_version":
        return _fork_and_read(store, value)
    return store.load("bob", "log", **{name: value})


async def _fork_and_read(store: Store, at_version: object) -> object:
    fork = await store.fork("bob", "log", at_version)  # type: ignore[arg-type]
    loaded = await store.load("bob", fork)
    await store.delete("bob", fork)
    return loaded


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda: SQLiteStore("a\x00b.db"), "path"),
        (lambda: SQLiteStore(5), "path"),  # type: ignore[arg-type]
        (lambda: SQLiteStore("x.db", busy_timeout=-1), "busy_timeout"),
        (lambda: SQLiteStore("x.db", busy_timeout="30"), "busy_timeout"),  # type: ignore[arg-type]
        (lambda: SQLiteStore("x.db", mmap_size=-1), "mmap_size"),
        (lambda: SQLiteStore("x.db", synchronous="OFF"), "synchronous"),  # type: ignore[arg-type]
        (lambda: SQLiteStore("x.db", clock=5), "clock"),  # type: ignore[arg-type]
        (lambda: PostgresStore("postgresql://unused@127.0.0.1/none", schema=f"s{LONE}"), "schema"),
        (lambda: PostgresStore("postgresql://unused@127.0.0.1/none", schema="s\x00"), "schema"),
        (lambda: PostgresStore("postgresql://unused@127.0.0.1/none", clock="now"), "clock"),  # type: ignore[arg-type]
    ],
)
def test_bad_constructor_arguments_are_user_errors(make: Callable[[], object], fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        make()
