"""Deterministic sample conversations with every part kind (shared by the store tests)."""

from __future__ import annotations

import random

from tether import (
    Document,
    Image,
    Message,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    Usage,
    assistant,
    tool,
    user,
)


def conversation(n: int, seed: int = 0, *, marker: str = "") -> list[Message]:
    """Exactly ``n`` messages: user turns, tool rounds, results, reasoning, images, unicode.

    ``marker`` is put in every text so a test can search stored bytes for it."""
    rng = random.Random(seed)
    out: list[Message] = []
    turn = 0
    while len(out) < n:
        turn += 1
        out.append(
            user(
                f"{marker}question {turn} – ünïcødé ✓ {rng.random():.6f}",
                Image(data=rng.randbytes(16), media_type="image/png"),
            )
        )
        call = ToolCall(
            f"call_{seed}_{turn}", "search", f'{{"q": "{marker}{turn}", "n": {rng.randint(1, 9)}}}'
        )
        out.append(
            assistant(
                Reasoning(
                    f"{marker}thinking {turn}", signature=rng.randbytes(12).hex(), provider="anthropic"
                ),
                call,
                model=f"model-{turn % 3}",
                stop_reason="tool_calls",
                usage=Usage(input_tokens=turn, output_tokens=2),
            )
        )
        out.append(
            tool(
                ToolResult(
                    call.id or "",
                    "search",
                    (Text(f"{marker}result {turn}"), Document(url="https://example.com/d.pdf")),
                )
            )
        )
        out.append(assistant(f"{marker}answer {turn}", model=f"model-{turn % 3}", stop_reason="stop"))
    return out[:n]
