"""Helpers of the service tests: ``tether serve`` as a real subprocess on a free loopback port,
its users made with ``tether serve users add``, and SSE reading over httpx / httpx-sse."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = "py:tests.serve.scripted"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Database:
    """Where a test's service keeps its data: a SQLite file or a PostgreSQL schema."""

    kind: str
    path: Path | None = None
    dsn: str | None = None
    schema: str | None = None

    def args(self) -> list[str]:
        if self.kind == "sqlite":
            return ["--db", str(self.path)]
        return ["--postgres", str(self.dsn), "--postgres-schema", str(self.schema)]


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    out["TETHER_SERVE_LOG_LEVEL"] = "warning"
    out.update(extra or {})
    return out


def tether(
    *args: str, extra_env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the ``tether`` command line in a subprocess."""
    proc = subprocess.run(
        [sys.executable, "-m", "tether.cli", *args],
        capture_output=True,
        text=True,
        env=env(extra_env),
        timeout=60,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tether {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def add_user(db: Database, name: str) -> str:
    token = tether("serve", "users", "add", name, *db.args()).stdout.strip()
    assert token.startswith("tth_"), token
    return token


@dataclass
class Server:
    """One ``tether serve`` process."""

    db: Database
    model: str = f"{SCRIPTED}:slow_words"
    tools: str | None = f"{SCRIPTED}:tools"
    extra: list[str] = field(default_factory=lambda: [])
    extra_env: dict[str, str] = field(default_factory=lambda: {})
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, log_dir: Path) -> Server:
        args = [sys.executable, "-m", "tether.cli", "serve", *self.db.args(), "--port", str(self.port)]
        args += ["--model", self.model, *(["--tools", self.tools] if self.tools else []), *self.extra]
        self.log_path = log_dir / f"serve-{self.port}-{time.monotonic_ns()}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env(self.extra_env))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"tether serve exited at start: {self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"tether serve did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def kill(self) -> None:
        """SIGKILL, and reap the process (a zombie would still look alive to the next start)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def client(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@contextmanager
def running(server: Server, log_dir: Path) -> Iterator[Server]:
    server.start(log_dir)
    try:
        yield server
    finally:
        server.stop()


def new_conversation(client: httpx.Client) -> str:
    r = client.post("/v1/conversations")
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def start_run(client: httpx.Client, cid: str, prompt: str) -> str:
    r = client.post(f"/v1/conversations/{cid}/runs", json={"prompt": prompt})
    assert r.status_code == 202, r.text
    return str(r.json()["id"])


@dataclass(frozen=True)
class Got:
    seq: int
    data: dict[str, Any]


def read_events(
    client: httpx.Client,
    run_id: str,
    *,
    last_event_id: int | None = None,
    stop_after: int | None = None,
    until: str | None = None,
) -> list[Got]:
    """Read the run's stream; with ``stop_after`` disconnect after that many events (a client that
    goes away mid-run) or after the first event of type ``until``, else read to the end."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    got: list[Got] = []
    with connect_sse(client, "GET", f"/v1/runs/{run_id}/events", headers=headers) as source:
        assert source.response.status_code == 200, source.response.read()
        for sse in source.iter_sse():
            if not sse.data:  # the retry: line
                continue
            got.append(Got(int(sse.id), json.loads(sse.data)))
            if stop_after is not None and len(got) >= stop_after:
                break
            if until is not None and got[-1].data["type"] == until:
                break
    return got


def normalized(events: list[Got]) -> list[tuple[int, str]]:
    """Events with the run's and conversation's ids blanked (they differ between two runs)."""
    out: list[tuple[int, str]] = []
    for e in events:
        text = json.dumps(e.data, sort_keys=True)
        for key in ("run_id", "conversation_id"):
            text = text.replace(str(e.data[key]), f"<{key}>")
        out.append((e.seq, text))
    return out


def wait_status(
    client: httpx.Client, run_id: str, statuses: tuple[str, ...], timeout: float = 30
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/runs/{run_id}").json()
        if body["status"] in statuses or time.monotonic() > deadline:
            assert body["status"] in statuses, body
            return dict(body)
        time.sleep(0.05)
