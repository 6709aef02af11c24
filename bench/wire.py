"""Wire conversion speed: building the OpenAI Chat ``messages`` for every step of a run.

A run of N steps sends the whole history at each step. tether caches each message's encoding, so a
step converts only the messages added since the previous one; this bench compares, on the shared
seeded conversation (bench.generator):

- tether, incremental — ``encode_messages`` at every step with a per-message cache (what a
  driver does: each driver owns its cache);
- tether, cold        — the same without a cache (full conversion at every step);
- pydantic-ai         — ``OpenAIChatModel._map_messages`` (its OpenAI Chat wire path), every step.

Run: ``python -m bench.wire [--sizes 50,200,800] [--repeat 3]``. Prints per-step microseconds at
the last step and the whole-run total.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.generator import conversation
from tether import Message, Reasoning, Text, ToolCall
from tether.models import Profile
from tether.models.wire import openai_chat
from tether.models.wire._memo import PerMessageCache

PROFILE = Profile("openai")
_CACHE: PerMessageCache[Any] = PerMessageCache()  # what a driver owns


def _tether_step(history: Sequence[Message]) -> None:
    openai_chat.encode_messages(history, profile=PROFILE, cache=_CACHE)


def _cold_step(history: Sequence[Message]) -> None:
    openai_chat.encode_messages(history, profile=PROFILE)  # no cache: every message converted


def _to_pydantic_ai(history: Sequence[Message]) -> list[Any]:
    from pydantic_ai import messages as pm

    out: list[Any] = []
    for message in history:
        if message.role == "user":
            out.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=message.text)]))
        elif message.role == "tool":
            parts = [
                pm.ToolReturnPart(tool_name=r.name, content=r.text, tool_call_id=r.call_id)
                for r in message.tool_results
            ]
            out.append(pm.ModelRequest(parts=parts))
        else:
            response_parts: list[Any] = []
            for part in message.parts:
                if isinstance(part, Text):
                    response_parts.append(pm.TextPart(content=part.text))
                elif isinstance(part, ToolCall):
                    response_parts.append(
                        pm.ToolCallPart(tool_name=part.name, args=part.arguments, tool_call_id=part.id or "")
                    )
                elif isinstance(part, Reasoning):
                    response_parts.append(
                        pm.ThinkingPart(
                            content=part.text, signature=part.signature, provider_name="anthropic"
                        )
                    )
            out.append(pm.ModelResponse(parts=response_parts, model_name=message.model))
    return out


def _pydantic_ai_step() -> Callable[[Sequence[Any]], None] | None:
    try:
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider
    except ImportError:
        return None
    model = OpenAIChatModel(
        "gpt-4o", provider=OpenAIProvider(api_key=os.environ.get("OPENAI_API_KEY", "sk-bench"))
    )
    params = ModelRequestParameters()
    loop = asyncio.new_event_loop()

    def step(history: Sequence[Any]) -> None:
        loop.run_until_complete(model._map_messages(list(history), params))  # pyright: ignore[reportPrivateUsage]

    return step


def _run(
    step: Callable[[Sequence[Any]], None], history: Sequence[Any], ends: list[int]
) -> tuple[float, float]:
    """Whole-run seconds (one call per step end) and the last step's seconds."""
    total = 0.0
    last = 0.0
    for end in ends:
        t0 = time.perf_counter()
        step(history[:end])
        last = time.perf_counter() - t0
        total += last
    return total, last


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,800")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one small size once: that it runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.repeat = "30", 1
    pai_step = _pydantic_ai_step()
    print(
        f"{'messages':>8} {'steps':>6} | {'tether last step':>16} {'cold last step':>15} "
        f"{'pydantic-ai':>12} | {'tether run':>11} {'cold run':>9} {'pydantic-ai run':>15}"
    )
    for n in (int(s) for s in args.sizes.split(",")):
        history = conversation(n, seed=1)
        # a step ends after each user or tool message: that is when the model is called
        ends = [i + 1 for i, m in enumerate(history) if m.role in ("user", "tool")]
        pai_history = _to_pydantic_ai(history)
        results: dict[str, list[tuple[float, float]]] = {"tether": [], "cold": [], "pai": []}
        for _ in range(args.repeat):
            _CACHE.clear()
            results["tether"].append(_run(_tether_step, history, ends))
            results["cold"].append(_run(_cold_step, history, ends))
            if pai_step is not None:
                results["pai"].append(_run(pai_step, pai_history, ends))

        def med(key: str, index: int, results: dict[str, list[tuple[float, float]]] = results) -> float:
            values = [r[index] for r in results[key]]
            return statistics.median(values) if values else float("nan")

        print(
            f"{n:>8} {len(ends):>6} | {med('tether', 1) * 1e6:>14.0f}us {med('cold', 1) * 1e6:>13.0f}us "
            f"{med('pai', 1) * 1e6:>10.0f}us | {med('tether', 0) * 1e3:>9.1f}ms "
            f"{med('cold', 0) * 1e3:>7.1f}ms {med('pai', 0) * 1e3:>13.1f}ms"
        )
        if pai_step is not None:
            print(
                f"{'':>8} ratios: last step pydantic-ai/tether = {med('pai', 1) / med('tether', 1):.0f}x, "
                f"cold/tether = {med('cold', 1) / med('tether', 1):.0f}x; "
                f"whole run pydantic-ai/tether = {med('pai', 0) / med('tether', 0):.0f}x"
            )


if __name__ == "__main__":
    main()
