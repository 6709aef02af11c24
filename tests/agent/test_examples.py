"""The examples run offline; each is executed here as a separate process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(name: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_run_ids_example_chains_and_forks() -> None:
    out = _run("run_ids.py").splitlines()
    first, chained, forked = (line.split() for line in out[:3])
    assert first[-1] == chained[-1]  # chained keeps the conversation id
    assert forked[-1] != first[-1]  # forked gets a new one
    assert len({first[2], chained[2], forked[2]}) == 3  # a fresh run id per run
    assert "you said 'and again' (3 messages so far)" in out[3]
    assert f'"conversationId":"{first[-1]}"' in out[4]


def test_resume_example_fails_mid_batch_then_resumes() -> None:
    out = _run("resume.py")
    assert "run failed at stage 'tools'" in out
    assert "partial evidence: 2 messages, last is assistant" in out
    assert "repaired calls: ['call_rates', 'call_book']" in out
    assert "resumed; earlier results: fetch_rates: interrupted before execution" in out


def test_conversation_example_stays_bounded() -> None:
    if not (ROOT / "examples" / "conversation.py").exists():
        pytest.fail("examples/conversation.py is missing")
    out = _run("conversation.py").splitlines()
    sent = [int(line.split("sent=")[1].split()[0]) for line in out if "sent=" in line]
    assert len(sent) == 15
    assert max(sent) <= 21  # the newest 20 messages plus the new prompt
    assert sent[-1] >= 15  # the window filled up
    assert out[-1].startswith("kept ")
