"""``tether logs …`` over a real SQLite file seeded through ``SQLiteStore``."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import Reasoning, ToolCall, ToolResult, assistant, loads, tool, user
from tether.cli._store import short_conversation_id, short_ids
from tether.stores import SQLiteStore

from ._cli_support import Invoke, assert_one_line_error

OWNER = "local"


async def _seed(path: Path) -> tuple[str, str]:
    async with SQLiteStore(path) as store:
        first = await store.create(OWNER)
        await store.append(
            OWNER,
            first,
            [
                user("what is 6 times 7?"),
                assistant(
                    Reasoning("the user wants a product; use the calculator tool for it"),
                    ToolCall("c1", "calculator", '{"expression": "6*7"}'),
                    model="scripted",
                ),
                tool(ToolResult("c1", "calculator", "42")),
                assistant("It is 42.", model="scripted"),
            ],
        )
        second = await store.create(OWNER)
        await store.append(OWNER, second, [user("hello there"), assistant("hi!", model="other-model")])
        await store.create("someone-else")
        return first, second


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "logs.db"
    first, second = asyncio.run(_seed(db))
    return db, first, second


def test_list_newest_first_with_preview_count_and_model(
    invoke: Invoke, seeded: tuple[Path, str, str]
) -> None:
    db, first, second = seeded
    result = invoke("logs", "list", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["conversation_id"] for r in rows] == [second, first]
    assert rows[0]["preview"] == "hello there"
    assert rows[0]["messages"] == 2
    assert rows[0]["model"] == "other-model"
    assert rows[1]["preview"] == "what is 6 times 7?"
    assert rows[1]["messages"] == 4
    # two ids made a moment apart: their ends differ, so 8 characters are enough
    assert [r["short_id"] for r in rows] == [second[-8:], first[-8:]]

    table = invoke("logs", "list", "--db", str(db))
    assert table.exit_code == 0
    assert first not in table.stdout  # the table shows the short forms
    assert table.stdout.index(second[-8:]) < table.stdout.index(first[-8:])
    assert "what is 6 times 7?" in table.stdout
    assert "other-model" in table.stdout


# ids made minutes apart share their leading characters; these also share their last eight
TWINS = (
    "01a22fdb-9c11-7000-8000-111122223333",
    "01a22fdb-9d42-7000-8000-999922223333",
    "22223333-0000-7000-8000-cccccccccccc",  # begins with what the others end with
)


async def _seed_twins(path: Path) -> None:
    async with SQLiteStore(path) as store:
        for index, cid in enumerate(TWINS):
            await store.create(OWNER, cid)
            await store.append(OWNER, cid, [user(f"prompt {index}"), assistant(f"reply {index}")])


def test_a_unique_ending_finds_a_conversation_when_beginnings_are_shared(
    invoke: Invoke, tmp_path: Path
) -> None:
    db = tmp_path / "twins.db"
    asyncio.run(_seed_twins(db))
    rows = json.loads(invoke("logs", "list", "--db", str(db), "--json").stdout)
    short = {r["conversation_id"]: r["short_id"] for r in rows}
    # the shortest ending no other id begins or ends with, never under 8 characters
    assert short == {TWINS[0]: "122223333", TWINS[1]: "922223333", TWINS[2]: "cccccccc"}
    table = invoke("logs", "list", "--db", str(db)).stdout
    assert all(form in table for form in short.values())
    for cid, form in short.items():
        shown = invoke("logs", "show", form, "--db", str(db))
        assert shown.exit_code == 0, shown.output
        assert cid in shown.stdout
    # typed in capitals, or as a unique beginning, it is found too
    assert TWINS[1] in invoke("logs", "show", "922223333".upper(), "--db", str(db)).stdout
    assert TWINS[2] in invoke("logs", "show", "22223333-0", "--db", str(db)).stdout


def test_an_ambiguous_id_lists_the_candidates_by_their_short_forms(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "twins.db"
    asyncio.run(_seed_twins(db))
    line = assert_one_line_error(
        invoke("logs", "show", "01a22fdb", "--db", str(db)), "'01a22fdb' is ambiguous"
    )
    assert "122223333" in line
    assert "922223333" in line
    assert "'prompt 0'" in line
    assert "cccccccc" not in line
    # an ending shared by two ids and the beginning of a third: all three are candidates
    line = assert_one_line_error(invoke("logs", "export", "22223333", "--db", str(db)), "3 conversations")
    assert all(form in line for form in ("122223333", "922223333", "cccccccc"))


async def test_short_conversation_id_for_the_chat(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "twins.db") as store:
        for cid in TWINS:
            await store.create(OWNER, cid)
        assert await short_conversation_id(store, OWNER, TWINS[0]) == "122223333"
        assert await short_conversation_id(store, OWNER, TWINS[2]) == "cccccccc"
        # a conversation not stored yet (a new chat) is shortened against the stored ones
        assert (
            await short_conversation_id(store, OWNER, "01a22fdb-9e00-7000-8000-000022223333") == "022223333"
        )
    assert short_ids(["short"]) == {"short": "short"}  # under 8 characters: the id itself


def test_list_is_scoped_to_the_owner(invoke: Invoke, seeded: tuple[Path, str, str]) -> None:
    db, _, _ = seeded
    result = invoke("logs", "list", "--db", str(db), "--owner", "nobody", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_show_renders_calls_results_and_collapses_reasoning(
    invoke: Invoke, seeded: tuple[Path, str, str]
) -> None:
    db, first, _ = seeded
    result = invoke("logs", "show", first[:30], "--db", str(db))  # a unique prefix is enough
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert first in out
    assert "calculator" in out
    assert "6*7" in out
    assert "42" in out
    assert "It is 42." in out
    assert "use the calculator tool" not in out  # collapsed
    assert "reasoning" in out
    expanded = invoke("logs", "show", first, "--db", str(db), "--reasoning")
    assert "use the calculator tool" in expanded.stdout


def test_show_without_id_is_the_most_recent_and_json_is_the_contract(
    invoke: Invoke, seeded: tuple[Path, str, str]
) -> None:
    db, _, second = seeded
    result = invoke("logs", "show", "--db", str(db), "--json")
    assert result.exit_code == 0, result.output
    messages = loads(result.stdout)
    assert [m.text for m in messages] == ["hello there", "hi!"]
    assert all(m.conversation_id is None for m in messages)  # stored verbatim, not restamped
    assert second


def test_export_tether_and_provider_formats(
    invoke: Invoke, seeded: tuple[Path, str, str], tmp_path: Path
) -> None:
    db, first, _ = seeded
    out = tmp_path / "export.json"
    result = invoke("logs", "export", first, "--db", str(db), "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert [m.role for m in loads(out.read_bytes())] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(result.stdout)["messages"] == 4

    chat = invoke("logs", "export", first, "--db", str(db), "--format", "openai_chat", "--json")
    assert chat.exit_code == 0, chat.output
    data = json.loads(chat.stdout)
    assert data[1]["tool_calls"][0]["function"]["name"] == "calculator"
    losses = json.loads(chat.stderr)["losses"]
    assert any(loss["message"] == 1 for loss in losses), losses  # the reasoning cannot go to Chat


def test_unknown_conversation_and_wrong_owner(invoke: Invoke, seeded: tuple[Path, str, str]) -> None:
    db, first, _ = seeded
    assert_one_line_error(invoke("logs", "show", "nope", "--db", str(db)), "'nope'")
    assert_one_line_error(invoke("logs", "show", first, "--db", str(db), "--owner", "mallory"))


def test_missing_and_unreadable_databases(invoke: Invoke, tmp_path: Path) -> None:
    assert_one_line_error(invoke("logs", "list", "--db", str(tmp_path / "none.db")), "none.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    assert_one_line_error(invoke("logs", "list", "--db", str(garbage)))
    assert_one_line_error(invoke("logs", "list", "--db", str(tmp_path)), "directory")


def test_a_corrupt_row_is_named(invoke: Invoke, seeded: tuple[Path, str, str]) -> None:
    db, first, _ = seeded
    with sqlite3.connect(db) as conn:  # hand-edit one stored message into broken JSON
        conn.execute(
            "update tether_messages set data = ? where seq = 2 and conversation = "
            "(select pk from tether_conversations where id = ?)",
            (b'{"role": "assistant", "parts": [', first),
        )
    line = assert_one_line_error(invoke("logs", "show", first, "--db", str(db)))
    assert first in line
    assert "seq 2" in line


def test_an_owner_without_conversations_is_named(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "chat.db"
    assert invoke("chat", "-m", "test", "--db", str(db), "hi").exit_code == 0  # owner local has one
    for args in (("logs", "show"), ("logs", "export"), ("chat", "-m", "test", "-c", "hi")):
        result = invoke(*args, "--db", str(db), "--owner", "bob")
        assert_one_line_error(result, "no stored conversations for owner 'bob'")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory nobody may write to: chmod, and for root (whom modes do not stop) the
    immutable attribute where the file system has one."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    yield folder
    if os.access(folder, os.W_OK):
        return
    subprocess.run(["chattr", "-R", "-i", str(folder)], capture_output=True, check=False)
    for path in (folder, *folder.iterdir()):
        path.chmod(0o755)


def _lock(folder: Path) -> None:
    for path in (*folder.iterdir(), folder):
        path.chmod(0o555)
    if os.access(folder, os.W_OK):  # root: try the immutable attribute
        subprocess.run(["chattr", "-R", "+i", str(folder)], capture_output=True, check=False)
    if os.access(folder, os.W_OK):
        pytest.skip("cannot make a directory read-only here")


def test_a_database_in_a_read_only_directory_says_so(invoke: Invoke, read_only_dir: Path) -> None:
    db = read_only_dir / "chat.db"
    assert invoke("chat", "-m", "test", "--db", str(db), "hi").exit_code == 0
    _lock(read_only_dir)
    for args in (("logs", "list"), ("logs", "show"), ("chat", "-m", "test", "-c", "again")):
        assert_one_line_error(invoke(*args, "--db", str(db)), "not writable", str(read_only_dir), "-wal")
    fresh = invoke("chat", "-m", "test", "--db", str(read_only_dir / "new.db"), "hi")
    assert_one_line_error(fresh, "not writable", "use a writable directory")
