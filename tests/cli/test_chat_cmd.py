"""``tether chat`` through the CLI runner on real SQLite files, with offline models: tether's
``TestModel`` (``-m test``) and two small scripted models registered as providers."""

from __future__ import annotations

import asyncio
import io
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tether import assistant, loads, user
from tether.agent import Agent
from tether.cli._chat import ChatSession
from tether.errors import StoreError, UserError
from tether.history import approximate_counter, budget_history, check_history
from tether.models import PROVIDERS
from tether.models.testing import TestModel
from tether.stores import ConversationInfo, Loaded, SQLiteStore

from ._cli_support import Invoke, assert_one_line_error

OWNER = "local"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"


@pytest.fixture(autouse=True)
def scripted_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "interrupted", ("cli._cli_support", "InterruptedModel"))
    monkeypatch.setitem(PROVIDERS, "counting", ("cli._cli_support", "CountingModel"))
    monkeypatch.setitem(PROVIDERS, "lossy", ("cli._cli_support", "LossyModel"))
    monkeypatch.setitem(PROVIDERS, "truncating", ("cli._cli_support", "TruncatingModel"))


def _conversations(db: Path) -> list[ConversationInfo]:
    async def run() -> list[ConversationInfo]:
        async with SQLiteStore(db) as store:
            return await store.conversations(OWNER)

    return asyncio.run(run())


def _load(db: Path, cid: str) -> Loaded:
    async def run() -> Loaded:
        async with SQLiteStore(db) as store:
            return await store.load(OWNER, cid)

    return asyncio.run(run())


def _ids(output: str) -> tuple[str, str]:
    match = re.search(rf"conversation ({UUID}) · run ({UUID})", output)
    assert match, output
    return match.group(1), match.group(2)


def test_one_shot_turn_is_stored_with_its_ids(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    result = invoke("chat", "-m", "test", "--db", str(db), "hello")
    assert result.exit_code == 0, result.output
    cid, run_id = _ids(result.stdout)
    loaded = _load(db, cid)
    assert [m.role for m in loaded.messages] == ["user", "assistant"]
    assert loaded.messages[0].text == "hello"
    assert all(m.run_id == run_id and m.conversation_id == cid for m in loaded.messages)
    assert loaded.messages[1].text in result.stdout


def test_continue_cid_and_fork(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    cid, _ = _ids(invoke("chat", "-m", "test", "--db", db, "first").stdout)
    again = invoke("chat", "-m", "test", "--db", db, "-c", "second")
    assert again.exit_code == 0, again.output
    assert _ids(again.stdout)[0] == cid
    by_prefix = invoke("chat", "-m", "test", "--db", db, "--cid", cid[:18], "third")
    assert _ids(by_prefix.stdout)[0] == cid
    texts = [m.text for m in _load(Path(db), cid).messages if m.role == "user"]
    assert texts == ["first", "second", "third"]

    forked = invoke("chat", "-m", "test", "--db", db, "-c", "--fork", "branch")
    assert forked.exit_code == 0, forked.output
    fork_cid, _ = _ids(forked.stdout)
    assert fork_cid != cid
    assert len(_load(Path(db), cid).messages) == 6  # the original is untouched
    fork = _load(Path(db), fork_cid)
    assert [m.text for m in fork.messages if m.role == "user"] == ["first", "second", "third", "branch"]
    info = next(i for i in _conversations(Path(db)) if i.conversation_id == fork_cid)
    assert info.forked_from == (cid, 6)


def test_interactive_session_with_slash_commands(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    exported = tmp_path / "exported.json"
    exported_chat = tmp_path / "exported-openai.json"
    script = "\n".join(
        [
            "hi there",
            "/ids",
            "/history",
            f"/export {exported}",
            f"/export {exported_chat} openai_chat",
            "/bogus",
            "/fork",
            "after the fork",
            "/quit",
            "never sent",
        ]
    )
    result = invoke("chat", "-m", "test", "--db", str(db), input=script + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "unknown command /bogus" in out
    assert "model        test" in out or "model" in out
    assert "hi there" in out  # /history shows the turn
    saved = loads(exported.read_bytes())
    assert [m.text for m in saved][:1] == ["hi there"]
    assert len(saved) == 2
    assert '"role": "user"' in exported_chat.read_text()
    infos = _conversations(db)
    assert len(infos) == 2
    original, fork = sorted(infos, key=lambda i: i.version)
    assert original.version == 2
    assert fork.version == 4
    assert fork.forked_from == (original.conversation_id, 2)
    assert "never sent" not in [m.text for m in _load(db, fork.conversation_id).messages]
    assert f"forked {original.conversation_id} → {fork.conversation_id}" in out


def test_ctrl_c_cancels_the_reply_and_stores_the_partial_turn(invoke: Invoke, tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("SIGINT to the own process is POSIX behaviour")
    db = str(tmp_path / "chat.db")
    result = invoke("chat", "-m", "interrupted:script", "--db", db, "tell me everything")
    assert result.exit_code == 0, result.output
    assert "partial answer" in result.stdout
    assert "canceled" in result.stdout
    cid, run_id = _ids(result.stdout)
    stored = _load(Path(db), cid).messages
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].text == "partial answer"
    assert stored[1].stop_reason == "canceled"
    assert stored[1].run_id == run_id
    # the next prompt resumes from the partial turn
    resumed = invoke("chat", "-m", "counting:script", "--db", db, "-c", "go on")
    assert resumed.exit_code == 0, resumed.output
    assert "I see 3 messages" in resumed.stdout
    assert len(_load(Path(db), cid).messages) == 4


def test_history_bounding_limits_what_the_model_sees(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    for i in range(3):
        resume = ["-c"] if i else []
        assert invoke("chat", "-m", "counting:script", "--db", db, *resume, f"turn {i}").exit_code == 0
    stored = _conversations(Path(db))
    assert len(stored) == 1
    assert stored[0].version == 6
    full = invoke("chat", "-m", "counting:script", "--db", db, "-c", "how many?")
    assert "I see 7 messages" in full.stdout
    trimmed = invoke("chat", "-m", "counting:script", "--db", db, "-c", "--max-messages", "3", "and now?")
    assert "I see 4 messages" in trimmed.stdout  # the newest 3 stored messages + the new prompt
    before = _load(Path(db), stored[0].conversation_id).messages
    expected = len(budget_history(approximate_counter(), 40)(before)) + 1
    assert 1 < expected < len(before)
    budgeted = invoke("chat", "-m", "counting:script", "--db", db, "-c", "--budget", "40", "budget?")
    assert budgeted.exit_code == 0, budgeted.output
    assert f"I see {expected} messages" in budgeted.stdout
    assert _conversations(Path(db))[0].version == 12  # the store keeps everything


def test_demo_tools_are_called_and_stored_in_pairs(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    result = invoke("chat", "-m", "test", "--tools", "--db", str(db), "use your tools")
    assert result.exit_code == 0, result.output
    cid, _ = _ids(result.stdout)
    messages = list(_load(db, cid).messages)
    names = {c.name for m in messages for c in m.tool_calls}
    assert names == {"calculator", "current_time"}
    assert check_history(messages) == []
    assert "→ calculator" in result.stdout


def test_instructions_are_not_stored(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    result = invoke("chat", "-m", "test", "-s", "be terse", "--db", str(db), "hi")
    assert result.exit_code == 0, result.output
    cid, _ = _ids(result.stdout)
    assert all(m.role != "system" for m in _load(db, cid).messages)


def test_bad_model_strings_and_missing_keys(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_one_line_error(invoke("chat", "-m", "nope:thing", "hi"), "unknown model", "'nope:thing'")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert_one_line_error(invoke("chat", "-m", "openai:gpt-4o-mini", "hi"), "OPENAI_API_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert_one_line_error(invoke("chat", "-m", "anthropic:claude-x", "hi"), "ANTHROPIC_API_KEY")


def test_default_model_without_the_local_extra(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
    assert_one_line_error(invoke("chat", "hi"), "tether[local]", "-m provider:model")


def test_bad_option_combinations_and_databases(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    assert_one_line_error(
        invoke("chat", "-m", "test", "--db", str(db), "-c", "hi"), "no stored conversations"
    )
    assert_one_line_error(invoke("chat", "-m", "test", "--db", str(db), "--fork", "hi"), "--fork")
    assert_one_line_error(invoke("chat", "-m", "test", "--db", str(db), "-c", "--cid", "x", "hi"), "not both")
    assert_one_line_error(invoke("chat", "-m", "test", "--max-messages", "0", "hi"), "--max-messages")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"definitely not SQLite " * 200)
    assert_one_line_error(invoke("chat", "-m", "test", "--db", str(garbage), "hi"))
    assert_one_line_error(
        invoke("chat", "-m", "test", "--db", str(tmp_path / "no" / "such" / "dir.db"), "hi"), "does not exist"
    )


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="XDG_DATA_HOME steers platformdirs on Linux only"
)
def test_default_database_is_in_the_user_data_dir(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TETHER_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = invoke("chat", "-m", "test", "hello")
    assert result.exit_code == 0, result.output
    db = tmp_path / "data" / "tether" / "conversations.db"
    cid, _ = _ids(result.stdout)
    assert _load(db, cid).messages[0].text == "hello"
    listed = invoke("logs", "list", "--json")
    assert cid in listed.stdout


def _session(store: SQLiteStore, loaded: Loaded, console: Console) -> ChatSession:
    model = TestModel()
    return ChatSession(
        agent=Agent(model),
        model=model,
        store=store,
        owner=OWNER,
        conversation_id=loaded.conversation_id,
        messages=list(loaded.messages),
        version=loaded.version,
        console=console,
        db_label="test",
    )


async def test_a_conflicting_turn_goes_to_a_fork_and_never_interleaves(tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    # two windows on one database file, each with its own connection, both continuing one conversation
    async with SQLiteStore(db) as first_store, SQLiteStore(db) as second_store:
        cid = await first_store.create(OWNER)
        await first_store.append(OWNER, cid, [user("shared question"), assistant("shared answer")])
        out_a, out_b = io.StringIO(), io.StringIO()
        window_a = _session(first_store, await first_store.load(OWNER, cid), Console(file=out_a, width=200))
        window_b = _session(second_store, await second_store.load(OWNER, cid), Console(file=out_b, width=200))

        assert (await window_b.send("from window b")).error is None  # B answers first
        assert (await window_a.send("from window a")).error is None  # A's base is now stale

        original = (await first_store.load(OWNER, cid)).messages
        assert [m.text for m in original if m.role == "user"] == ["shared question", "from window b"]
        assert len(original) == 4  # A's turn did not land after B's
        assert window_a.conversation_id != cid
        fork = await first_store.load(OWNER, window_a.conversation_id)
        assert [m.text for m in fork.messages if m.role == "user"] == ["shared question", "from window a"]
        assert fork.messages[:2] == original[:2]
        assert all(m.conversation_id == window_a.conversation_id for m in fork.messages[2:])
        assert check_history(list(fork.messages)) == []
        info = await first_store.info(OWNER, window_a.conversation_id)
        assert info.forked_from == (cid, 2)
        assert (window_a.version, list(window_a.messages)) == (fork.version, list(fork.messages))
        notice = [line for line in out_a.getvalue().splitlines() if "another session" in line]
        assert len(notice) == 1, out_a.getvalue()
        assert window_a.conversation_id in notice[0]

        # the next turn in window A continues the fork without conflict; B keeps the original
        assert (await window_a.send("again from a")).error is None
        assert (await first_store.load(OWNER, window_a.conversation_id)).version == 6
        assert (await window_b.send("again from b")).error is None
        assert (await second_store.load(OWNER, cid)).version == 6
        assert "another session" not in out_b.getvalue()


def test_a_budget_smaller_than_the_newest_message_sends_only_the_prompt(
    invoke: Invoke, tmp_path: Path
) -> None:
    db = str(tmp_path / "chat.db")
    assert invoke("chat", "-m", "counting:script", "--db", db, "hello " * 50).exit_code == 0
    squeezed = invoke("chat", "-m", "counting:script", "--db", db, "-c", "--budget", "5", "short")
    assert squeezed.exit_code == 0, squeezed.output
    assert "I see 1 messages" in squeezed.stdout  # the conversation goes on instead of failing
    assert _conversations(Path(db))[0].version == 4


def test_driver_warnings_stay_out_of_the_transcript(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    quiet = invoke("chat", "-m", "lossy:m", "--db", db, input="hello\n/report\n/quit\n")
    assert quiet.exit_code == 0, quiet.output
    assert "lossy request approximated" not in quiet.output  # neither stdout nor stderr
    assert "approximated message 0 part 0 failed flag" in quiet.stdout  # /report lists the loss
    assert "response dropped part 1 web_search_call item" in quiet.stdout  # and the response's
    loud = invoke("chat", "-m", "lossy:m", "--db", db, "-v", "hello again")
    assert loud.exit_code == 0, loud.output
    assert "lossy request approximated" in loud.stderr
    assert "lossy request approximated" not in loud.stdout


def test_a_length_stopped_reply_is_shown_and_stored_with_a_note(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    result = invoke("chat", "-m", "truncating:m", "--db", str(db), "Say hello in five words.")
    assert result.exit_code == 0, result.output
    assert "and I'm your guest" in result.stdout
    assert "length limit" in result.stdout
    assert "run failed" not in result.stdout
    cid, _ = _ids(result.stdout)
    stored = _load(db, cid).messages
    assert [(m.role, m.stop_reason) for m in stored] == [("user", None), ("assistant", "length")]


def test_a_prompt_or_instructions_that_are_not_text_fail_before_anything_is_stored(
    invoke: Invoke, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    bad = "caf\udcc3"  # argv bytes that are not UTF-8 reach Python as a lone surrogate
    line = assert_one_line_error(
        invoke("chat", "-m", "test", "--db", str(db), bad), "PROMPT", "not valid text"
    )
    assert "character 3" in line
    assert_one_line_error(invoke("chat", "-m", "test", "--db", str(db), "-s", bad, "hi"), "-s/--instructions")
    assert not db.exists() or _conversations(db) == []  # no half-stored turn, no failed run
    with pytest.raises(UserError, match="instructions are not valid Unicode"):
        Agent(TestModel(), instructions=bad)


def test_a_failing_slash_command_is_one_line_and_the_session_goes_on(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def locked(*_: object, **__: object) -> str:
        raise StoreError("database is locked")  # what a store busy past its timeout raises

    monkeypatch.setattr(SQLiteStore, "fork", locked)
    db = tmp_path / "chat.db"
    result = invoke("chat", "-m", "test", "--db", str(db), input="first\n/fork\nsecond\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "failed: StoreError: database is locked" in result.stdout
    assert "Traceback" not in result.output
    (info,) = _conversations(db)
    assert [m.text for m in _load(db, info.conversation_id).messages if m.role == "user"] == [
        "first",
        "second",
    ]


def test_an_empty_prompt_argument_is_refused(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    for blank in ("", "  \n\t"):
        result = invoke("chat", "-m", "test", "--db", str(db), blank)
        assert_one_line_error(result, "PROMPT argument is empty")
    assert not db.exists() or _conversations(db) == []
