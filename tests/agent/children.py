"""What the crash tests share: a child process running tether from this tree, SIGKILLed at a
point it announces, and the stores its spec (``sqlite:PATH`` or ``postgres:SCHEMA``) names."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

from tether.stores import PostgresStore, SQLiteStore, Store

SRC = Path(__file__).resolve().parents[2] / "src"
POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_dsn() -> str:
    """The server the ``pg_dsn`` fixture checked (the children read the same variable)."""
    return os.environ.get("TETHER_TEST_POSTGRES_DSN", POSTGRES_DSN)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def store_from(spec: str) -> Store:
    kind, _, where = spec.partition(":")
    return SQLiteStore(where) if kind == "sqlite" else PostgresStore(postgres_dsn(), schema=where)


def kill_at(args: list[str], point: str, timeout: float) -> None:
    """Start the child and SIGKILL it once it prints ``AT <point>`` (its stderr if it does not)."""
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    watchdog = threading.Timer(timeout, child.kill)  # bounds the read below
    watchdog.start()
    try:
        assert child.stdout is not None
        assert child.stderr is not None
        line = child.stdout.readline().decode()
        if line.strip() != f"AT {point}":
            child.kill()
            raise AssertionError(line + child.stderr.read().decode())
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=timeout) == -signal.SIGKILL
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait(timeout=timeout)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()


def run_child(args: list[str], timeout: float) -> str:
    """Run the child to its end; its stdout (a failure shows its stderr)."""
    done = subprocess.run(args, capture_output=True, env=child_env(), timeout=timeout, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode() + out
    return out


def lines(directory: Path, name: str) -> Counter[str]:
    """The lines a child wrote to ``name`` (its side effects), counted."""
    path = directory / name
    return Counter(path.read_text().splitlines()) if path.exists() else Counter()
