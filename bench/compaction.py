"""Compaction: cost per compaction against the log's length, tokens per request before and after,
the cost of a step as the history grows, and the retention of planted facts.

Run: python -m bench.compaction [--quick] [--no-local]
     python -m bench.compaction --smoke   (every section once, at the smallest sizes: that it runs)

1. Cost per compaction. A ``Compactor`` (default strategies: elide, then summarize) is fed the
   shared generator's conversation one message at a time and ``prepare`` is called before every
   model request (after each user and tool message), window 32,000 tokens. The summarizer is
   scripted and instant (a bounded summary), so the time is tether's own work. Per compaction:
   µs of the ``prepare`` that compacted, messages the summarizer read, transcript characters;
   medians of the compactions made while the log was between 90% and 100% of 1k, 10k and 100k
   messages. Incremental summaries keep all three flat.
   Also: a new run over a stored log of N messages resuming from its latest record: the first
   ``prepare`` with the messages loaded since the boundary (what a run should load) and with the
   whole log (counting every message once).
2. Tokens per request: the mean over the run's requests of the full history's tokens (no
   compaction) against the compacted view's, on the generator's conversations.
3. Step cost: µs per ``prepare`` that did not compact, by history length.
4. Retention: a synthetic task conversation with a fact planted every 7 messages (tests/agent/
   compaction_data.py), compacted repeatedly; the share of facts the final view holds and the
   share ``recall`` brings back. Summarizers: the deterministic scripted one of the tests, and
   the bundled local model (SmolLM2-135M through llama.cpp) in a child process; if it crashes or
   is missing, the bench says so and goes on.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from bench.generator import conversation
from tether import Message
from tether.agent import Compaction, Compactor
from tether.history import normalize_history
from tether.models import Model
from tether.models.testing import FunctionInfo, FunctionModel
from tether.stores import CompactionRecord

WINDOW = 32_000
SIZES = (1_000, 10_000, 100_000)
SMOKE = "--smoke" in sys.argv
"""Every section at its smallest size; the local model is left out, as with --quick (minutes per
summary on a busy 2-core machine; bench.local_ttft --smoke runs that model)."""


def _summary_model() -> FunctionModel:
    """An instant summarizer writing a summary of bounded size (~300 tokens)."""

    def summarize(messages: Sequence[Message], info: FunctionInfo) -> str:
        text = messages[-1].text
        return f"summary of {len(text):,} characters: " + text[-900:].replace("\n", " ")

    return FunctionModel(summarize, name="instant")


def _idle_model() -> FunctionModel:
    return FunctionModel(lambda m, i: "unused", name="agent")


def history(n: int, seed: int = 3) -> list[Message]:
    return normalize_history(conversation(n, seed=seed))[0]


class _Timed:
    """Feeds a history to a compactor as a run does and times every ``prepare``."""

    def __init__(self, compactor: Compactor) -> None:
        self.compactor = compactor
        self.steps: list[tuple[int, float, bool, int, int]] = []  # (length, s, compacted, view, full)

    async def feed(self, messages: Sequence[Message]) -> None:
        grown: list[Message] = []
        tally = self.compactor.tally
        for m in messages:
            grown.append(m)
            if m.role not in ("user", "tool"):
                continue
            t0 = time.perf_counter()
            prepared = await self.compactor.prepare(grown, window=WINDOW)
            elapsed = time.perf_counter() - t0
            view_tokens = sum(tally.count(v) for v in prepared.messages) if len(grown) % 50 == 1 else -1
            self.steps.append((len(grown), elapsed, bool(prepared.reports), view_tokens, tally.total))


async def cost_per_compaction(sizes: Sequence[int]) -> dict[int, list[tuple[int, float, bool, int, int]]]:
    print(f"1. cost per compaction (window {WINDOW:,}; elide then summarize; instant summarizer)")
    print(f"{'log':>8} {'compactions':>12} {'µs each':>9} {'msgs read':>10} {'chars read':>11}")
    runs: dict[int, list[tuple[int, float, bool, int, int]]] = {}
    for n in sizes:
        inputs: list[int] = []
        model = _summary_model()
        original = model.fn

        def recording(messages: Sequence[Message], info: FunctionInfo, original: Any = original) -> Any:
            inputs.append(len(messages[-1].text))
            return original(messages, info)

        model.fn = recording
        compactor = Compactor(Compaction(summarizer=model), _idle_model(), conversation_id="bench")
        timed = _Timed(compactor)
        await timed.feed(history(n))
        runs[n] = timed.steps
        reports = compactor.reports
        late = [
            (r, s)
            for r, s in zip(reports, [s for s in timed.steps if s[2]], strict=True)
            if s[0] >= 0.9 * n and r.summarized
        ]
        us = statistics.median(s[1] for _, s in late) * 1e6 if late else float("nan")
        read = statistics.median(r.summarized[1] - r.summarized[0] + 1 for r, _ in late if r.summarized)
        chars = statistics.median(inputs[-len(late) :]) if late else 0
        print(f"{n:>8,} {len(reports):>12,} {us:>9,.0f} {read:>10,.0f} {chars:>11,.0f}")
    return runs


async def resume(sizes: Sequence[int]) -> None:
    print("\n   resuming a stored log from its latest record (first prepare of a new run)")
    print(f"{'log':>8} {'since boundary µs':>18} {'whole log µs':>13}")
    for n in sizes:
        log = history(n)
        boundary = n - 40
        while log[boundary].role not in ("user", "assistant"):
            boundary -= 1
        record = CompactionRecord(
            id="r",
            conversation_id="bench",
            boundary=boundary,
            summary="earlier work",
            created_at=CompactionRecord.now(),
        )
        cfg = Compaction(summarizer=_summary_model())
        times = []
        for offset, messages in ((boundary, log[boundary:]), (0, log)):
            best = float("inf")
            for _ in range(1 if SMOKE else 3):
                c = Compactor(cfg, _idle_model(), conversation_id="bench", record=record, offset=offset)
                t0 = time.perf_counter()
                await c.prepare(messages, window=WINDOW)
                best = min(best, time.perf_counter() - t0)
            times.append(best)
        print(f"{n:>8,} {times[0] * 1e6:>18,.0f} {times[1] * 1e6:>13,.0f}")


def tokens_per_request(runs: dict[int, list[tuple[int, float, bool, int, int]]]) -> None:
    print("\n2. tokens per request (mean over the run's requests, sampled every 50 messages)")
    print(f"{'log':>8} {'full history':>13} {'compacted':>10} {'ratio':>7}")
    for n, steps in runs.items():
        sampled = [(view, full) for _, _, _, view, full in steps if view >= 0]
        full = statistics.mean(f for _, f in sampled)
        view = statistics.mean(v for v, _ in sampled)
        print(f"{n:>8,} {full:>13,.0f} {view:>10,.0f} {view / full:>7.1%}")


def step_cost(runs: dict[int, list[tuple[int, float, bool, int, int]]]) -> None:
    print("\n3. step cost: µs per prepare that did not compact (median), by history length")
    steps = runs[max(k for k in runs if k <= 10_000)]
    print(f"{'history':>8} {'µs/step':>8}")
    for lo, hi in ((0, 200), (900, 1_100), (4_900, 5_100), (9_800, 10_000)):
        times = [s for length, s, compacted, _, _ in steps if lo <= length < hi and not compacted]
        if times:
            print(f"{hi:>8,} {statistics.median(times) * 1e6:>8.1f}")


async def retention(model: Model, n: int, window: int, **config: Any) -> dict[str, Any]:
    """Planted facts through repeated compaction: shares in view and recalled."""
    from tests.agent.compaction_data import feed, task_conversation
    from tests.agent.compaction_data import retention as kept_in

    compactor = Compactor(Compaction(summarizer=model, **config), _idle_model(), conversation_id="bench")
    messages, facts = task_conversation(n, result_bytes=600)
    t0 = time.perf_counter()
    prepared = await feed(compactor, messages, window=window)
    elapsed = time.perf_counter() - t0
    view = list(prepared[-1].messages)
    kept = kept_in(view, facts)
    tool = compactor.recall_tool()
    lost = [f for f in facts if f not in kept]
    recalled = 0
    for fact in lost:
        text = await tool.invoke(None, {"query": fact.text, "limit": 1})  # type: ignore[arg-type]
        recalled += f"--- message {fact.position} " in text and fact.text in text
    reports = compactor.reports
    return {
        "facts": len(facts),
        "in_view": len(kept),
        "in_summary": sum(1 for f in kept if f.position < compactor.boundary),
        "recalled": recalled,
        "lost": len(lost),
        "compactions": len(reports),
        "summaries": sum(1 for r in reports if r.summarized),
        "failures": [r.error for r in reports if r.error],
        "truncated": sum(1 for r in reports if r.truncated),
        "seconds": round(elapsed, 1),
    }


def _print_retention(name: str, r: dict[str, Any]) -> None:
    facts = r["facts"]
    print(
        f"{name:<22} {r['in_view'] / facts:>7.0%} {r['in_summary']:>10} {r['recalled']}/{r['lost']:<6} "
        f"{r['summaries']:>9} {r['seconds']:>7}s"
    )
    if r.get("truncated"):
        print(f"{'':<22} summaries cut at their token limit (kept): {r['truncated']}")
    for error in sorted(set(r["failures"]))[:3]:
        print(f"{'':<22} summarizer failure: {error[:100]}")


async def local_retention() -> None:
    """The child process: the local model as summarizer; prints one JSON line."""
    from tether.models.local import LocalModel

    model = LocalModel(n_ctx=8_192)
    result = await retention(
        model,
        201,
        6_000,
        strategies=("summarize",),
        summary_tokens=300,
        chunk_tokens=2_500,
        max_part_chars=600,
        timeout=600,
    )
    print(json.dumps(result))


async def retention_section(local: bool) -> None:
    from tests.agent.compaction_data import Summaries

    print("\n4. retention of planted facts (one every 7 messages)")
    head = f"{'summarizer':<22} {'in view':>7} {'in summary':>10} {'recalled':<8} {'summaries':>9}"
    print(f"{head} {'time':>8}")
    scripted = await retention(Summaries(max_lines=60).model, *((301, 5_000) if SMOKE else (2_001, 20_000)))
    _print_retention("scripted (tests)", scripted)
    if not local:
        print("local model: skipped (--quick, --smoke or --no-local)")
        return
    try:
        child = subprocess.run(
            [sys.executable, "-m", "bench.compaction", "--local-child"],
            capture_output=True,
            text=True,
            timeout=3_600,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print("local model: skipped (no result within an hour)")
        return
    if child.returncode != 0:
        how = f"signal {-child.returncode}" if child.returncode < 0 else f"exit {child.returncode}"
        tail = child.stderr.strip().splitlines()[-1:] or [""]
        print(f"local model: skipped (the child process ended with {how}) {tail[0][:120]}")
        return
    _print_retention("local SmolLM2-135M", json.loads(child.stdout.strip().splitlines()[-1]))


async def main(quick: bool, local: bool) -> None:
    sizes = SIZES[:1] if SMOKE else SIZES[:2] if quick else SIZES
    runs = await cost_per_compaction(sizes)
    await resume(sizes)
    tokens_per_request(runs)
    step_cost(runs)
    await retention_section(local and not quick and not SMOKE)


if __name__ == "__main__":
    if "--local-child" in sys.argv:
        asyncio.run(local_retention())
    else:
        asyncio.run(main("--quick" in sys.argv, "--no-local" not in sys.argv))


__all__ = ["history", "main", "retention"]
