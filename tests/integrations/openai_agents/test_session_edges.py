"""TetherSession at its edges: a killed process, encryption at rest, items the converter cannot
carry, a missing extra, and random operation sequences against the SDK's own SQLiteSession."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agents import Runner, SQLiteSession
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import DecodeError, EncryptionError, Image, Message, Text, ToolCall, UserError
from tether.integrations.openai_agents import LOGGER_NAME, TetherSession
from tether.integrations.openai_agents import _session as session_module
from tether.stores import MemoryStore, SQLiteStore

from .conftest import KEYRING
from .scripted import Scripted, agent, message, run, two_turns

OWNER = "alice"
CHILD = Path(__file__).with_name("_child.py")


async def test_a_killed_process_leaves_the_session_to_the_next_one(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), "conv"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), timeout=120)
        assert line.strip() == "done It is sunny in Paris."
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)

    store = SQLiteStore(db)
    try:
        session = TetherSession("conv", store, owner=OWNER)  # a new process, a new session object
        reference = SQLiteSession("reference")
        await run(reference, Scripted(two_turns()[:2]), "Weather in Paris?")
        expected = await reference.get_items()
        assert await session.get_items() == expected
        model = Scripted([[message("You are welcome.", "msg_2")]])
        await run(session, model, "Thanks!")
        assert model.received[0] == [*expected, {"content": "Thanks!", "role": "user"}]
    finally:
        await store.close()


async def test_the_cli_shows_the_session_with_its_markers(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    store = SQLiteStore(db)
    try:
        session = TetherSession("conv", store, owner=OWNER)
        await run(session, Scripted(two_turns()[:2]), "Weather in Paris?")
        await session.pop_item()
    finally:
        await store.close()
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "tether.cli",
            "logs",
            "show",
            "conv",
            "--db",
            str(db),
            "--owner",
            OWNER,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    messages = json.loads(shown.stdout)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "system"]
    assert messages[-1]["provider"] == "tether.session"
    assert messages[-1]["stopReason"] == "pop_item"
    assert messages[2]["parts"][0]["name"] == "weather"


def test_run_sync_turns_share_a_sqlite_session(tmp_path: Path) -> None:
    """``Runner.run_sync`` runs each turn in a loop of its own; the store serves both."""
    store = SQLiteStore(tmp_path / "sync.db")
    session = TetherSession("conv", store, owner=OWNER)
    model = Scripted(two_turns())
    assert (
        Runner.run_sync(agent(model), "Weather in Paris?", session=session).final_output
        == "It is sunny in Paris."
    )
    assert Runner.run_sync(agent(model), "Thanks!", session=session).final_output == "You are welcome."
    assert len(model.received[-1]) == 6
    asyncio.run(store.close())


async def test_an_encrypted_store_keeps_no_plaintext(tmp_path: Path) -> None:
    db = tmp_path / "sealed.db"
    store = SQLiteStore(db, keyring=KEYRING)
    session = TetherSession("conv", store, owner=OWNER)
    await run(session, Scripted(two_turns()), "Weather in Paris?")
    await session.pop_item()
    assert len(await session.get_items()) == 4
    await store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("sealed.db"))
    for secret in (b"Weather in Paris", b"sunny in Paris", b"ENC-1", b"look it up", b"pop_item"):
        assert secret not in raw

    keyless = SQLiteStore(db)
    try:
        with pytest.raises(EncryptionError):
            await TetherSession("conv", keyless, owner=OWNER).get_items()
    finally:
        await keyless.close()


# -- what the converter cannot carry ------------------------------------------------------------


async def test_items_without_a_tether_equivalent_are_reported_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    session = TetherSession("conv", store, owner=OWNER)
    items: list[Any] = [
        {"role": "user", "content": "search the web", "provider_data": {"model": "m"}, "extra": {1, 2}},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "Found it.",
                    "annotations": [{"type": "url_citation", "url": "https://example.com", "title": "x"}],
                }
            ],
        },
        {"role": "developer", "content": "be terse"},
    ]
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        await session.add_items(items)
    [record] = [r for r in caplog.records if r.name == LOGGER_NAME]
    text = record.getMessage()
    assert "add_items of 4 items" in text
    assert "item 0: dropped extra, provider_data (fields tether messages do not keep)" in text
    assert "item 1: dropped web_search_call item" in text
    assert "item 2 part 0: dropped text annotations" in text
    assert "item 3: approximated developer role" in text
    back = await session.get_items()
    assert [i.get("type", i.get("role")) for i in back] == ["user", "message", "system"]
    assert back[1]["content"][0] == {"type": "output_text", "text": "Found it.", "annotations": []}


@pytest.mark.parametrize(
    ("items", "path"),
    [
        (
            [{"role": "user", "content": "ok"}, {"type": "function_call", "name": "f", "arguments": "{}"}],
            "$[1]",
        ),
        ([{"role": "user", "content": [{"type": "input_audio", "data": "AAAA"}]}], "$[0].content[0].type"),
        ([{"role": "user", "content": "\ud800"}], "$[0].content"),
        ([{"role": "user", "content": "x"}, {"role": "nobody", "content": "x"}], "$[1].role"),
        ([7], "$[0]"),
        ([{"content": "no role and no type"}], "$[0]"),
    ],
)
async def test_malformed_items_are_a_decode_error_and_nothing_is_written(items: list[Any], path: str) -> None:
    store = MemoryStore()
    session = TetherSession("conv", store, owner=OWNER)
    await session.add_items([{"role": "user", "content": "before"}])
    with pytest.raises(DecodeError) as error:
        await session.add_items(items)
    assert (error.value.path or "").startswith(path)
    assert await session.get_items() == [{"role": "user", "content": "before"}]


async def test_deep_nesting_and_wrong_containers() -> None:
    session = TetherSession("conv", MemoryStore(), owner=OWNER)
    deep: Any = "x"
    for _ in range(500):
        deep = [deep]
    with pytest.raises(DecodeError):
        await session.add_items([{"role": "user", "content": deep}])
    for bad in ("hello", {"role": "user", "content": "x"}, None):
        with pytest.raises(UserError, match="list of items"):
            await session.add_items(bad)  # type: ignore[arg-type]
    assert await session.get_items() == []


async def test_sdk_objects_are_taken_as_the_sdk_dumps_them() -> None:
    session = TetherSession("conv", MemoryStore(), owner=OWNER)
    await session.add_items([message("Hi.", "msg_1")])  # type: ignore[list-item]
    assert await session.get_items() == [
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Hi.", "annotations": []}],
        }
    ]


async def test_an_output_added_after_its_call_gets_the_call_s_name(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    session = TetherSession("conv", store, owner=OWNER)
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}", "id": "fc_1"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "sunny"}
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        await session.add_items([{"role": "user", "content": "q"}, call])
        await session.add_items([output])  # an approval or a resumed run saves it later
    assert not [r for r in caplog.records if r.name == LOGGER_NAME]
    loaded = await store.load(OWNER, "conv")
    assert loaded.messages[-1].tool_results[0].name == "weather"
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        await session.add_items([{"type": "function_call_output", "call_id": "nobody", "output": "?"}])
    assert "no function_call with call_id 'nobody'" in caplog.text
    assert (await session.get_items())[-1] == {
        "type": "function_call_output",
        "call_id": "nobody",
        "output": "?",
    }


async def test_an_output_finds_its_call_far_back_in_the_log() -> None:
    store = MemoryStore()
    session = TetherSession("conv", store, owner=OWNER)
    await session.add_items(
        [{"type": "function_call", "call_id": "old", "name": "slow_job", "arguments": "{}"}]
    )
    await session.add_items([{"role": "user", "content": f"meanwhile {i}"} for i in range(100)])
    await session.add_items([{"type": "function_call_output", "call_id": "old", "output": "finished"}])
    assert (await store.load(OWNER, "conv", tail=1)).messages[0].tool_results[0].name == "slow_job"


async def test_stored_messages_items_cannot_carry_are_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    """A tether writer (an agent, the service) may store what items cannot hold."""
    store = MemoryStore()
    await store.create(OWNER, "conv")
    await store.append(
        OWNER,
        "conv",
        [
            Message("user", (Text("draw"),)),
            Message("assistant", (Text("here"), Image(url="https://example.com/a.png"))),
            Message("assistant", (ToolCall("c1", "f", "{}", signature="gemini-sig"),)),
        ],
    )
    session = TetherSession("conv", store, owner=OWNER)
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        first = await session.get_items()
        assert await session.get_items() == first
    records = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
    assert len(records) == 2  # one per lossy message, not per read
    assert "stored message 2" in records[0] or "stored message 2" in records[1]
    assert first[1] == {"role": "assistant", "content": "here"}


def test_without_the_sdk_the_import_names_the_extra() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["agents"] = None  # the SDK is "not installed"
        try:
            import tether.integrations.openai_agents
        except ImportError as exc:
            import tether
            assert isinstance(exc, tether.MissingExtra), type(exc)
            print(exc.extra, "|", exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    extra, _, text = out.stdout.partition(" | ")
    assert extra == "openai-agents"
    assert "pip install 'tether[openai-agents]'" in text


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
KEYS = st.sampled_from(["type", "role", "content", "call_id", "name", "arguments", "output", "id", "summary"])
VALUES = st.sampled_from(
    [
        "message",
        "user",
        "assistant",
        "system",
        "developer",
        "function_call",
        "function_call_output",
        "reasoning",
    ]
)
ITEM = st.dictionaries(KEYS, VALUES | JSON, max_size=6) | JSON


@settings(max_examples=150)
@given(items=st.lists(ITEM, max_size=5))
def test_arbitrary_items_give_a_typed_error_or_a_readable_session(items: list[Any]) -> None:
    """Whatever a caller (or a compromised model) hands over: a DecodeError or UserError and
    nothing written, or items stored that read back, pop and clear."""

    async def go() -> None:
        store = MemoryStore()
        session = TetherSession("conv", store, owner=OWNER)
        try:
            await session.add_items(items)
        except (DecodeError, UserError):
            assert await store.conversations(OWNER) == []
            return
        every = await session.get_items()
        assert await session.get_items(1) == every[-1:]
        assert await session.pop_item() == (every[-1] if every else None)
        await session.clear_session()
        assert await session.get_items() == []

    logging.getLogger(LOGGER_NAME).setLevel(logging.ERROR)  # the losses are expected here
    try:
        asyncio.run(go())
    finally:
        logging.getLogger(LOGGER_NAME).setLevel(logging.NOTSET)


# -- random operation sequences against the SDK's own session ------------------------------------


def _palette(n: int) -> list[Any]:
    """Items of every kind a Runner stores, in the shapes the SDK stores them."""
    return [
        {"role": "user", "content": f"user {n}"},
        {"role": "assistant", "content": f"short {n}"},
        {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{n}",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
        },
        {
            "type": "reasoning",
            "id": f"rs_{n}",
            "summary": [{"type": "summary_text", "text": "r"}],
            "encrypted_content": "E",
        },
        {
            "type": "function_call",
            "call_id": f"c{n}",
            "name": "f",
            "arguments": "{}",
            "id": f"fc_{n}",
            "status": "completed",
        },
        {"type": "function_call", "call_id": f"d{n}", "name": "g", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": f"c{n}", "output": f"out {n}"},
        {"type": "function_call", "call_id": f"e{n}", "name": "h", "arguments": "{}", "id": "__fake_id__"},
    ]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.integers(0, 7), min_size=0, max_size=5)),
        st.tuples(st.just("pop"), st.just([])),
        st.tuples(st.just("clear"), st.just([])),
        st.tuples(st.just("get"), st.lists(st.integers(0, 12), min_size=1, max_size=1)),
    ),
    max_size=25,
)


@settings(max_examples=120)
@given(ops=OPS, small_windows=st.booleans())
def test_random_operations_match_sqlite_session(
    ops: list[tuple[str, list[int]]], small_windows: bool
) -> None:
    async def go() -> None:
        ours = TetherSession("conv", MemoryStore(), owner=OWNER)
        theirs = SQLiteSession("conv")
        counter = 0
        for op, args in ops:
            if op == "add":
                batch = []
                for kind in args:
                    counter += 1
                    batch.append(_palette(counter)[kind])
                await ours.add_items(batch)
                await theirs.add_items([dict(i) for i in batch])
            elif op == "pop":
                assert await ours.pop_item() == await theirs.pop_item()
            elif op == "clear":
                await ours.clear_session()
                await theirs.clear_session()
            else:
                assert await ours.get_items(args[0]) == await theirs.get_items(args[0])
            assert await ours.get_items() == await theirs.get_items()
        theirs.close()

    with pytest.MonkeyPatch.context() as patch:
        if small_windows:  # the log is read backwards in windows: make them grow often
            patch.setattr(session_module, "_FIRST_WINDOW", 1)
            patch.setattr(session_module, "_MIN_WINDOW", 1)
        asyncio.run(go())


async def test_a_long_session_reads_only_back_to_its_last_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    session = TetherSession("conv", store, owner=OWNER)
    for i in range(300):
        await session.add_items([{"role": "user", "content": f"old {i}"}])
    await session.clear_session()
    await session.add_items([{"role": "user", "content": "new"}])
    loads: list[dict[str, Any]] = []
    original = store.load

    async def counting(owner: str, cid: str, **kwargs: Any) -> Any:
        loads.append(kwargs)
        return await original(owner, cid, **kwargs)

    monkeypatch.setattr(store, "load", counting)
    assert await session.get_items() == [{"role": "user", "content": "new"}]
    assert loads == [{"tail": 256}]  # stopped at the marker: the 300 older messages were not read
