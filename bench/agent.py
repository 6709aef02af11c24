"""Agent loop speed: tether vs pydantic-ai (FunctionModel) vs the OpenAI Agents SDK (scripted Model).

Each run: a supplied history of 0 / 1,000 / 10,000 messages from the shared generator, a prompt,
then 10 tool steps (one call each, an async tool) and a final answer — 11 model requests. The
scripted models do O(1) work per request. Reported: ms per run, ms per step (run / 11) and, for
tether, the marginal cost of one step ((run with 200 steps - run with 0 steps) / 200), which
shows that per-step work does not grow with the history.

    python -m bench.agent            # full
    python -m bench.agent --quick    # fewer repetitions
    python -m bench.agent --telemetry [--quick]   # telemetry overhead columns only
    python -m bench.agent --compaction [--quick]  # the step cost with and without compaction
    python -m bench.agent --smoke    # all three tables once, tiny sizes: that they run (CI)

Telemetry overhead: the marginal step cost and the 10-step run of tether with telemetry off and
OpenTelemetry not imported (``off``), with the API imported and no provider configured
(``api, no provider``: the no-op tracer, detected once per run), and with the SDK: a tracer
provider with a ``BatchSpanProcessor`` (an exporter that discards), then also a meter provider.
Each column runs in a fresh process (so ``off`` really has no OpenTelemetry module loaded);
ratios are against ``off``. ``TETHER_BENCH_BASELINE_SRC=<dir>`` adds a column for another source
tree (e.g. the code before telemetry existed), to check that ``off`` costs what it did.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from bench.generator import conversation
from tether import Message, Reasoning, Text, ToolCall, assistant
from tether.agent import Agent as TetherAgent
from tether.history import normalize_history
from tether.models.testing import FunctionInfo, FunctionModel

STEPS = 10
LONG = 200  # steps of the run that measures the marginal cost of one step
SIZES = (0, 1_000, 10_000)
SMOKE = "--smoke" in sys.argv
"""Every table once with tiny sizes and one repetition (the telemetry columns' processes too)."""
if SMOKE:
    LONG, SIZES = 20, (0, 100)


def history(n: int) -> list[Message]:
    """The shared generator's history, repaired so every framework gets a valid conversation."""
    return normalize_history(conversation(n, seed=7))[0] if n else []


# -- tether -------------------------------------------------------------------------------------


def tether_runner(
    steps: int, telemetry: Any = None, compaction: Any = None
) -> Callable[[list[Message]], Awaitable[Any]]:
    async def step(i: int) -> str:
        return f"step {i} ok"

    counter = [0]

    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        counter[0] += 1
        if counter[0] <= steps:
            return assistant(ToolCall(f"b{counter[0]}", "step", f'{{"i": {counter[0]}}}'))
        return "done"

    extra: dict[str, Any] = {"telemetry": telemetry} if telemetry is not None else {}
    if compaction is not None:
        extra["compaction"] = compaction
    agent = TetherAgent(FunctionModel(reply), tools=[step], max_steps=steps + 5, **extra)

    async def run(h: list[Message]) -> Any:
        counter[0] = 0
        result = await agent.run("go", history=h)
        assert result.requests == steps + 1
        return result

    return run


# -- pydantic-ai --------------------------------------------------------------------------------


def pydantic_history(h: list[Message]) -> list[Any]:
    from pydantic_ai import messages as pm

    out: list[Any] = []
    for m in h:
        if m.role == "user":
            out.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=m.text)]))
        elif m.role == "tool":
            out.append(
                pm.ModelRequest(
                    parts=[
                        pm.ToolReturnPart(tool_name=r.name, content=r.text, tool_call_id=r.call_id)
                        for r in m.tool_results
                    ]
                )
            )
        elif m.role == "assistant":
            parts: list[Any] = []
            for p in m.parts:
                if isinstance(p, Reasoning):
                    parts.append(pm.ThinkingPart(content=p.text, signature=p.signature))
                elif isinstance(p, Text):
                    parts.append(pm.TextPart(content=p.text))
                elif isinstance(p, ToolCall):
                    parts.append(pm.ToolCallPart(tool_name=p.name, args=p.arguments, tool_call_id=p.id or ""))
            out.append(pm.ModelResponse(parts=parts, model_name="bench-model"))
    return out


def pydantic_runner(steps: int) -> Callable[[list[Any]], Awaitable[Any]]:
    from pydantic_ai import Agent
    from pydantic_ai import messages as pm
    from pydantic_ai.models.function import AgentInfo
    from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel

    counter = [0]

    def reply(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        counter[0] += 1
        if counter[0] <= steps:
            call = pm.ToolCallPart(tool_name="step", args={"i": counter[0]}, tool_call_id=f"b{counter[0]}")
            return pm.ModelResponse(parts=[call])
        return pm.ModelResponse(parts=[pm.TextPart(content="done")])

    agent = Agent(PydanticFunctionModel(reply))

    @agent.tool_plain
    async def step(i: int) -> str:
        return f"step {i} ok"

    async def run(h: list[Any]) -> Any:
        counter[0] = 0
        result = await agent.run("go", message_history=h)
        assert result.output == "done"
        return result

    return run


# -- OpenAI Agents SDK --------------------------------------------------------------------------


def openai_items(h: list[Message]) -> list[Any]:
    items: list[Any] = []
    for m in h:
        if m.role == "user":
            items.append({"role": "user", "content": m.text})
        elif m.role == "tool":
            items.extend(
                {"type": "function_call_output", "call_id": r.call_id, "output": r.text}
                for r in m.tool_results
            )
        elif m.role == "assistant":
            # reasoning is not replayed: the SDK needs provider item ids for it
            if m.text:
                items.append({"role": "assistant", "content": m.text})
            items.extend(
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in m.tool_calls
            )
    return items


def openai_runner(steps: int) -> Callable[[list[Any]], Awaitable[Any]]:
    from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    counter = [0]

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            counter[0] += 1
            if counter[0] <= steps:
                out: Any = ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"b{counter[0]}",
                    name="step",
                    arguments=f'{{"i": {counter[0]}}}',
                    id=f"fc_{counter[0]}",
                )
            else:
                out = ResponseOutputMessage(
                    id="msg_1",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
                )
            return ModelResponse(output=[out], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def step(i: int) -> str:
        return f"step {i} ok"

    agent = Agent(name="bench", model=Scripted(), tools=[step])

    async def run(items: list[Any]) -> Any:
        counter[0] = 0
        result = await Runner.run(agent, [*items, {"role": "user", "content": "go"}], max_turns=steps + 5)
        assert result.final_output == "done"
        return result

    return run


# -- timing -------------------------------------------------------------------------------------


async def measure(run: Callable[[Any], Awaitable[Any]], h: Any, repeat: int) -> float:
    """Median seconds per run (after one warm-up run)."""
    await run(h)
    times: list[float] = []
    for _ in range(1 if SMOKE else max(repeat, 3)):
        t0 = time.perf_counter()
        await run(h)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def main(quick: bool) -> None:
    print(f"{STEPS} tool steps + final answer ({STEPS + 1} requests); median per run")
    print(f"{'history':>8} {'framework':<12} {'ms/run':>10} {'ms/step':>9} {'vs tether':>10}")
    for n in SIZES:
        h = history(n)
        repeat = {0: 200, 1_000: 20, 10_000: 3}.get(n, 1) // (4 if quick else 1) or 1
        peer_repeat = {0: 50, 1_000: 5, 10_000: 2}.get(n, 1) // (2 if quick else 1) or 1
        t_tether = await measure(tether_runner(STEPS), h, repeat)
        t_zero = await measure(tether_runner(0), h, repeat)
        t_long = await measure(tether_runner(LONG), h, repeat)
        t_pyd = await measure(pydantic_runner(STEPS), pydantic_history(h), peer_repeat)
        t_oai = await measure(openai_runner(STEPS), openai_items(h), peer_repeat)
        per = STEPS + 1
        for name, t in (("tether", t_tether), ("pydantic-ai", t_pyd), ("openai-agents", t_oai)):
            ratio = "" if name == "tether" else f"{t / t_tether:>9.1f}x"
            print(f"{n:>8} {name:<12} {t * 1e3:>10.2f} {t * 1e3 / per:>9.3f} {ratio:>10}")
        marginal = (t_long - t_zero) / LONG
        print(f"{n:>8} {'tether':<12} marginal step {marginal * 1e3:.3f} ms; run setup {t_zero * 1e3:.2f} ms")


# -- compaction ---------------------------------------------------------------------------------------


def _compaction() -> Any:
    """A configured compaction (window 200,000 tokens, an instant summarizer): a long history is
    compacted at the run's first request, every later step is a check."""
    from tether.agent import Compaction

    def summarize(messages: Sequence[Message], info: FunctionInfo) -> str:
        return "summary: " + messages[-1].text[-600:]

    return Compaction(window=200_000, summarizer=FunctionModel(summarize, name="instant"), recall=False)


async def compaction_steps(quick: bool) -> None:
    """The marginal step ((200-step run - 0-step run) / 200), without and with compaction."""
    print(f"marginal step cost ({LONG}-step run minus 0-step run, / {LONG}); median")
    print(f"{'history':>8} {'no compaction':>15} {'compaction configured':>23}")
    for n in SIZES:
        h = history(n)
        repeat = max(3, {0: 60, 1_000: 10, 10_000: 5}.get(n, 1) // (3 if quick else 1))
        cells: list[str] = []
        for compaction in (None, _compaction()):
            t_zero = await measure(tether_runner(0, compaction=compaction), h, repeat)
            t_long = await measure(tether_runner(LONG, compaction=compaction), h, repeat)
            cells.append(f"{(t_long - t_zero) / LONG * 1e6:.1f} us")
        print(f"{n:>8} {cells[0]:>15} {cells[1]:>23}")


# -- telemetry overhead ---------------------------------------------------------------------------

MODES = ("off", "api", "sdk", "sdk+metrics")
MODE_LABELS = {
    "off": "off (no OpenTelemetry loaded)",
    "api": "API, no provider (no-op)",
    "sdk": "SDK, batch span exporter",
    "sdk+metrics": "SDK, batch spans + metrics",
    "baseline": "baseline source tree",
}


def _telemetry_for(mode: str) -> Any:
    if mode in ("off", "baseline"):
        return None
    import opentelemetry.metrics
    import opentelemetry.trace  # noqa: F401 - loaded, as an application using OpenTelemetry has

    if mode == "api":
        return None  # the global providers: nothing configured
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from tether.telemetry import Telemetry

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(Discard()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()]) if mode == "sdk+metrics" else None
    return Telemetry(tracer_provider=tp, meter_provider=mp)


async def measure_mode(mode: str, quick: bool) -> dict[str, float]:
    """Seconds: the marginal step and the 10-step run, in this process."""
    telemetry = _telemetry_for(mode)
    if mode in ("off", "baseline"):
        assert "opentelemetry" not in sys.modules, "the off column must not load OpenTelemetry"
    repeat = 15 if quick else 40
    t_zero = await measure(tether_runner(0, telemetry), [], repeat * 4)
    t_long = await measure(tether_runner(LONG, telemetry), [], repeat)
    t_run = await measure(tether_runner(STEPS, telemetry), [], repeat * 10)
    return {"step": (t_long - t_zero) / LONG, "run": t_run}


def telemetry_overhead(quick: bool) -> None:
    columns: list[tuple[str, dict[str, float]]] = []
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = [(mode, os.environ.get("PYTHONPATH", "")) for mode in MODES]
    baseline = os.environ.get("TETHER_BENCH_BASELINE_SRC")
    if baseline:
        sources.insert(0, ("baseline", baseline))
    for mode, path in sources:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, here) if p)}
        args = [
            sys.executable,
            "-m",
            "bench.agent",
            f"--telemetry-mode={mode}",
            *(["--quick"] if quick else []),
            *(["--smoke"] if SMOKE else []),
        ]
        out = subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout
        columns.append((mode, json.loads(out.strip().splitlines()[-1])))
    off = dict(columns)["off"]
    print(f"telemetry overhead: marginal step ({LONG}-step run) and a {STEPS}-step run; median; ratio vs off")
    print(f"{'mode':<32} {'us/step':>9} {'ratio':>7} {'ms/run':>9} {'ratio':>7}")
    for mode, m in columns:
        print(
            f"{MODE_LABELS[mode]:<32} {m['step'] * 1e6:>9.1f} {m['step'] / off['step']:>6.2f}x "
            f"{m['run'] * 1e3:>9.3f} {m['run'] / off['run']:>6.2f}x"
        )


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    mode_arg = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--telemetry-mode=")), None)
    if mode_arg is not None:
        print(json.dumps(asyncio.run(measure_mode(mode_arg, quick))))
    elif SMOKE:
        asyncio.run(main(quick))
        asyncio.run(compaction_steps(quick))
        telemetry_overhead(quick)
    elif "--telemetry" in sys.argv:
        telemetry_overhead(quick)
    elif "--compaction" in sys.argv:
        asyncio.run(compaction_steps(quick))
    else:
        asyncio.run(main(quick))


__all__ = ["history", "main"]
