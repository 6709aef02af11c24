"""The curl examples of docs/serve.md run, in order, against a real server (each ```bash block,
unless preceded by ``<!-- not-run: reason -->``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.serve._serve_support import ROOT, Database, Server, add_user

DOC = ROOT / "docs" / "serve.md"
BLOCK = re.compile(r"(?:<!-- not-run: (?P<why>[^>]*) -->\s*\n)?```bash\n(?P<code>.*?)```", re.S)


def test_every_curl_example_of_docs_serve_runs(tmp_path: Path, servers: Callable[..., Server]) -> None:
    for tool in ("curl", "jq"):
        if shutil.which(tool) is None:
            if os.environ.get("CI"):
                pytest.fail(f"{tool} is required in CI (the docs' examples use it)")
            pytest.skip(f"{tool} is not installed")
    blocks = [m["code"] for m in BLOCK.finditer(DOC.read_text()) if not m["why"]]
    assert len(blocks) >= 10
    db = Database("sqlite", path=tmp_path / "serve.db")
    token = add_user(db, "alice")
    server = servers(db, model="py:tests.serve.scripted:fast_words", tools="demo")
    script = "set -euo pipefail\n" + "".join(
        f"{code}\necho '=== block {i} ok'\n" for i, code in enumerate(blocks)
    )
    script = script.replace("http://127.0.0.1:8321", server.url)
    proc = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"TOKEN": token, "PATH": "/usr/bin:/bin:/usr/local/bin"},
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    out = proc.stdout
    for i in range(len(blocks)):
        assert f"=== block {i} ok" in out
    assert '"user":"alice"' in out
    assert '"type":"run.completed"' in out
    assert "id: 3\n" in out  # the re-attached stream starts after Last-Event-ID 2
    assert '"system_prompts":1' in out
    assert '"role":"user","content":' in out  # the openai_chat export
