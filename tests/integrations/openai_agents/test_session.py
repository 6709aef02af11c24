"""TetherSession under the real SDK ``Runner`` with a scripted model, on every store."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, RunState, SQLiteSession, function_tool
from agents.memory import Session, SessionSettings
from agents.models.fake_id import FAKE_RESPONSES_ID
from openai.types.responses import ResponseFunctionToolCall

import tether
from tether import ConflictError, Message, Reasoning, Text, ToolCall, ToolResult, UserError
from tether.integrations.openai_agents import LOGGER_NAME, MARKER_PROVIDER, TetherSession, is_marker
from tether.stores import Store

from .conftest import Stores
from .scripted import Scripted, agent, message, run, two_turns

OWNER = "alice"


def _json(items: list[Any]) -> list[str]:
    """Items as the SDK compares them when it reconciles a session write (exact JSON)."""
    return [json.dumps(item, sort_keys=True) for item in items]


async def _reference(script: list[list[Any]], prompts: list[str]) -> tuple[list[Any], Scripted]:
    """What the SDK's own SQLiteSession holds after the same runs, and what its model received."""
    session = SQLiteSession("reference")
    model = Scripted(script)
    for prompt in prompts:
        await run(session, model, prompt)
    return await session.get_items(), model


async def test_it_is_an_sdk_session(store: Store) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    assert isinstance(session, Session)
    assert session.session_id == "conv"
    assert isinstance(session.session_settings, SessionSettings)


async def test_runner_turns_with_tool_calls_keep_what_the_sdk_keeps(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    model = Scripted(two_turns())
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        first = await run(session, model, "Weather in Paris?")
        assert first.final_output == "It is sunny in Paris."
        second = await run(session, model, "Thanks!")
        assert second.final_output == "You are welcome."
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME] == []  # nothing lost

    expected, reference_model = await _reference(two_turns(), ["Weather in Paris?", "Thanks!"])
    items = await session.get_items()
    assert _json(items) == _json(expected)  # byte for byte what SQLiteSession returns
    # every request carried the history exactly as with the SDK's own session: the reasoning item
    # with its encrypted content, the call paired with its output
    assert [_json(i) for i in model.received] == [_json(i) for i in reference_model.received]
    assert model.received[2][1]["encrypted_content"] == "ENC-1"

    loaded = await store.load(OWNER, "conv")
    assert list(loaded.messages) == [
        Message("user", (Text("Weather in Paris?"),)),
        Message(
            "assistant",
            (
                Reasoning("look it up", signature="ENC-1", provider="openai", provider_id="rs_1"),
                ToolCall("call_1", "weather", '{"city":"Paris"}', provider_id="fc_1"),
            ),
        ),
        Message("tool", (ToolResult("call_1", "weather", "sunny in Paris"),)),
        Message("assistant", (Text("It is sunny in Paris.", provider_id="msg_1"),)),
        Message("user", (Text("Thanks!"),)),
        Message("assistant", (Text("You are welcome.", provider_id="msg_2"),)),
    ]


async def test_streamed_runs_keep_the_same_items(store: Store) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    model = Scripted(two_turns())
    for prompt in ("Weather in Paris?", "Thanks!"):
        result = Runner.run_streamed(agent(model), prompt, session=session)
        async for _ in result.stream_events():
            pass
    assert result.final_output == "You are welcome."
    expected, reference_model = await _reference(two_turns(), ["Weather in Paris?", "Thanks!"])
    assert _json(await session.get_items()) == _json(expected)
    assert model.received == reference_model.received


@function_tool(needs_approval=True)
def wire_money(amount: int) -> str:
    """Send money (needs a person's approval)."""
    return f"sent {amount}"


async def test_an_approved_run_resumes_on_another_store_instance(stores: Stores) -> None:
    """A run pauses for approval; its state is serialized; later, another store instance (another
    server) resumes it with a new session object on the same conversation."""

    def script() -> list[list[Any]]:
        transfer = ResponseFunctionToolCall(
            id="fc_w",
            call_id="call_w",
            name="wire_money",
            arguments='{"amount":5}',
            type="function_call",
            status="completed",
        )
        return [[transfer], [message("Sent.", "msg_w")]]

    async def go(first: Session, second: Session, model: Scripted) -> Any:
        bank = Agent(name="bank", instructions="Careful.", model=model, tools=[wire_money])
        paused = await Runner.run(bank, "Send 5", session=first)
        [approval] = paused.interruptions
        state = await RunState.from_string(bank, paused.to_state().to_string())
        state.approve(approval)
        return await Runner.run(bank, state, session=second)

    model, reference_model = Scripted(script()), Scripted(script())
    done = await go(
        TetherSession("conv", stores.open(), owner=OWNER),
        TetherSession("conv", stores.open(), owner=OWNER),
        model,
    )
    assert done.final_output == "Sent."
    reference = SQLiteSession("reference")
    await go(reference, reference, reference_model)
    items = await TetherSession("conv", stores.open(), owner=OWNER).get_items()
    assert _json(items) == _json(await reference.get_items())
    assert model.received == reference_model.received
    assert items[2] == {"type": "function_call_output", "call_id": "call_w", "output": "sent 5"}


async def test_a_handoff_is_carried_like_a_tool_call(store: Store) -> None:
    def script() -> list[list[Any]]:
        transfer = ResponseFunctionToolCall(
            id="fc_h",
            call_id="call_h",
            name="transfer_to_billing",
            arguments="{}",
            type="function_call",
            status="completed",
        )
        return [[transfer], [message("Billing here.", "msg_b")]]

    async def go(session: Session, model: Scripted) -> Any:
        billing = Agent(name="billing", instructions="Billing.", model=model)
        triage = Agent(name="triage", instructions="Route.", model=model, handoffs=[billing])
        return await Runner.run(triage, "My invoice?", session=session)

    session = TetherSession("conv", store, owner=OWNER)
    model, reference_model = Scripted(script()), Scripted(script())
    result = await go(session, model)
    assert result.last_agent.name == "billing"
    reference = SQLiteSession("reference")
    await go(reference, reference_model)
    assert _json(await session.get_items()) == _json(await reference.get_items())
    assert model.received == reference_model.received
    loaded = await store.load(OWNER, "conv")
    assert [p.name for p in loaded.messages[2].tool_results] == ["transfer_to_billing"]


async def test_items_of_a_model_without_item_ids_come_back_equal(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Chat Completions and LiteLLM models give every item the SDK's placeholder id."""

    def script() -> list[list[Any]]:
        placeholder_call = ResponseFunctionToolCall(
            id=FAKE_RESPONSES_ID,
            call_id="call_1",
            name="weather",
            arguments='{"city":"Oslo"}',
            type="function_call",
        )
        return [[placeholder_call], [message("Sunny in Oslo.", FAKE_RESPONSES_ID)]]

    session = TetherSession("conv", store, owner=OWNER)
    model = Scripted(script())
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        await run(session, model, "Weather in Oslo?")
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME] == []
    expected, reference_model = await _reference(script(), ["Weather in Oslo?"])
    assert _json(await session.get_items()) == _json(expected)
    assert model.received == reference_model.received


async def test_get_items_with_a_limit(store: Store) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    await run(session, Scripted(two_turns()), "Weather in Paris?")
    every = await session.get_items()
    assert len(every) == 5
    for limit in (0, 1, 2, 4, 5, 9, 2**62, 2**63, 10**30):
        assert await session.get_items(limit) == (every[-limit:] if limit else [])
    limited = TetherSession("conv", store, owner=OWNER, session_settings=SessionSettings(limit=2))
    assert await limited.get_items() == every[-2:]
    assert await limited.get_items(3) == every[-3:]  # an explicit limit wins
    assert (
        await TetherSession("conv", store, owner=OWNER, session_settings={"limit": 1}).get_items()
        == every[-1:]
    )
    for bad in (-1, True, 1.5, "2"):
        with pytest.raises(UserError, match="limit"):
            await session.get_items(bad)  # type: ignore[arg-type]


async def test_a_run_config_limit_sends_only_the_latest_items(store: Store) -> None:
    async def go(session: Session) -> Scripted:
        model = Scripted([*two_turns()[:2], [message("Three.", "msg_3")]])
        await run(session, model, "Weather in Paris?")
        config = RunConfig(session_settings=SessionSettings(limit=2))
        await Runner.run(agent(model), "Count", session=session, run_config=config)
        return model

    ours, theirs = await go(TetherSession("conv", store, owner=OWNER)), await go(SQLiteSession("reference"))
    assert ours.received == theirs.received
    # the last two items are the tool output and the answer; the SDK leaves out the output whose
    # call is beyond the limit
    assert [i.get("id", i.get("content")) for i in ours.received[-1]] == ["msg_1", "Count"]


async def test_pop_item_appends_a_marker_and_the_runner_sees_the_rest(store: Store) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    await run(session, Scripted(two_turns()), "Weather in Paris?")
    before = await session.get_items()

    reference = SQLiteSession("reference")
    await reference.add_items(before)
    for _ in range(2):
        assert _json([await session.pop_item()]) == _json([await reference.pop_item()])
    assert await session.get_items() == await reference.get_items() == before[:3]

    # the log is append-only: every message is still there, followed by two markers
    loaded = await store.load(OWNER, "conv")
    assert loaded.version == 6
    markers = loaded.messages[4:]
    assert all(is_marker(m) and m.provider == MARKER_PROVIDER and m.role == "system" for m in markers)
    assert [m.stop_reason for m in markers] == ["pop_item", "pop_item"]
    assert "assistant message" in markers[0].text
    assert "function_call_output" in markers[1].text

    # the next run sends what it sends from the SDK's own session holding the same items (the SDK
    # leaves out the call whose output was popped, and its reasoning)
    model, reference_model = (
        Scripted([[message("Ask again?", "msg_9")]]),
        Scripted([[message("Ask again?", "msg_9")]]),
    )
    await run(session, model, "Hello")
    await run(reference, reference_model, "Hello")
    assert model.received == reference_model.received
    assert model.received[0][0] == before[0]
    assert model.received[0][-1] == {"content": "Hello", "role": "user"}
    assert _json(await session.get_items()) == _json(await reference.get_items())


async def test_pop_item_of_an_empty_session(store: Store) -> None:
    session = TetherSession("never-used", store, owner=OWNER)
    assert await session.pop_item() is None
    assert await session.get_items() == []
    assert await store.conversations(OWNER) == []  # reading and popping create nothing
    await session.add_items([{"role": "user", "content": "one"}])
    assert await session.pop_item() == {"role": "user", "content": "one"}
    assert await session.pop_item() is None
    assert (await store.load(OWNER, "never-used")).version == 2  # no marker for the empty pop


async def test_clear_session_keeps_the_log_and_starts_over(store: Store) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    await run(session, Scripted(two_turns()), "Weather in Paris?")
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()  # nothing to clear: nothing appended
    loaded = await store.load(OWNER, "conv")
    assert loaded.version == 5
    assert loaded.messages[-1].stop_reason == "clear_session"
    assert is_marker(loaded.messages[-1])
    assert [m.text for m in loaded.messages[:1]] == ["Weather in Paris?"]

    model = Scripted([[message("Hi again.", "msg_3")]])
    await run(session, model, "Hi")
    assert model.received == [[{"content": "Hi", "role": "user"}]]  # nothing from before the clear
    assert len(await session.get_items()) == 2
    await TetherSession("empty", store, owner=OWNER).clear_session()
    assert [c.conversation_id for c in await store.conversations(OWNER)] == ["conv"]


async def test_two_owners_never_see_each_other(store: Store) -> None:
    alice = TetherSession("shared-id", store, owner="alice")
    bob = TetherSession("shared-id", store, owner="bob")
    await run(alice, Scripted(two_turns()), "Weather in Paris?")
    alices = await alice.get_items()
    assert await bob.get_items() == []
    assert await bob.get_items(3) == []
    assert await bob.pop_item() is None
    await bob.clear_session()
    assert await alice.get_items() == alices
    assert await store.conversations("bob") == []

    model = Scripted([[message("Hello Bob.", "msg_b")]])
    await run(bob, model, "I am Bob")
    assert model.received == [[{"content": "I am Bob", "role": "user"}]]
    assert await alice.get_items() == alices
    assert len(await bob.get_items()) == 2
    await alice.clear_session()
    assert len(await bob.get_items()) == 2


async def test_concurrent_pops_remove_different_items(stores: Stores) -> None:
    """Two sessions (two store instances on SQLite and PostgreSQL) pop at once: each item is
    popped once, none twice (the marker is appended at the version the item was read at)."""
    first = TetherSession("conv", stores.open(), owner=OWNER)
    second = TetherSession("conv", stores.open(), owner=OWNER)
    items = [{"role": "user", "content": f"item {i}"} for i in range(12)]
    await first.add_items(items)
    popped = await asyncio.gather(*(s.pop_item() for s in (first, second) for _ in range(5)))
    assert sorted(p["content"] for p in popped if p is not None) == sorted(i["content"] for i in items[-10:])
    assert await second.get_items() == items[:2]


async def test_concurrent_adds_land_whole(stores: Stores) -> None:
    first = TetherSession("conv", stores.open(), owner=OWNER)
    second = TetherSession("conv", stores.open(), owner=OWNER)

    def batch(tag: str) -> list[Any]:
        return [{"role": "user", "content": f"{tag}.{i}"} for i in range(3)]

    await asyncio.gather(
        *(s.add_items(batch(f"{n}{k}")) for k in range(4) for n, s in enumerate((first, second)))
    )
    contents = [i["content"] for i in await first.get_items()]
    assert len(contents) == 24
    for start in range(0, 24, 3):  # every batch is contiguous
        tags = {c.split(".")[0] for c in contents[start : start + 3]}
        assert len(tags) == 1


async def test_pop_gives_up_with_a_conflict_when_others_keep_writing(store: Store) -> None:
    class Busy:
        """A store whose conversation always moves on between the read and the append."""

        def __init__(self, inner: Store) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        async def append(self, owner: str, cid: str, messages: Any, *, expected_version: Any = None) -> int:
            if expected_version is not None:
                await self.inner.append(owner, cid, [Message("user", (Text("meanwhile"),))])
            return await self.inner.append(owner, cid, messages, expected_version=expected_version)

    session = TetherSession("conv", Busy(store), owner=OWNER)  # type: ignore[arg-type]
    await session.add_items([{"role": "user", "content": "first"}])
    with pytest.raises(ConflictError):
        await session.pop_item()
    contents = [i["content"] for i in await session.get_items()]
    assert contents[0] == "first"
    assert set(contents[1:]) == {"meanwhile"}


async def test_a_tether_agent_continues_the_session_and_the_sdk_sees_its_turn(store: Store) -> None:
    session = TetherSession("conv", store, owner=OWNER)
    await run(session, Scripted(two_turns()[:2]), "Weather in Paris?")
    await session.pop_item()  # the answer; its marker stays in the log
    seen: list[list[Message]] = []

    def reply(messages: list[Message], info: Any) -> Message:
        seen.append(list(messages))
        return tether.assistant("Still sunny.")

    agent = tether.Agent(tether.FunctionModel(reply), instructions="Be brief.")
    result = await agent.run("And tomorrow?", store=store, owner=OWNER, conversation_id="conv")
    assert result.output == "Still sunny."
    assert all(m.role != "system" for m in seen[0])  # markers never reach a model
    assert seen[0][0].text == "Weather in Paris?"

    items = await session.get_items()
    assert items[-2:] == [
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": "Still sunny."},
    ]
    assert len(items) == 6  # the SDK's four items left after the pop, then the agent's turn


async def test_bad_arguments_are_user_errors(store: Store) -> None:
    for bad in ("", "x" * 513, "a\x00b", "\ud800", 7):
        with pytest.raises(UserError, match="session_id"):
            TetherSession(bad, store, owner=OWNER)  # type: ignore[arg-type]
        with pytest.raises(UserError, match="owner"):
            TetherSession("conv", store, owner=bad)  # type: ignore[arg-type]
    for settings in ({"limit": -2}, {"limit": "many"}, 3):
        with pytest.raises(UserError, match=r"session_settings|limit"):
            TetherSession("conv", store, owner=OWNER, session_settings=settings)  # type: ignore[arg-type]
