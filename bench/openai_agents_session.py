"""TetherSession beside the OpenAI Agents SDK's own SQLiteSession, both on a SQLite file.

    python -m bench.openai_agents_session [--quick]
    python -m bench.openai_agents_session --smoke   # a few turns: that it runs (CI)

What a ``Runner`` does per turn against its session: ``get_items()`` (the whole history), then
``add_items`` of the prompt, of a reasoning item with a tool call and its output, and of the
answer. Measured: the time of one such turn at 10, 100 and 500 prior turns; ``get_items(20)`` on
the longest session; ``get_items()`` after a ``clear_session`` on it; ``pop_item``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents import SQLiteSession

from tether.integrations.openai_agents import TetherSession
from tether.stores import SQLiteStore


def turn_items(n: int) -> list[list[Any]]:
    """The add_items batches of turn ``n``, as the Runner writes them."""
    return [
        [{"role": "user", "content": f"question {n}: what is the weather in city {n}?"}],
        [
            {"type": "reasoning", "id": f"rs_{n}", "summary": [{"type": "summary_text", "text": "look up"}]},
            {
                "type": "function_call",
                "call_id": f"call_{n}",
                "name": "weather",
                "arguments": f'{{"city": "city {n}"}}',
                "id": f"fc_{n}",
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": f"call_{n}", "output": f"sunny in city {n}"},
        ],
        [
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{n}",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"It is sunny in city {n}.", "annotations": []}],
            }
        ],
    ]


async def turn(session: Any, n: int) -> None:
    await session.get_items()
    for batch in turn_items(n):
        await session.add_items(batch)


async def timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """Median seconds of ``repeat`` calls."""
    times: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def measure(name: str, session: Any, checkpoints: list[int]) -> dict[str, float]:
    results: dict[str, float] = {}
    done = 0
    for target in checkpoints:
        while done < target:
            await turn(session, done)
            done += 1
        counter = [done]

        async def one_turn() -> None:
            await turn(session, counter[0])
            counter[0] += 1

        results[f"turn at {target} turns"] = await timed(one_turn, 5)
        done = counter[0]
    results["get_items(20)"] = await timed(lambda: session.get_items(20), 20)
    results["pop_item"] = await timed(session.pop_item, 5)
    await session.clear_session()
    await session.add_items(turn_items(0)[0])
    results["get_items() after clear"] = await timed(session.get_items, 20)
    print(f"  {name}: done")
    return results


async def main(quick: bool, smoke: bool = False) -> None:
    checkpoints = [2, 4] if smoke else [10, 50] if quick else [10, 100, 500]
    with tempfile.TemporaryDirectory() as tmp:
        sdk = SQLiteSession("bench", str(Path(tmp) / "sdk.db"))
        store = SQLiteStore(Path(tmp) / "tether.db")
        ours = TetherSession("bench", store, owner="bench")
        theirs_r = await measure("SQLiteSession", sdk, checkpoints)
        ours_r = await measure("TetherSession(SQLiteStore)", ours, checkpoints)
        await store.close()
        sdk.close()
    print(f"{'':32} {'SQLiteSession':>14} {'TetherSession':>14} {'ratio':>7}")
    for key, theirs in theirs_r.items():
        mine = ours_r[key]
        print(f"{key:32} {theirs * 1000:12.2f}ms {mine * 1000:12.2f}ms {mine / theirs:6.2f}x")


if __name__ == "__main__":
    asyncio.run(main("--quick" in sys.argv, "--smoke" in sys.argv))
