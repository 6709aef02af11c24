"""The one seeded conversation generator every benchmark shares.

Shape (issue: codec benchmark): user turns; assistant turns with 1-3 tool calls of ~200-byte
arguments followed by a tool message with ~1 KB results; 25% of assistant turns open with a
reasoning part carrying a 300-byte signature; occasional 500-byte texts.

Run: python -m bench.generator [--smoke]  (prints what the benchmarks run on: messages, parts and
tether JSON bytes at 100, 1,000 and 10,000 messages; --smoke: 100 only)
"""

from __future__ import annotations

import base64
import random
import sys
import time
from collections import Counter

from tether import Message, Reasoning, Text, ToolCall, ToolResult, assistant, dumps, tool, user

WORDS = [
    "tether",
    "keeps",
    "history",
    "durable",
    "repairable",
    "agents",
    "call",
    "tools",
    "results",
    "reasoning",
    "signature",
    "conversation",
    "model",
    "provider",
    "store",
    "append",
    "load",
    "budget",
    "trim",
    "sanitize",
    "normalize",
]


def _words(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def _arguments(rng: random.Random) -> str:
    # ~200 bytes of JSON object text
    query, limit, kind = _words(rng, 140), rng.randint(1, 50), rng.choice(WORDS)
    return f'{{"query": "{query}", "limit": {limit}, "filters": {{"kind": "{kind}"}}}}'


def conversation(n: int, seed: int = 0) -> list[Message]:
    """About ``n`` messages (exactly ``n``, cut at the end) of a realistic tool-using chat."""
    rng = random.Random(seed)
    out: list[Message] = []
    turn = 0
    while len(out) < n:
        turn += 1
        size = 500 if rng.random() < 0.1 else 80
        out.append(user(_words(rng, size)))
        # one or two tool rounds, then a text answer
        for _ in range(rng.randint(1, 2)):
            parts: list[Reasoning | Text | ToolCall] = []
            if rng.random() < 0.25:
                sig = base64.b64encode(rng.randbytes(225)).decode()  # 300 chars
                parts.append(Reasoning(_words(rng, 200), signature=sig, provider="anthropic"))
            calls = [
                ToolCall(f"call_{turn}_{len(out)}_{i}", rng.choice(WORDS), _arguments(rng))
                for i in range(rng.randint(1, 3))
            ]
            parts.extend(calls)
            out.append(assistant(*parts, model="bench-model", stop_reason="tool_calls"))
            out.append(tool(*(ToolResult(c.id or "", c.name, (Text(_words(rng, 1000)),)) for c in calls)))
        size = 500 if rng.random() < 0.1 else 120
        out.append(assistant(_words(rng, size), model="bench-model", stop_reason="stop"))
    return out[:n]


def main(argv: list[str]) -> None:
    sizes = [100] if "--smoke" in argv else [100, 1_000, 10_000]
    print(f"{'messages':>9} {'calls':>7} {'results':>8} {'reasoning':>10} {'JSON KB':>9} {'ms to build':>12}")
    for n in sizes:
        start = time.perf_counter()
        history = conversation(n)
        elapsed = time.perf_counter() - start
        kinds = Counter(type(part).__name__ for message in history for part in message.parts)
        size = len(dumps(history)) / 1024
        print(
            f"{len(history):>9,} {kinds['ToolCall']:>7,} {kinds['ToolResult']:>8,} "
            f"{kinds['Reasoning']:>10,} {size:>9,.0f} {elapsed * 1e3:>12.1f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
