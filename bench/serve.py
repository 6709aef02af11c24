"""Load on ``tether serve``, bounded and on loopback only: a real server process, real HTTP.

    python -m bench.serve                 # SQLite: 50 concurrent runs, 200 SSE clients, idle memory
    python -m bench.serve --postgres DSN  # the same on PostgreSQL, plus re-attach on a second
                                          # process with LISTEN/NOTIFY against polling
    python -m bench.serve --quick         # smaller
    python -m bench.serve --smoke         # seconds: every phase once at the smallest size (CI)

Reported: runs/s; event latency p50/p99 from the model's token (the scripted model stamps each
word with the time it yields it) to the client that parsed the event; lost or duplicated events
(every client checks its stream is 1..N with no gap and ends with run.completed); server memory
per idle stream (RSS growth over streams held open on paused runs). Goal: p99 < 20 ms at 200
streams on a 2-core machine; < 50 KB per idle stream.

The service is started with its per-user limits off (``--max-active-runs 0 --max-open-streams
0``): every client is the same bench user, and the bench measures the server under that load,
not the limits that would turn most of it away with 429.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from tether.agent import Tool, function_tool
from tether.messages import Message, Text, ToolCall, Usage
from tether.models.testing import FunctionInfo, FunctionModel

ROOT = Path(__file__).resolve().parent.parent
WORDS = int(os.environ.get("BENCH_SERVE_WORDS", "40"))
DELAY = float(os.environ.get("BENCH_SERVE_DELAY", "0.02"))
START = float(os.environ.get("BENCH_SERVE_START", "2.0"))
"""Seconds before a run's first token: every client is attached by then, so latency is measured
on live streams, not on the catch-up of clients still connecting."""


# -- the server side: a model stamping its tokens, and a tool that pauses ------------------------------
async def _stamped(messages: Sequence[Message], info: FunctionInfo) -> Message:
    """``WORDS`` words (stamped as they are sent); a prompt containing ``pause`` makes it call the
    approval tool ``hold`` instead (an idle stream)."""
    last = messages[-1] if messages else None
    if last is not None and last.role == "user" and "pause" in last.text:
        return Message("assistant", (ToolCall(f"call_{len(messages)}", "hold", "{}"),), usage=Usage())
    await asyncio.sleep(0 if _fast(messages) else START)
    return Message("assistant", (Text(" ".join(["word"] * WORDS)),), usage=Usage())


def _fast(messages: Sequence[Message]) -> bool:
    return "fast" in messages[-1].text  # the throughput phase: no pauses, server capacity


def model() -> FunctionModel:
    """Streams ``WORDS`` words, one every ``DELAY`` seconds, each ``t<ns since epoch>``."""
    return FunctionModel(
        _stamped, name="stamped", delay=lambda messages: 0.0 if _fast(messages) else DELAY, stamp=True
    )


def hold() -> str:
    """Wait for a person (an approval that never comes, in the bench)."""
    return "held"


def tools() -> list[Tool[Any]]:
    return [function_tool(requires_approval=True)(hold)]


# -- the client side --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env(extra: dict[str, str] | None = None) -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    out["TETHER_SERVE_LOG_LEVEL"] = "warning"
    out.update(extra or {})
    return out


def db_args(db: str | None, dsn: str | None, schema: str | None) -> list[str]:
    if dsn:
        return ["--postgres", dsn, "--postgres-schema", schema or "tether_bench"]
    return ["--db", str(db)]


def start_server(
    args: list[str], extra_env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tether.cli", "serve", *args, "--port", str(port)]
    cmd += ["--model", "py:bench.serve:model", "--tools", "py:bench.serve:tools"]
    cmd += ["--max-active-runs", "0", "--max-open-streams", "0"]  # one user holds every stream
    proc = subprocess.Popen(cmd, env=env(extra_env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("server did not start")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Stats:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.lost = 0
        self.duplicated = 0
        self.unfinished = 0
        self.streams = 0


async def sse_lines(url: str, path: str, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """A minimal HTTP/1.1 SSE client on a raw asyncio connection (chunked transfer encoding):
    the measurement is of the server, not of a client library's overhead per event."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n{head}\r\n".encode()
        )
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"{path}: {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        pending = b""
        while True:
            size = int((await reader.readline()).strip() or b"0", 16)
            if size == 0:
                return
            pending += await reader.readexactly(size)
            await reader.readexactly(2)
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line
    finally:
        writer.close()


async def follow(url: str, token: str, run_id: str, stats: Stats, after: int = 0) -> None:
    """Read one run's stream to its end, checking the sequence and timing each text delta."""
    headers = {"Authorization": f"Bearer {token}"}
    if after:
        headers["Last-Event-ID"] = str(after)
    expected = after + 1
    finished = False
    attached = time.time_ns()  # tokens stamped before this were not live for this client
    data_seq = 0
    async for line in sse_lines(url, f"/v1/runs/{run_id}/events", headers):
        if line.startswith(b"id: "):
            data_seq = int(line[4:])
        elif line.startswith(b"data: "):
            now = time.time_ns()
            if data_seq < expected:
                stats.duplicated += 1
            elif data_seq > expected:
                stats.lost += data_seq - expected
            expected = data_seq + 1
            event = json.loads(line[6:])
            if event["type"] == "text.delta":
                stamp = int(event["text"].strip()[1:])
                if stamp >= attached:
                    stats.latencies.append((now - stamp) / 1e6)
            elif event["type"] == "run.completed":
                finished = True
    stats.streams += 1
    if not finished:
        stats.unfinished += 1


async def start(client: httpx.AsyncClient, prompt: str) -> str:
    cid = (await client.post("/v1/conversations")).json()["id"]
    r = await client.post(f"/v1/conversations/{cid}/runs", json={"prompt": prompt})
    r.raise_for_status()
    return str(r.json()["id"])


def client_for(url: str, token: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    return httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120, limits=limits
    )


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def load(url: str, token: str, runs: int, per_run: int) -> dict[str, Any]:
    """``runs`` concurrent runs, ``per_run`` SSE clients each (attached before the first token)."""
    stats = Stats()
    async with client_for(url, token) as client:
        t0 = time.perf_counter()
        ids = await asyncio.gather(*(start(client, "go") for _ in range(runs)))
        await asyncio.gather(*(follow(url, token, rid, stats) for rid in ids for _ in range(per_run)))
        elapsed = time.perf_counter() - t0
    return {
        "runs": runs,
        "streams": stats.streams,
        "runs_per_s": runs / elapsed,
        "p50_ms": pct(stats.latencies, 0.50),
        "p99_ms": pct(stats.latencies, 0.99),
        "events": len(stats.latencies),
        "lost": stats.lost,
        "duplicated": stats.duplicated,
        "unfinished": stats.unfinished,
    }


async def throughput(url: str, token: str, workers: int, seconds: float) -> float:
    """Runs/s with ``workers`` clients each starting a run and following it to the end, again and
    again; the model streams its tokens without pauses, so this is the server's capacity."""
    done = 0
    stats = Stats()
    async with client_for(url, token) as client:
        deadline = time.perf_counter() + seconds
        t0 = time.perf_counter()

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await follow(url, token, await start(client, "fast"), stats)
                done += 1

        await asyncio.gather(*(worker() for _ in range(workers)))
        elapsed = time.perf_counter() - t0
    assert stats.lost == stats.duplicated == stats.unfinished == 0, vars(stats)
    return done / elapsed


async def idle_memory(url: str, token: str, pid: int, streams: int) -> float:
    """KB of server RSS per idle stream (streams on paused runs, nothing to send)."""
    async with client_for(url, token) as client:
        paused: list[str] = []
        for _ in range(streams + 20):
            paused.append(await start(client, "pause"))
        for rid in paused:
            while (await client.get(f"/v1/runs/{rid}")).json()["status"] != "paused":
                await asyncio.sleep(0.01)
        stop = asyncio.Event()
        opened = 0

        async def hold_open(rid: str) -> None:
            nonlocal opened
            async with client.stream("GET", f"/v1/runs/{rid}/events") as response:
                opened += 1
                async for _ in response.aiter_lines():
                    if stop.is_set():
                        break
                await stop.wait()

        warm = [asyncio.create_task(hold_open(rid)) for rid in paused[:20]]
        while opened < 20:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        before = rss_kb(pid)
        rest = [asyncio.create_task(hold_open(rid)) for rid in paused[20:]]
        while opened < streams + 20:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        after = rss_kb(pid)
        stop.set()
        for task in [*warm, *rest]:
            task.cancel()
        await asyncio.gather(*warm, *rest, return_exceptions=True)
    return (after - before) / streams


async def cross(url_a: str, url_b: str, token: str, runs: int) -> dict[str, Any]:
    """Runs started on A, followed on B from before their first token (events cross processes)."""
    stats = Stats()
    async with client_for(url_a, token) as a, client_for(url_b, token):
        ids = await asyncio.gather(*(start(a, "go") for _ in range(runs)))
        await asyncio.gather(*(follow(url_b, token, rid, stats) for rid in ids))
    return {
        "p50_ms": pct(stats.latencies, 0.5),
        "p99_ms": pct(stats.latencies, 0.99),
        "lost": stats.lost,
        "duplicated": stats.duplicated,
        "unfinished": stats.unfinished,
    }


def add_user(args: list[str]) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "tether.cli", "serve", "users", "add", f"bench{time.time_ns()}", *args],
        env=env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def smoke_scale() -> None:
    """Seconds instead of minutes: a few words, no pause before the first (the server process
    reads the same settings from the environment)."""
    global WORDS, DELAY, START
    WORDS, DELAY, START = 5, 0.005, 0.3
    os.environ.update(
        {"BENCH_SERVE_WORDS": str(WORDS), "BENCH_SERVE_DELAY": str(DELAY), "BENCH_SERVE_START": str(START)}
    )


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    smoke = "--smoke" in argv
    dsn = argv[argv.index("--postgres") + 1] if "--postgres" in argv else None
    runs, per_run, idle = (10, 4, 100) if quick else (50, 4, 400)
    seconds = 5.0 if quick else 15.0
    if smoke:
        smoke_scale()
        runs, per_run, idle, seconds = 2, 2, 5, 1.0
    with tempfile.TemporaryDirectory() as tmp:
        schema = f"tether_bench_{os.getpid()}"
        args = db_args(str(Path(tmp) / "bench.db"), dsn, schema)
        token = add_user(args)
        proc, url = start_server(args)
        try:
            print(
                f"tether serve bench ({'PostgreSQL' if dsn else 'SQLite'}), {WORDS} tokens "
                f"per run, {DELAY * 1000:.0f} ms apart"
            )
            asyncio.run(load(url, token, 2 if smoke else 5, 1))  # warm up
            result = asyncio.run(load(url, token, runs, per_run))
            print(
                f"  {result['runs']} concurrent runs, {result['streams']} SSE clients: "
                f"event latency p50 {result['p50_ms']:.2f} ms, p99 {result['p99_ms']:.2f} ms over "
                f"{result['events']} events; lost {result['lost']}, duplicated {result['duplicated']}, "
                f"unfinished {result['unfinished']}"
            )
            rate = asyncio.run(throughput(url, token, runs, seconds))
            print(
                f"  throughput: {rate:.1f} runs/s ({WORDS} tokens each, no model pauses; "
                f"{runs} clients back to back)"
            )
            per_stream = asyncio.run(idle_memory(url, token, proc.pid, idle))
            print(f"  memory per idle stream: {per_stream:.1f} KB (server RSS growth over {idle} streams)")
        finally:
            stop(proc)
        if dsn:
            for notify in ("listen", "poll"):
                a, url_a = start_server([*args, "--notify", notify])
                b, url_b = start_server([*args, "--notify", notify])
                try:
                    asyncio.run(cross(url_a, url_b, token, 2 if smoke else 5))
                    got = asyncio.run(cross(url_a, url_b, token, runs))
                finally:
                    stop(a)
                    stop(b)
                print(
                    f"  re-attach on another process ({notify}): p50 {got['p50_ms']:.2f} ms, "
                    f"p99 {got['p99_ms']:.2f} ms; lost {got['lost']}, duplicated {got['duplicated']}"
                )
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main(sys.argv[1:])
