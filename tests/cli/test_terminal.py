"""A real terminal session (pexpect) with ``tether chat`` on the bundled local model: two turns,
quit, ``tether chat -c``, the earlier turns in ``/history``, and Ctrl-C mid-reply."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

import pytest

from tether import Message
from tether.history import check_history
from tether.models.local._prompt import DEFAULT_MAX_TOKENS
from tether.stores import SQLiteStore

pexpect = pytest.importorskip("pexpect")

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STYLE = r"(?:\x1b\[[0-9;]*m)*"  # rich styles the ids in a real terminal
TIMEOUT = 600  # the first reply includes loading the model on a slow, shared machine


def _require_local_model() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        if os.environ.get("CI"):
            pytest.fail("llama-cpp-python is not installed: CI must run the local-model session")
        pytest.skip("llama-cpp-python is not installed (pip install 'tether[local]')")


def _spawn(db: Path, *args: str) -> pexpect.spawn:
    env = {**os.environ, "TETHER_DB": str(db), "COLUMNS": "160", "LINES": "50", "TERM": "xterm"}
    env.pop("TETHER_MODEL", None)
    return pexpect.spawn(
        sys.executable,
        ["-m", "tether.cli", "chat", *args],
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 160),
    )


def _turn(child: pexpect.spawn, prompt: str) -> str:
    child.sendline(prompt)
    child.expect(rf"conversation ({UUID}) · run ({UUID})")
    reply = ANSI.sub("", child.before or "")
    child.expect("you>")
    return reply


def _stored(db: Path, cid: str) -> list[tuple[str, str, str | None]]:
    async def load() -> list[tuple[str, str, str | None]]:
        async with SQLiteStore(db) as store:
            loaded = await store.load("local", cid)
            return [(m.role, m.text, m.stop_reason) for m in loaded.messages]

    return asyncio.run(load())


@pytest.mark.local_model
def test_local_chat_survives_a_restart(tmp_path: Path) -> None:
    _require_local_model()
    db = tmp_path / "chat.db"

    first = _spawn(db)
    first.expect(rf"conversation {STYLE}({UUID}){STYLE} \(new\)")
    cid = first.match.group(1)
    first.expect("you>")
    reply_one = _turn(first, "Hello! My name is Ada. Please greet me.")
    assert "assistant>" in reply_one
    _turn(first, "Name one colour of the rainbow.")
    first.sendline("/quit")
    first.expect(pexpect.EOF)
    first.close()
    assert first.exitstatus == 0
    stored = _stored(db, cid)
    assert [role for role, _, _ in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[0][1] == "Hello! My name is Ada. Please greet me."
    assert all(text.strip() for role, text, _ in stored if role == "assistant")

    second = _spawn(db, "-c")
    second.expect(rf"conversation {STYLE}{cid}{STYLE} \(continued, 4 messages\)")
    second.expect("you>")
    second.sendline("/history")
    second.expect("My name is Ada")
    second.expect("Name one colour of the rainbow")
    second.expect("you>")
    # Ctrl-C while the model is answering: the partial reply is stored, the session goes on.
    # "assistant>" is printed with the first streamed text, so some text exists when Ctrl-C lands;
    # should the reply finish first anyway, ask again.
    prompt = "Count slowly from one to two hundred, one number per line, in words."
    for _ in range(3):
        second.sendline(prompt)
        second.expect("assistant>")
        second.sendintr()
        canceled = second.expect(["reply canceled", "· run"]) == 0
        second.expect("you>")
        if canceled:
            break
    else:
        pytest.fail("three replies finished before Ctrl-C reached them")
    second.sendline("/quit")
    second.expect(pexpect.EOF)
    second.close()
    stored = _stored(db, cid)
    assert stored[-2][:2] == ("user", prompt)
    role, text, stop_reason = stored[-1]
    assert (role, stop_reason) == ("assistant", "canceled")
    assert text.strip()


FIRST_TOKEN_SECONDS = 15.0
"""How long a step may take to show its first token (or finish, for a short tool call) once the
model is loaded: about half a second on the 2-core machine this runs on; generous for a loaded
CI box. A step that computed its whole turn before showing anything would take far longer."""


def _stored_messages(db: Path, cid: str) -> list[Message]:
    async def load() -> list[Message]:
        async with SQLiteStore(db) as store:
            return list((await store.load("local", cid)).messages)

    return asyncio.run(load())


@pytest.mark.local_model
def test_chat_with_tools_streams_every_step_within_its_bound_and_keeps_the_log_out(tmp_path: Path) -> None:
    """``tether chat --tools`` on the bundled model: every step shows its first token within
    seconds (a tool step on the spinner's token count, a text step as text), no step runs past
    the token bound, and nothing the drivers log reaches the transcript."""
    _require_local_model()
    db = tmp_path / "chat.db"
    child = _spawn(db, "--tools")
    child.expect(rf"conversation {STYLE}({UUID}){STYLE} \(new\)")
    cid = child.match.group(1)
    child.expect("you>")
    transcript = [child.before or ""]
    _turn(child, "Hi!")  # loads the model: not a step's first token
    transcript.append(child.before or "")

    first_token = rf"\d+ tokens|{STYLE}→ |assistant>"
    child.sendline("What time is it now? Use the tool.")
    started = time.monotonic()
    child.expect(first_token, timeout=FIRST_TOKEN_SECONDS)
    waits = [time.monotonic() - started]
    transcript.append((child.before or "") + str(child.after))
    # the step after the tool's result, when the model called it
    if child.expect([rf"{STYLE}← ", rf"conversation {UUID} · run"], timeout=120) == 0:
        started = time.monotonic()
        child.expect(r"\d+ tokens|assistant>", timeout=FIRST_TOKEN_SECONDS)
        waits.append(time.monotonic() - started)
        transcript.append((child.before or "") + str(child.after))
        child.expect(rf"conversation {UUID} · run", timeout=120)
    transcript.append(child.before or "")
    child.expect("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    transcript.append(child.before or "")
    child.close()

    assert all(wait < FIRST_TOKEN_SECONDS for wait in waits), waits
    shown = ANSI.sub("", "".join(transcript))
    for leak in ("WARNING", "tether.models", "request approximated", "request dropped", "Traceback"):
        assert leak not in shown, shown
    stored = _stored_messages(db, cid)
    assert check_history(stored) == []
    replies = [m for m in stored if m.role == "assistant"]
    assert len(replies) >= 2
    for reply in replies:
        assert reply.usage is not None
        assert 0 < reply.usage.output_tokens <= DEFAULT_MAX_TOKENS, reply.usage
