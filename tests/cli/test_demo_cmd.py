"""``tether demo``: the offline chain of runs the README shows while the local model builds."""

from __future__ import annotations

import json
from pathlib import Path

from tether import loads
from tether.history import check_history

from ._cli_support import Invoke


def test_demo_chains_and_forks_runs(invoke: Invoke) -> None:
    result = invoke("demo", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    runs = report["runs"]
    assert [r["output"] for r in runs] == [
        "The calculator says 42.",
        "The calculator says 142.",
        "The calculator says 10.5.",
    ]
    assert runs[0]["conversation_id"] == runs[1]["conversation_id"] != runs[2]["conversation_id"]
    assert len({r["run_id"] for r in runs}) == 3
    conversations = {cid: loads(json.dumps(m)) for cid, m in report["conversations"].items()}
    main, fork = conversations[runs[0]["conversation_id"]], conversations[runs[2]["conversation_id"]]
    assert len(main) == 8
    assert len(fork) == 8
    assert fork[:4] == main[:4]  # the fork shares the first turn, then diverges
    assert fork[4].text == "Instead, what is that divided by 4?"
    for messages in (main, fork):
        assert check_history(messages) == []
    # every message a run added carries that run's ids
    assert {m.run_id for m in fork[4:]} == {runs[2]["run_id"]}
    assert {m.conversation_id for m in fork[4:]} == {runs[2]["conversation_id"]}


def test_demo_prints_the_conversation_and_can_store_it(invoke: Invoke, tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = invoke("demo", "--db", str(db))
    assert result.exit_code == 0, result.output
    messages = loads(result.stdout)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"] * 2
    assert "run 3" in result.stderr
    listed = invoke("logs", "list", "--db", str(db), "--json")
    assert len(json.loads(listed.stdout)) == 2
