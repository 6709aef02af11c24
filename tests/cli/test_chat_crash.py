"""``tether chat`` killed with SIGKILL mid-reply (a closed laptop, an OOM kill): the prompt is kept,
``tether logs list`` shows the conversation, and ``tether chat -c`` says the turn was interrupted
and continues it (ADR 0015). The model is the real OpenAI driver talking to a chat-completions
server on loopback that streams the first reply halfway and then stalls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tether.stores import SQLiteStore

TIMEOUT = 60


def _chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {"role": "assistant", "content": content} if content is not None else {}
    body = {
        "id": "chatcmpl-crash",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class Stalling:
    """The first request streams half a reply, then stalls until ``release``; later ones answer."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []
        self.streamed = threading.Event()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                server.requests.append(body)
                first = len(server.requests) == 1
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                if first:
                    self.wfile.write(_chunk("Rome was founded ") + _chunk("in 753 BC "))
                    self.wfile.flush()
                    server.streamed.set()
                    server.release.wait(TIMEOUT)
                    return
                self.wfile.write(_chunk("Rome was founded in 753 BC.") + _chunk(None, "stop"))
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"


@contextmanager
def stalling() -> Iterator[Stalling]:
    server = Stalling()
    thread = threading.Thread(target=server.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.http.shutdown()
        server.http.server_close()


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    env = {**os.environ, "TETHER_DB": str(tmp_path / "chat.db"), "OPENAI_BASE_URL": url}
    env["OPENAI_API_KEY"] = "sk-test"
    env.pop("TETHER_MODEL", None)
    return env


def _tether(env: dict[str, str], *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tether.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


async def test_chat_killed_mid_reply_keeps_the_prompt_and_continues_it(tmp_path: Path) -> None:
    with stalling() as server:
        env = _env(tmp_path, server.url)
        child = subprocess.Popen(
            [sys.executable, "-m", "tether.cli", "chat", "-m", "openai:gpt-4o-mini"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert child.stdin is not None
            child.stdin.write(b"Tell me about Rome\n")
            child.stdin.flush()
            assert server.streamed.wait(TIMEOUT), "the chat never asked the model"
            child.send_signal(signal.SIGKILL)
            assert child.wait(timeout=TIMEOUT) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=TIMEOUT)
            if child.stdin is not None:
                child.stdin.close()
        server.release.set()

        listed = _tether(env, "logs", "list")
        assert listed.returncode == 0, listed.stderr.decode()
        assert "no conversations yet" not in listed.stdout.decode()
        store = SQLiteStore(tmp_path / "chat.db")
        try:
            (conversation,) = await store.conversations("local")
            kept = (await store.load("local", conversation.conversation_id)).messages
        finally:
            await store.close()
        assert [(m.role, m.text) for m in kept] == [("user", "Tell me about Rome")]

        resumed = _tether(env, "chat", "-m", "openai:gpt-4o-mini", "-c")  # stdin ends: the session too
        out = resumed.stdout.decode()
        assert resumed.returncode == 0, resumed.stderr.decode() + out
        assert "the last prompt was not answered" in out
        assert "Rome was founded in 753 BC." in out
        assert len(server.requests) == 2
        sent = server.requests[1]["messages"]
        assert isinstance(sent, list)
        assert [m["role"] for m in sent] == ["user"]  # type: ignore[index]

    store = SQLiteStore(tmp_path / "chat.db")
    try:
        final = (await store.load("local", conversation.conversation_id)).messages
    finally:
        await store.close()
    assert [(m.role, m.text) for m in final] == [
        ("user", "Tell me about Rome"),
        ("assistant", "Rome was founded in 753 BC."),
    ]
