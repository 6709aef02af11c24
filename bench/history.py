"""The history toolkit against tether.loads on the same history, and budget_history against
LangChain's trim_messages, on conversations from bench/generator.py.

Run: python -m bench.history [sizes...]   (default 1000 10000 100000)
     python -m bench.history --smoke      (100 messages, every row once: that it runs)

Rows (µs per tether message, best of several runs, GC on unless said):
  loads            tether.loads of the history's JSON (the reference cost)
  loads (gc off)   the same with the garbage collector paused (the stricter reference: with
                   GC on, loads pays for collections that grow with the live heap)
  normalize        normalize_history (a valid history: nothing to repair)
  sanitize         sanitize_history (limits raised to fit 100k messages)
  budget cold      budget_history(approximate_counter(), half the tokens), a fresh processor
  budget warm      the same processor again, same message objects (counts cached by identity)
  budget reloaded  the same processor on an equal history decoded again from JSON (the server
                   case: a history loaded per request). The approximate rule is cheaper than a
                   lookup by content, so this processor recounts (see BudgetHistory)
  tiktoken cold    budget_history(tiktoken_counter(), half the tokens), a fresh processor
  tiktoken reload  a warmed tiktoken processor on an equal history decoded again from JSON
                   (cache_size=n: the default 10,000 keeps at least the 5,000 used last, less
                   than the half of a 100k history the budget keeps)
  trim             trim_history(half the messages)
  trim hostile     trim_history(n - 1) on n messages built to defeat the boundary: every
                   assistant turn has its result before it, so nothing can open (HistoryError)
  lc trim_messages langchain_core trim_messages(strategy="last", start_on="human",
                   token_counter=count_tokens_approximately, max_tokens=half its own count),
                   on the same conversation converted to LangChain messages beforehand
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.generator import conversation
from tether import HistoryError, Message, Text, ToolCall, ToolResult, assistant, dumps, loads, tool, user
from tether.history import (
    SanitizeLimits,
    approximate_counter,
    budget_history,
    normalize_history,
    sanitize_history,
    tiktoken_counter,
    trim_history,
)

LIMITS = SanitizeLimits(max_messages=10**7, max_total_bytes=2**40, max_inline_media_bytes=2**40)


def best(fn: Callable[[], object], repeat: int, *, collector: bool = True) -> float:
    """The fastest of ``repeat`` runs, in seconds (``collector=False``: with the GC paused)."""
    fastest = float("inf")
    for _ in range(repeat):
        gc.collect()
        if not collector:
            gc.disable()
        try:
            start = time.perf_counter()
            fn()
            fastest = min(fastest, time.perf_counter() - start)
        finally:
            gc.enable()
    return fastest


def to_langchain(history: list[Message]) -> list[Any]:
    """The same conversation as LangChain messages (one ToolMessage per tool result)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for m in history:
        if m.role == "user":
            out.append(HumanMessage(m.text))
        elif m.role == "assistant":
            calls = [
                {"name": p.name, "args": json.loads(p.arguments), "id": p.id, "type": "tool_call"}
                for p in m.parts
                if isinstance(p, ToolCall)
            ]
            out.append(AIMessage(m.text, tool_calls=calls))
        elif m.role == "tool":
            out.extend(
                ToolMessage(r.text, tool_call_id=r.call_id)
                for r in m.parts
                if isinstance(r, ToolResult) and all(isinstance(c, Text) for c in r.content)
            )
    return out


def hostile(n: int) -> list[Message]:
    """``n`` messages where every assistant call is answered only before the call."""
    out = [user("q")]
    for i in range((n - 1) // 2):
        out.append(tool(ToolResult(f"c{i}", "f", (Text("r"),))))
        out.append(assistant(ToolCall(f"c{i}", "f")))
    return out


def trim_hostile(history: list[Message]) -> None:
    try:
        trim_history(len(history) - 1)(history)
    except HistoryError:
        return
    raise AssertionError("the hostile history was expected to leave nothing that can open")


def measure(n: int, repeat: int | None = None) -> dict[str, float]:
    """µs per tether message for every row at size ``n`` (the best of ``repeat`` runs)."""
    history = conversation(n)
    history, _ = normalize_history(history)  # the generator may end on a dangling call
    data = dumps(history)
    repeat = repeat or (15 if n <= 1_000 else 5 if n <= 10_000 else 3)
    counter = approximate_counter()
    half_tokens = sum(counter(m) for m in history) // 2
    warm = budget_history(counter, half_tokens)
    kept = warm(history)
    copies = iter([loads(data) for _ in range(repeat)])
    exact = tiktoken_counter()
    exact_half = sum(exact(m) for m in history) // 2
    exact_warm = budget_history(exact, exact_half, cache_size=len(history))
    exact_warm(history)
    exact_copies = iter([loads(data) for _ in range(repeat)])
    bad = hostile(n)
    rows: dict[str, float] = {
        "loads": best(lambda: loads(data), repeat),
        "loads (gc off)": best(lambda: loads(data), repeat, collector=False),
        "normalize": best(lambda: normalize_history(history), repeat),
        "sanitize": best(lambda: sanitize_history(history, limits=LIMITS), repeat),
        "budget cold": best(lambda: budget_history(counter, half_tokens)(history), repeat),
        "budget warm": best(lambda: warm(history), repeat),
        "budget reloaded": best(lambda: warm(next(copies)), repeat),
        "tiktoken cold": best(lambda: budget_history(exact, exact_half)(history), repeat),
        "tiktoken reload": best(lambda: exact_warm(next(exact_copies)), repeat),
        "trim": best(lambda: trim_history(len(history) // 2)(history), repeat),
        "trim hostile": best(lambda: trim_hostile(bad), repeat),
    }
    try:
        from langchain_core.messages import trim_messages
        from langchain_core.messages.utils import count_tokens_approximately
    except ImportError:
        print("langchain-core is not installed: skipping trim_messages", file=sys.stderr)
    else:
        lc = to_langchain(history)
        lc_half = count_tokens_approximately(lc) // 2

        def lc_trim() -> object:
            return trim_messages(
                lc,
                max_tokens=lc_half,
                token_counter=count_tokens_approximately,
                strategy="last",
                start_on="human",
            )

        lc_kept = lc_trim()
        assert isinstance(lc_kept, list)
        rows["lc trim_messages"] = best(lc_trim, 1 if n >= 100_000 else min(repeat, 3))
        print(
            f"  n={n}: budget kept {len(kept)}/{len(history)} tether messages; "
            f"trim_messages kept {len(lc_kept)}/{len(lc)} LangChain messages",
            file=sys.stderr,
        )
    return {name: seconds / len(history) * 1e6 for name, seconds in rows.items()}


def main(argv: list[str]) -> None:
    smoke = "--smoke" in argv
    sizes = [100] if smoke else [int(a) for a in argv] or [1_000, 10_000, 100_000]
    results = {n: measure(n, 1 if smoke else None) for n in sizes}
    names = list(next(iter(results.values())))
    print(f"{'µs / message':<18}" + "".join(f"{n:>12,}" for n in sizes))
    for name in names:
        print(f"{name:<18}" + "".join(f"{results[n].get(name, float('nan')):>12.3f}" for n in sizes))
    print()
    print("ratios (lower is better for x / loads; higher is better for lc / budget)")
    for name in ("normalize", "sanitize", "budget cold", "budget warm", "budget reloaded", "trim"):
        for ref in ("loads", "loads (gc off)"):
            label = f"{name} / {ref}"
            print(f"{label:<32}" + "".join(f"{results[n][name] / results[n][ref]:>10.2f}" for n in sizes))
    label = "tiktoken cold / reload"
    print(
        f"{label:<32}"
        + "".join(f"{results[n]['tiktoken cold'] / results[n]['tiktoken reload']:>10.1f}" for n in sizes)
    )
    if "lc trim_messages" in names:
        for name in ("budget cold", "budget warm", "budget reloaded", "tiktoken reload"):
            print(
                f"{'lc / ' + name:<32}"
                + "".join(f"{results[n]['lc trim_messages'] / results[n][name]:>10.1f}" for n in sizes)
            )


if __name__ == "__main__":
    main(sys.argv[1:])
