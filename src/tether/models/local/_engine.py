"""The worker-thread side of ``LocalModel``: load a GGUF safely and turn llama.cpp generations into
OpenAI ``chat.completion.chunk`` dicts, token by token, for every kind of step.

A tool turn of the function-calling format runs as llama.cpp's handler would run it, but streamed:
a short grammar-constrained decision (``functions.<name>:`` or ``message:``), then either the
message text or the call's JSON arguments (constrained by the tool's schema), each streamed as it
is sampled. Every generation is bounded (:func:`~tether.models.local._prompt.generation_bound`)
and watched by a :class:`~tether.models.local._repeat.RepetitionDetector`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.models._sdk import require
from tether.models.local._prompt import (
    MESSAGE_PREFIX,
    TURN_END,
    TURN_START,
    Segment,
    ToolChoice,
    call_prefix,
    decision_grammar,
    generation_bound,
)
from tether.models.local._repeat import RepetitionDetector

if TYPE_CHECKING:
    import llama_cpp
else:
    llama_cpp = require("llama_cpp", "local", "the local llama.cpp model")

__all__ = [
    "REPEATED",
    "Plan",
    "amx_compiled",
    "chat_chunks",
    "context_size",
    "load_llama",
    "plan_chunks",
    "prompt_tokens",
]

REPEATED = "x_tether_repetition"
"""Key of the final chunk marking a generation stopped by the repetition detector."""

Chunk = dict[str, Any]

_PARAMS_LOCK = threading.Lock()


def amx_compiled() -> bool:
    """True when the loaded llama.cpp CPU backend uses Intel AMX (a build with ``GGML_NATIVE`` on
    a CPU that has it). Its matrix kernels crash on prompts of more than one token in current
    releases (llama-cpp-python 0.3.36), so such a build must not place weights in AMX buffers."""
    return b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()


def load_llama(path: Path, options: Mapping[str, Any], *, extra_buffers: bool | None) -> llama_cpp.Llama:
    """``llama_cpp.Llama(path, **options)``. ``extra_buffers=False`` (``None``: only when
    :func:`amx_compiled`) loads the weights without llama.cpp's extra CPU buffer types (AMX and
    weight repacking): plain CPU kernels, the same results."""
    if extra_buffers is None:
        extra_buffers = not amx_compiled()
    if extra_buffers:
        return llama_cpp.Llama(model_path=str(path), **options)
    module: Any = llama_cpp.llama_cpp
    default: Any = module.llama_model_default_params

    def without_extra_buffers() -> Any:
        params: Any = default()
        fields: list[tuple[str, Any]] = getattr(params, "_fields_", [])  # the Structure's class attribute
        if any(field[0] == "use_extra_bufts" for field in fields):
            params.use_extra_bufts = False
        return params

    # Llama() takes no such option: it reads the defaults from this function while it loads.
    with _PARAMS_LOCK:
        module.llama_model_default_params = without_extra_buffers
        try:
            return llama_cpp.Llama(model_path=str(path), **options)
        finally:
            module.llama_model_default_params = default


class Plan:
    """One step of the function-calling format: the rendered ``prompt`` segments, the tools (OpenAI
    ``tools`` entries) and how the turn may start, the token bound requested, stop strings and
    sampling options."""

    __slots__ = ("choice", "max_tokens", "prompt", "sampling", "stop", "tools")

    def __init__(
        self,
        *,
        prompt: Sequence[Segment],
        tools: Sequence[Mapping[str, Any]],
        choice: ToolChoice,
        max_tokens: int | None,
        stop: Sequence[str],
        sampling: Mapping[str, Any],
    ) -> None:
        self.prompt = prompt
        self.tools = tools
        self.choice = choice
        self.max_tokens = max_tokens
        self.stop = stop
        self.sampling = sampling


class _Counter:
    """A llama.cpp stopping criterion: counts sampled tokens and stops when the consumer left."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.count = 0

    def __call__(self, input_ids: Any, logits: Any) -> bool:
        self.count += 1
        return self.stop.is_set()


def _chunk(model: str, delta: Mapping[str, Any], finish: str | None = None) -> Chunk:
    return {
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
    }


def _tokens(llm: llama_cpp.Llama, text: str, *, markup: bool = False, bos: bool = False) -> list[int]:
    return llm.tokenize(text.encode("utf-8"), add_bos=bos, special=markup)


def prompt_tokens(llm: llama_cpp.Llama, segments: Sequence[Segment]) -> list[int]:
    """The prompt's tokens: markup may hold special tokens, content never does."""
    tokens: list[int] = []
    for text, markup in segments:
        tokens += _tokens(llm, text, markup=markup, bos=not tokens)
    return tokens


def context_size(llm: llama_cpp.Llama) -> int:
    """Tokens the context holds: llama.cpp may pad ``n_ctx`` up (to 256), but llama-cpp-python's
    token buffer keeps the size asked for, and a generation must fit both."""
    return min(llm.n_ctx(), len(llm.input_ids))


def plan_chunks(
    llm: llama_cpp.Llama,
    plan: Plan,
    stop: threading.Event,
    *,
    model: str,
    detector: RepetitionDetector | None,
) -> Iterator[Chunk]:
    """Run one step of the function-calling format, yielding chat chunks as tokens arrive; the
    last chunk carries ``finish_reason`` and ``usage``."""
    tokens = prompt_tokens(llm, plan.prompt)
    prompt_size = len(tokens)
    n_ctx = context_size(llm)
    counter = _Counter(stop)
    names = [str(t["function"]["name"]) for t in plan.tools]
    mode = plan.choice.mode if plan.tools else "none"
    name = plan.choice.name if mode == "function" else None
    if mode in ("auto", "required"):
        name = _decide(llm, tokens, names, allow_message=mode == "auto", counter=counter)
        if stop.is_set():
            return
    decided = counter.count
    if name is None:
        if plan.tools:
            tokens += _tokens(llm, MESSAGE_PREFIX)
        grammar = None
        finish_ok = "stop"
    else:
        tokens += _tokens(llm, call_prefix(name))
        schema = next(t["function"].get("parameters") for t in plan.tools if t["function"]["name"] == name)
        grammar = _schema_grammar(schema)
        finish_ok = "tool_calls"
        call = {"index": 0, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "function"}
        yield _chunk(model, {"role": "assistant", "tool_calls": [{**call, "function": {"name": name}}]})
    budget = generation_bound(plan.max_tokens, n_ctx=n_ctx, prompt_tokens=len(tokens))
    pieces: Any = llm.create_completion(
        prompt=tokens,
        max_tokens=budget,
        stream=True,
        stop=[*plan.stop, TURN_END, TURN_START],
        grammar=grammar,
        stopping_criteria=llama_cpp.StoppingCriteriaList([counter]),
        **plan.sampling,
    )
    finish, repeated = "length", False
    try:
        for piece in pieces:
            choice: Any = piece["choices"][0]
            text: str = choice["text"]
            if text:
                if name is None:
                    yield _chunk(model, {"content": text})
                else:
                    yield _chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": text}}]})
                if detector is not None and detector.feed(text):
                    repeated = True
                    break
            if choice["finish_reason"] is not None:
                finish = choice["finish_reason"]
    finally:
        pieces.close()
    if stop.is_set():
        return
    final = _chunk(model, {}, finish_ok if finish == "stop" else "length")
    # llama.cpp samples one token past the bound before it stops
    generated = decided + min(counter.count - decided, budget)
    final["usage"] = {
        "prompt_tokens": prompt_size,
        "completion_tokens": generated,
        "total_tokens": prompt_size + generated,
    }
    if repeated:
        final[REPEATED] = True
    yield final


def _decide(
    llm: llama_cpp.Llama, tokens: list[int], names: Sequence[str], *, allow_message: bool, counter: _Counter
) -> str | None:
    """The tool a turn calls, or ``None`` for a message: a few greedy tokens under a grammar."""
    longest = max(len(_tokens(llm, f"functions.{n}:")) for n in names)
    grammar = llama_cpp.LlamaGrammar.from_string(
        decision_grammar(names, allow_message=allow_message), verbose=False
    )
    budget = generation_bound(longest + 2, n_ctx=context_size(llm), prompt_tokens=len(tokens))
    body: Any = llm.create_completion(
        prompt=tokens,
        max_tokens=budget,
        temperature=0.0,
        repeat_penalty=1.0,
        grammar=grammar,
        stop=[":"],
        stopping_criteria=llama_cpp.StoppingCriteriaList([counter]),
    )
    text = str(body["choices"][0]["text"]).strip()
    if text.startswith("functions."):
        name = text.removeprefix("functions.").rstrip(":")
        if name in names:
            return name
    if allow_message:
        return None
    return names[0]  # "required" and a cut-off decision: the grammar allows only these names


def _schema_grammar(schema: object) -> Any:
    try:
        return llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema or {}), verbose=False)
    except Exception:  # a schema the converter cannot express: any JSON object
        return llama_cpp.LlamaGrammar.from_json_schema('{"type": "object"}', verbose=False)


def chat_chunks(
    llm: llama_cpp.Llama,
    kwargs: Mapping[str, Any],
    stop: threading.Event,
    *,
    model: str,
    detector: RepetitionDetector | None,
) -> Iterator[Chunk]:
    """A chat format other than function calling: llama.cpp's own handler renders the prompt and
    streams; the repetition detector still watches the text."""
    chunks: Any = llm.create_chat_completion(**kwargs, stream=True)
    try:
        for chunk in chunks:
            if stop.is_set():
                return
            chunk["model"] = model
            yield chunk
            choices: Any = chunk.get("choices") or [{}]
            delta: Any = choices[0].get("delta") or {}
            text: Any = delta.get("content")
            if detector is not None and isinstance(text, str) and detector.feed(text):
                final = _chunk(model, {}, "length")
                final[REPEATED] = True
                yield final
                return
    finally:
        chunks.close()
