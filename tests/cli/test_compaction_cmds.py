"""Compaction and search on the command line, through the CLI runner on real SQLite files with
a scripted model that publishes a small context window: ``tether chat`` compacts on its own (one
dim line) and on ``/compact``, ``/history`` and ``tether logs show`` mark the records,
``tether logs search`` ranks messages with snippets, ``tether history compact`` compacts a file."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from tether import Text, ToolCall, ToolResult, assistant, dumps, loads, tool, user
from tether.agent.compaction._defaults import LOCAL_WINDOW
from tether.history import check_history, split_summary
from tether.models import PROVIDERS
from tether.stores import CompactionRecord, SQLiteStore

from ._cli_support import Invoke, assert_one_line_error

OWNER = "local"


@pytest.fixture(autouse=True)
def scripted_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROVIDERS, "windowed", ("cli._cli_support", "WindowedModel"))


def _records(db: Path) -> tuple[str, list[CompactionRecord]]:
    async def run() -> tuple[str, list[CompactionRecord]]:
        async with SQLiteStore(db) as store:
            (info,) = await store.conversations(OWNER)
            return info.conversation_id, await store.records(OWNER, info.conversation_id)

    return asyncio.run(run())


def test_chat_compacts_a_long_conversation_on_its_own_with_one_dim_line(
    invoke: Invoke, tmp_path: Path
) -> None:
    db = str(tmp_path / "chat.db")
    outputs = []
    for i in range(8):
        args = ["chat", "-m", "windowed:w", "--db", db, f"turn {i}: remember PELICAN-{i}"]
        result = invoke(*(args if i == 0 else [*args[:5], "-c", args[5]]))
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    compacted = [out for out in outputs if "⋯ compacted" in out]
    assert compacted, outputs[-1]
    line = next(x for x in compacted[0].splitlines() if "⋯ compacted" in x)
    assert "summarized messages" in line
    assert "tokens" in line
    _cid, records = _records(Path(db))
    assert records
    assert records[0].summary.startswith("- summarized from position 0")
    assert records[-1].model == "w"  # the summarizer: the chat's own model

    # logs show marks where each record sits; the log itself is whole
    shown = invoke("logs", "show", "--db", db)
    assert shown.exit_code == 0, shown.output
    # numbered from 0 like the panels and the chat's compaction line (boundary is a 1-based seq)
    first = f"compaction record {records[0].id}: messages 0-{records[0].boundary - 1} summarized"
    assert first in shown.stdout
    assert "[the view starts here]" in shown.stdout
    assert "turn 0: remember PELICAN-0" in shown.stdout
    assert f"{len(records)} compaction record" in shown.stdout


def test_compact_forces_it_and_history_shows_the_record(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    script = "\n".join(["first question", "second question", "/compact", "/history", "/quit"])
    result = invoke("chat", "-m", "windowed:w", "--db", db, input=script + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "⋯ compacted" in out
    assert "kept as compaction record" in out
    _cid, records = _records(Path(db))
    assert len(records) == 1
    assert records[0].boundary >= 2
    assert f"compaction record {records[0].id}" in out.split("/history")[-1] or "compaction record" in out
    before = out.index("kept as compaction record")
    assert "── compaction record" in out[before:]  # /history, after /compact, marks it


def test_compact_without_a_known_window_says_compaction_is_off(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    result = invoke("chat", "-m", "test", "--db", db, input="hello\n/compact\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "compaction is off" in result.stdout
    fresh = invoke("chat", "-m", "windowed:w", "--db", str(tmp_path / "new.db"), input="/compact\n/quit\n")
    assert "nothing to compact" in fresh.stdout


def test_logs_search_ranks_messages_with_snippets(invoke: Invoke, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    for prompt in ("the deploy ticket is DEP-4471", "what about lunch?"):
        assert invoke("chat", "-m", "test", "--db", db, prompt).exit_code == 0
    assert invoke("chat", "-m", "test", "--db", db, "-c", "DEP-4471 again, DEP-4471").exit_code == 0
    found = invoke("logs", "search", "DEP-4471", "--db", db)
    assert found.exit_code == 0, found.output
    assert "DEP-4471 again" in found.stdout
    assert "the deploy ticket" in found.stdout
    assert "lunch" not in found.stdout
    as_json = json.loads(invoke("logs", "search", "DEP-4471", "--db", db, "--json", "-n", "1").stdout)
    assert as_json["method"] == "fts5"
    assert as_json["complete"] is True
    (hit,) = as_json["hits"]
    assert "DEP-4471 again" in hit["snippet"]
    assert hit["seq"] == 3
    assert hit["role"] == "user"
    assert hit["conversation_id"].endswith(hit["short_id"])
    none = invoke("logs", "search", "kubernetes", "--db", db)
    assert "no message matches 'kubernetes'" in none.stdout
    assert_one_line_error(invoke("logs", "search", "...", "--db", db), "has no word to search for")


def _file(tmp_path: Path, turns: int = 30) -> Path:
    history = []
    for i in range(turns):
        call = ToolCall(f"c{i}", "read_file", f'{{"path": "src/{i}.py"}}')
        history += [
            user(f"step {i}" + (" PELICAN-77" if i == 2 else "")),
            assistant(call),
            tool(ToolResult(call.id or "", "read_file", (Text(f"# file {i}\n" + "x = 1\n" * 300),))),
            assistant(f"done {i}"),
        ]
    path = tmp_path / "long.json"
    path.write_bytes(dumps(history))
    return path


def test_history_compact_summarizes_a_file_with_a_model(invoke: Invoke, tmp_path: Path) -> None:
    source = _file(tmp_path)
    out = tmp_path / "view.json"
    result = invoke(
        "history", "compact", str(source), "-m", "windowed:w", "--window", "6000",
        "--strategy", "summarize", "-o", str(out), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["compacted"]
    assert report["report"]["steps"] == ["summarize"]
    assert report["messages"] == 120
    assert report["view_messages"] < 120
    view = loads(out.read_bytes())
    summary, _ = split_summary(view[0])
    assert summary == report["summary"]
    assert "PELICAN" in summary
    assert check_history(view) == []


def test_history_compact_elides_without_a_model_and_leaves_a_small_file_alone(
    invoke: Invoke, tmp_path: Path
) -> None:
    source = _file(tmp_path)
    result = invoke("history", "compact", str(source), "--strategy", "elide", "--window", "16000", "--json")
    # the view goes to stdout, so the report goes to stderr
    assert result.exit_code == 0, result.output
    report = json.loads(result.stderr)
    assert report["report"]["steps"] == ["elide"]
    assert report["report"]["elided"] > 0
    view = loads(result.stdout.encode())
    assert "[elided:" in view[2].tool_results[0].text
    assert view[2].tool_results[0].call_id == "c0"
    small = _file(tmp_path, turns=2)
    kept = invoke(
        "history", "compact", str(small), "--strategy", "elide", "-w", "16000", "-o", str(tmp_path / "o.json")
    )
    assert kept.exit_code == 0
    assert "nothing compacted" in kept.stdout
    assert loads((tmp_path / "o.json").read_bytes()) == loads(small.read_bytes())


def test_history_compact_names_what_is_missing(invoke: Invoke, tmp_path: Path) -> None:
    source = str(_file(tmp_path, turns=2))
    assert_one_line_error(invoke("history", "compact", source), "summarizing needs a model")
    assert_one_line_error(invoke("history", "compact", source, "-m", "test"), "context window of test")
    assert_one_line_error(
        invoke("history", "compact", source, "--strategy", "trim", "-w", "9000"), "unknown --strategy"
    )
    assert_one_line_error(
        invoke("history", "compact", source, "--strategy", "elide", "-w", "100"), "at least 256"
    )


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="needs tether[local]")
def test_history_compact_knows_the_window_of_a_local_gguf_model(invoke: Invoke, tmp_path: Path) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))  # eliding never loads the weights
    source = str(_file(tmp_path))
    result = invoke(
        "history", "compact", source, "-m", str(gguf), "--strategy", "elide", "--force", "--json",
        "-o", str(tmp_path / "view.json"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["window"] == LOCAL_WINDOW  # what tether chat compacts against


def test_ctrl_c_during_compact_stops_the_command_and_the_session_goes_on(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(PROVIDERS, "sigsummary", ("cli._cli_support", "InterruptedSummaryModel"))
    db = str(tmp_path / "chat.db")
    script = "\n".join(["first question", "second question", "/compact", "third question", "/quit"])
    result = invoke("chat", "-m", "sigsummary:w", "--db", db, input=script + "\n")
    assert result.exit_code == 0, result.output
    assert "⏹ canceled" in result.stdout
    cid, records = _records(Path(db))
    assert records == []  # nothing half-made is kept

    async def texts() -> list[str]:
        async with SQLiteStore(Path(db)) as store:
            return [m.text for m in (await store.load(OWNER, cid)).messages if m.role == "user"]

    assert asyncio.run(texts()) == ["first question", "second question", "third question"]
