"""``tether chat --trace FILE``: the session's spans as OTLP JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ._cli_support import Invoke


def _spans(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        request = json.loads(line)
        for rs in request["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                assert ss["scope"]["name"] == "tether"
                out.extend(ss["spans"])
    return out


def _attr(span: dict[str, Any], key: str) -> Any:
    return next(a["value"] for a in span["attributes"] if a["key"] == key)


def test_trace_writes_every_turn_as_otlp_json_lines(invoke: Invoke, tmp_path: Path) -> None:
    db, trace = tmp_path / "chat.db", tmp_path / "turns.jsonl"
    first = invoke("chat", "-m", "test", "--db", str(db), "--trace", str(trace), "hello")
    assert first.exit_code == 0, first.output
    second = invoke("chat", "-m", "test", "--db", str(db), "-c", "--trace", str(trace), "again")
    assert second.exit_code == 0, second.output
    spans = _spans(trace)
    runs = [s for s in spans if s["name"].startswith("invoke_agent ")]
    assert len(runs) == 2
    conversations = {_attr(r, "gen_ai.conversation.id")["stringValue"] for r in runs}
    assert len(conversations) == 1  # the second turn continued the first conversation
    assert {_attr(r, "tether.run.outcome")["stringValue"] for r in runs} == {"completed"}
    for run in runs:
        assert run["traceId"] != ""
        assert len(run["traceId"]) == 32
        kids = [s for s in spans if s.get("parentSpanId") == run["spanId"]]
        assert any(s["name"] == "chat test" for s in kids)
        assert any(s["name"] == "append tether_messages" for s in kids)
    assert "hello" not in trace.read_text()  # no content: the opt-in was not given


def test_trace_to_an_unwritable_file_is_a_one_line_error(invoke: Invoke, tmp_path: Path) -> None:
    result = invoke("chat", "-m", "test", "--db", str(tmp_path / "c.db"), "--trace", str(tmp_path), "hi")
    assert result.exit_code == 2, result.output
    assert "cannot write the trace file" in result.stderr
    assert "Traceback" not in result.output


def test_trace_without_the_sdk_names_the_package_to_install(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name == "opentelemetry.sdk" or name.startswith("opentelemetry.sdk."):
                    raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
                return None
        sys.meta_path.insert(0, Hide())
        from tether.cli import main
        sys.argv = ["tether", "chat", "-m", "test", "--db", sys.argv[1], "--trace", sys.argv[2], "hi"]
        main()
        """
    )
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c.db"), str(tmp_path / "t.jsonl")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(src)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install opentelemetry-sdk" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "t.jsonl").exists()
