"""tether.dumps/loads side by side with pydantic-ai's ModelMessagesTypeAdapter and a plain
msgspec Struct floor, on the same content from bench/generator.py.

Run: python -m bench.codec  (prints µs per message and ratios at 100, 1,000 and 10,000 messages)
     python -m bench.codec --smoke  (100 messages, one call each: that it runs, in a second)
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

import msgspec

import tether
from bench.generator import conversation
from tether import Message, Reasoning, Text, ToolCall, ToolResult


# -- the floor: plain msgspec Structs, same fields, no validation hooks ---------------------------
class FText(msgspec.Struct, tag="text", tag_field="type"):
    text: str


class FCall(msgspec.Struct, tag="tool-call", tag_field="type"):
    id: str
    name: str
    arguments: str


class FResult(msgspec.Struct, tag="tool-result", tag_field="type"):
    call_id: str
    name: str
    content: list[FText]


class FReasoning(msgspec.Struct, tag="reasoning", tag_field="type"):
    text: str
    signature: str | None = None


class FMessage(msgspec.Struct):
    role: str
    parts: list[FText | FCall | FResult | FReasoning]
    model: str | None = None
    stop_reason: str | None = None


def to_floor(history: list[Message]) -> list[FMessage]:
    out: list[FMessage] = []
    for m in history:
        parts: list[FText | FCall | FResult | FReasoning] = []
        for p in m.parts:
            if isinstance(p, Text):
                parts.append(FText(p.text))
            elif isinstance(p, ToolCall):
                parts.append(FCall(p.id or "", p.name, p.arguments))
            elif isinstance(p, ToolResult):
                parts.append(FResult(p.call_id, p.name, [FText(p.text)]))
            elif isinstance(p, Reasoning):
                parts.append(FReasoning(p.text, p.signature))
        out.append(FMessage(m.role, parts, m.model, m.stop_reason))
    return out


def to_pydantic_ai(history: list[Message]) -> list[Any]:
    from pydantic_ai import messages as pm

    out: list[Any] = []
    for m in history:
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
        else:
            parts: list[Any] = []
            for p in m.parts:
                if isinstance(p, Text):
                    parts.append(pm.TextPart(content=p.text))
                elif isinstance(p, ToolCall):
                    parts.append(pm.ToolCallPart(tool_name=p.name, args=p.arguments, tool_call_id=p.id or ""))
                elif isinstance(p, Reasoning):
                    parts.append(pm.ThinkingPart(content=p.text, signature=p.signature))
            out.append(pm.ModelResponse(parts=parts, model_name=m.model))
    return out


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` calls, with the garbage collector paused (as timeit does) so
    every codec is measured without collections triggered by the others' garbage."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
    finally:
        gc.enable()
    return best


def main(argv: list[str]) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    smoke = "--smoke" in argv
    floor_enc = msgspec.json.Encoder()
    floor_dec = msgspec.json.Decoder(list[FMessage])
    sizes = [100] if smoke else [int(a) for a in argv] or [100, 1_000, 10_000]
    print(f"{'N':>7} {'codec':<12} {'encode µs/msg':>14} {'decode µs/msg':>14}")
    for n in sizes:
        history = conversation(n)
        floor = to_floor(history)
        pai = to_pydantic_ai(history)
        repeat = 1 if smoke else max(3, 20_000 // n)
        peer = 1 if smoke else max(3, repeat // 5)  # pydantic-ai is slower: fewer calls
        rows: dict[str, tuple[float, float]] = {}
        data = tether.dumps(history)
        rows["tether"] = (
            best_of(lambda: tether.dumps(history), repeat),
            best_of(lambda: tether.loads(data), repeat),
        )
        fdata = floor_enc.encode(floor)
        rows["msgspec"] = (
            best_of(lambda: floor_enc.encode(floor), repeat),
            best_of(lambda: floor_dec.decode(fdata), repeat),
        )
        pdata = ModelMessagesTypeAdapter.dump_json(pai)
        rows["pydantic-ai"] = (
            best_of(lambda: ModelMessagesTypeAdapter.dump_json(pai), peer),
            best_of(lambda: ModelMessagesTypeAdapter.validate_json(pdata), peer),
        )
        for name, (enc, dec) in rows.items():
            print(f"{n:>7} {name:<12} {enc / n * 1e6:>14.2f} {dec / n * 1e6:>14.2f}")
        t_enc, t_dec = rows["tether"]
        f_enc, f_dec = rows["msgspec"]
        p_enc, p_dec = rows["pydantic-ai"]
        print(
            f"{n:>7} ratios: tether/floor encode {t_enc / f_enc:.2f}x decode {t_dec / f_dec:.2f}x; "
            f"pydantic-ai/tether encode {p_enc / t_enc:.1f}x decode {p_dec / t_dec:.1f}x"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
