"""Durable runs (ADR 0015): how long a run killed with SIGKILL takes to continue, and what
durability costs per step and per run, on SQLite and PostgreSQL.

    python -m bench.durable            # full (10 kills per store)
    python -m bench.durable --quick    # 4 kills per store, fewer runs
    python -m bench.durable --smoke    # one kill per store, 2 runs per cell: that it runs (CI)

Recovery: a ``DurableAgent`` run (scripted model, one tool step) is killed with SIGKILL while its
second model request is in flight; then, on SQLite, the same executor starts again (a new process:
interpreter, imports, DBOS launch, recovery); on PostgreSQL a second executor, already running,
is told the first is dead and recovers it (``recover([...])``: the engine's hand-over, without the
detection delay, which is the caller's heartbeat policy). Measured: wall time from the SIGKILL to
the continued run's first model request, p50 and p99 (with few kills p99 is the maximum).

Throughput: runs of 10 tool steps + an answer, one after the other, recorded in the store: 0.2
(``TETHER_BENCH_BASELINE_SRC``, every step in memory, one write per run), this tree (every step
written before the next), this tree as a ``DurableAgent`` (plus DBOS's workflow row per run).

The service: ``tether serve`` (``--no-auth`` on loopback) with a run streaming its reply,
SIGKILLed after its first text delta; on SQLite the same command starts again on the same
database, on PostgreSQL a second process is already running. Measured: seconds from the SIGKILL
to ``run.recovered`` (the run continues) and to ``run.completed``, p50 and p99; and runs/s of
short runs through HTTP (start, stream to the end), 8 at a time, ``--durable`` (a DBOS workflow
per run) against ``--no-durable``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SMOKE_NEEDS = ("dbos", "psycopg", "httpx")
PG_DSN = os.environ.get("TETHER_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
STEPS = 10
HERE = Path(__file__).resolve().parent.parent

CHILD = """
import asyncio, sys, time
from pathlib import Path
from tether import Agent, ToolCall, assistant
from tether.models.testing import FunctionModel
from tether.stores import SQLiteStore, PostgresStore
from tether.agent.durable import DurableAgent, launch, recover, shutdown

kind, where, sysdb, schema, mode, run_id, marks = sys.argv[1:8]
marks = Path(marks)

async def reply(messages, info):
    with open(marks, "a") as f:
        f.write(f"{time.time()} {mode} {len(messages)}\\n")
    if mode == "start" and len(messages) > 1:
        print("AT", flush=True)
        await asyncio.sleep(3600)
    if len(messages) == 1:
        return assistant(ToolCall("c1", "step", '{"i": 1}'))
    return "done"

async def step(i: int) -> str:
    return "ok"

def open_store():
    return SQLiteStore(where) if kind == "sqlite" else PostgresStore(where, schema=schema)

async def main():
    durable = DurableAgent(Agent(FunctionModel(reply), tools=[step]), name="bench", store=open_store)
    executor = None if kind == "sqlite" else ("bench-a" if mode == "start" else "bench-b")
    launch(sysdb, executor_id=executor, schema=None if kind == "sqlite" else schema + "_dbos")
    try:
        if mode == "start":
            await durable.run("go", owner="bench", run_id=run_id)
        else:
            print("READY", flush=True)
            if kind != "sqlite":
                sys.stdin.readline()
                recover(["bench-a"])
            await durable.attach(run_id).result()
    finally:
        shutdown()

asyncio.run(main())
"""


def _env(src: str | None = None) -> dict[str, str]:
    path = src or os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, str(HERE)) if p)}


def _drop(schemas: Sequence[str]) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for s in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')


def _child(args: list[str], *, stdin: bool = False) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        env=_env(),
    )


def one_kill(kind: str, tmp: Path) -> float:
    """Seconds from SIGKILL to the continued run's first model request."""
    run_id, schema = str(uuid.uuid4()), f"bench_dur_{uuid.uuid4().hex[:8]}"
    marks = tmp / f"{run_id}.marks"
    if kind == "sqlite":
        where, sysdb = str(tmp / f"{run_id}.db"), f"sqlite:///{tmp / f'{run_id}.dbos'}"
    else:
        where, sysdb = PG_DSN, PG_DSN
    args = [kind, where, sysdb, schema]
    survivor = None
    try:
        if kind != "sqlite":
            survivor = _child([*args, "recover", run_id, str(marks)], stdin=True)
            assert survivor.stdout is not None
            survivor.stdout.readline()  # READY: launched, waiting to be told
        first = _child([*args, "start", run_id, str(marks)])
        assert first.stdout is not None
        assert first.stdout.readline().strip() == b"AT"
        killed = time.time()
        first.send_signal(signal.SIGKILL)
        first.wait()
        if survivor is None:
            survivor = _child([*args, "recover", run_id, str(marks)])
        else:
            assert survivor.stdin is not None
            survivor.stdin.write(b"dead\n")
            survivor.stdin.flush()
        survivor.wait(timeout=120)
        continued = [float(line.split()[0]) for line in marks.read_text().splitlines() if " recover " in line]
        return min(continued) - killed
    finally:
        for p in (survivor,):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        if kind != "sqlite":
            _drop([schema, schema + "_dbos"])


def recovery(kind: str, kills: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        times = sorted(one_kill(kind, Path(tmp)) for _ in range(kills))
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return {"p50": statistics.median(times), "p99": p99}


# -- throughput -------------------------------------------------------------------------------------


async def throughput(kind: str, mode: str, runs: int) -> dict[str, float]:
    """Runs per second and steps per second of ``runs`` stored runs, one after the other."""
    from tether import Agent, Message, ToolCall, assistant
    from tether.models.testing import FunctionInfo, FunctionModel
    from tether.stores import PostgresStore, SQLiteStore, Store

    tmp = tempfile.mkdtemp()
    schema = f"bench_thr_{uuid.uuid4().hex[:8]}"

    def open_store() -> Store:
        if kind == "sqlite":
            return SQLiteStore(os.path.join(tmp, "t.db"))
        return PostgresStore(PG_DSN, schema=schema)

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        n = sum(1 for m in messages if m.role == "tool")
        return assistant(ToolCall(f"c{n}", "step", '{"i": 1}')) if n < STEPS else "done"

    async def step(i: int) -> str:
        return "ok"

    agent = Agent(FunctionModel(reply), tools=[step], max_steps=STEPS + 5)
    run: Any
    if mode == "durable":
        from tether.agent.durable import DurableAgent, launch, shutdown

        durable = DurableAgent(agent, name="thr", store=open_store)
        sysdb = f"sqlite:///{os.path.join(tmp, 'dbos.sqlite')}" if kind == "sqlite" else PG_DSN
        launch(sysdb, schema=None if kind == "sqlite" else schema + "_dbos")

        async def run() -> None:
            await durable.run("go", owner="bench")

    else:
        store = open_store()

        async def run() -> None:
            await agent.run("go", store=store, owner="bench")

    try:
        await run()  # warm-up
        t0 = time.perf_counter()
        for _ in range(runs):
            await run()
        elapsed = time.perf_counter() - t0
    finally:
        if mode == "durable":
            shutdown()
        else:
            await store.close()
        if kind != "sqlite":
            _drop([schema, schema + "_dbos"])
    return {"runs_s": runs / elapsed, "steps_s": runs * (STEPS + 1) / elapsed}


# -- the service ------------------------------------------------------------------------------------
def serve_slow() -> Any:
    """The service's model: 30 words, one every 50 ms (a reply that streams for 1.5 s)."""
    from tether.models.testing import FunctionModel

    return FunctionModel(lambda messages, info: " ".join(["word"] * 30), name="bench-slow", delay=0.05)


def serve_fast() -> Any:
    """The service's model for throughput: a short answer at once."""
    from tether.models.testing import FunctionModel

    return FunctionModel(lambda messages, info: "done", name="bench-fast")


class _Service:
    """One ``tether serve`` process on loopback."""

    def __init__(self, db: list[str], model: str, extra: Sequence[str] = (), port: int = 0) -> None:
        import socket

        if not port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{port}"
        self.port = port
        args = [sys.executable, "-m", "tether.cli", "serve", *db, "--port", str(port), "--no-auth"]
        args += ["--model", f"py:bench.durable:{model}", "--max-active-runs", "0", *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
        self._wait_up()

    def _wait_up(self) -> None:
        import httpx

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("tether serve exited at start")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("tether serve did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def _start(url: str) -> str:
    import httpx

    cid = httpx.post(f"{url}/v1/conversations", timeout=30).json()["id"]
    r = httpx.post(f"{url}/v1/conversations/{cid}/runs", json={"prompt": "go"}, timeout=30)
    return str(r.json()["id"])


def _until(url: str, run_id: str, wanted: str, after: int = 0) -> tuple[float, int]:
    """Read the run's events until one of type ``wanted``: when it came, and its seq."""
    import httpx

    headers = {"Last-Event-ID": str(after)}
    with httpx.stream("GET", f"{url}/v1/runs/{run_id}/events", headers=headers, timeout=120) as r:
        seq = 0
        for line in r.iter_lines():
            if line.startswith("id:"):
                seq = int(line[3:])
            elif line.startswith("data:") and json.loads(line[5:]).get("type") == wanted:
                return time.time(), seq
    raise RuntimeError(f"the stream ended without {wanted}")


def serve_kill(kind: str, tmp: Path) -> tuple[float, float]:
    """Seconds from SIGKILL to run.recovered and to run.completed."""
    schema = f"bench_srv_{uuid.uuid4().hex[:8]}"
    db = (
        ["--db", str(tmp / f"{schema}.db")]
        if kind == "sqlite"
        else ["--postgres", PG_DSN, "--postgres-schema", schema]
    )
    services: list[_Service] = []
    try:
        first = _Service(db, "serve_slow")
        services.append(first)
        if kind != "sqlite":
            services.append(_Service(db, "serve_slow"))
        run_id = _start(first.url)
        _until(first.url, run_id, "text.delta")
        killed = time.time()
        first.kill()
        other = services[-1] if kind != "sqlite" else _Service(db, "serve_slow", port=first.port)
        services.append(other)
        moved, _ = _until(other.url, run_id, "run.recovered")
        done, _ = _until(other.url, run_id, "run.completed")
        return moved - killed, done - killed
    finally:
        for s in services:
            s.kill()
        if kind != "sqlite":
            _drop([schema, schema + "_dbos"])


def serve_throughput(kind: str, durable: bool, runs: int, tmp: Path) -> float:
    """Runs per second of short runs through HTTP, 8 at a time."""
    from concurrent.futures import ThreadPoolExecutor

    schema = f"bench_srt_{uuid.uuid4().hex[:8]}"
    db = (
        ["--db", str(tmp / f"{schema}.db")]
        if kind == "sqlite"
        else ["--postgres", PG_DSN, "--postgres-schema", schema]
    )
    service = _Service(db, "serve_fast", [] if durable else ["--no-durable"])

    def one(_: int) -> None:
        _until(service.url, _start(service.url), "run.completed")

    try:
        one(0)  # warm-up
        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one, range(runs)))
        return runs / (time.perf_counter() - t0)
    finally:
        service.kill()
        if kind != "sqlite":
            _drop([schema, schema + "_dbos"])


def _pcts(values: Sequence[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def service(kills: int, runs: int) -> None:
    print(f"\ntether serve: SIGKILL mid-reply -> run.recovered / run.completed ({kills} kills)")
    print(f"{'store':<10} {'moved p50':>10} {'moved p99':>10} {'done p50':>9} {'done p99':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("sqlite", "postgres"):
            times = [serve_kill(kind, Path(tmp)) for _ in range(kills)]
            m50, m99 = _pcts([t[0] for t in times])
            d50, d99 = _pcts([t[1] for t in times])
            print(f"{kind:<10} {m50:>10.2f} {m99:>10.2f} {d50:>9.2f} {d99:>9.2f}")
        print(f"\ntether serve: {runs} short runs through HTTP, 8 at a time")
        print(f"{'store':<10} {'--no-durable':>13} {'--durable':>10} {'ratio':>6}")
        for kind in ("sqlite", "postgres"):
            plain = serve_throughput(kind, False, runs, Path(tmp))
            durable = serve_throughput(kind, True, runs, Path(tmp))
            print(f"{kind:<10} {plain:>13.1f} {durable:>10.1f} {durable / plain:>6.2f}")


def main(quick: bool, smoke: bool = False) -> None:
    kills, runs = (1, 2) if smoke else (4, 20) if quick else (10, 60)
    print(f"recovery: SIGKILL during a model request -> the continued run's first request ({kills} kills)")
    print(f"{'store':<10} {'p50 s':>8} {'p99 s':>8}")
    for kind in ("sqlite", "postgres"):
        r = recovery(kind, kills)
        print(f"{kind:<10} {r['p50']:>8.2f} {r['p99']:>8.2f}")
    print(f"\nthroughput: {runs} stored runs of {STEPS} tool steps + an answer, sequential")
    print(f"{'store':<10} {'code':<22} {'runs/s':>8} {'steps/s':>9}")
    baseline = os.environ.get("TETHER_BENCH_BASELINE_SRC")
    for kind in ("sqlite", "postgres"):
        cells = [("0.2", "plain", baseline)] if baseline else []
        cells += [("this tree", "plain", None), ("this tree, DurableAgent", "durable", None)]
        for label, mode, src in cells:
            args = [sys.executable, "-m", "bench.durable", f"--throughput={kind}:{mode}:{runs}"]
            done = subprocess.run(args, env=_env(src), capture_output=True, text=True, check=True)
            m = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{kind:<10} {label:<22} {m['runs_s']:>8.1f} {m['steps_s']:>9.0f}")
    service(kills, 8 if smoke else 40 if quick else 120)


if __name__ == "__main__":
    cell = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--throughput=")), None)
    if cell is not None:
        kind_, mode_, runs_ = cell.split(":")
        print(json.dumps(asyncio.run(throughput(kind_, mode_, int(runs_)))))
    else:
        main("--quick" in sys.argv, "--smoke" in sys.argv)
