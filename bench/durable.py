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

SMOKE_NEEDS = ("dbos", "psycopg")
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


if __name__ == "__main__":
    cell = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--throughput=")), None)
    if cell is not None:
        kind_, mode_, runs_ = cell.split(":")
        print(json.dumps(asyncio.run(throughput(kind_, mode_, int(runs_)))))
    else:
        main("--quick" in sys.argv, "--smoke" in sys.argv)
