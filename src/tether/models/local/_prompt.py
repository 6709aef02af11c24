"""What ``LocalModel`` sends to llama.cpp, decided without loading a model: the ChatML prompt of
the function-calling format, the grammars that steer a tool turn, the sampling settings and the
bound on each generation. Pure Python (no llama.cpp), so the rules are tested on their own."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from tether.errors import ModelError, UserError
from tether.models._base import ModelSettings

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MESSAGE_PREFIX",
    "SAMPLING_DEFAULTS",
    "SAMPLING_KEYS",
    "SAMPLING_OPTIONS",
    "TURN_END",
    "TURN_START",
    "Segment",
    "ToolChoice",
    "call_prefix",
    "decision_grammar",
    "generation_bound",
    "prompt_text",
    "render_chatml",
    "sampling",
    "tool_choice",
]

TURN_START = "<|im_start|>"
TURN_END = "<|im_end|>"

DEFAULT_MAX_TOKENS = 512
"""Tokens one step may generate unless ``ModelSettings.max_tokens`` says otherwise (never more
than the context has left after the prompt)."""

SAMPLING_DEFAULTS: Mapping[str, float | int] = MappingProxyType(
    {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_k": 40,
        "min_p": 0.05,
        "repeat_penalty": 1.15,
    }
)
"""Sampling that suits a small instruction model such as SmolLM2-135M: low temperature, nucleus
sampling and a penalty on tokens repeated within the last 64. ``ModelSettings.temperature`` /
``top_p`` and the same keys in ``ModelSettings.extra`` override them."""

SAMPLING_KEYS = frozenset(
    {
        "top_k",
        "min_p",
        "typical_p",
        "repeat_penalty",
        "presence_penalty",
        "frequency_penalty",
        "tfs_z",
        "mirostat_mode",
        "mirostat_tau",
        "mirostat_eta",
        "logit_bias",
    }
)
"""llama.cpp sampling options accepted in ``ModelSettings.extra`` (besides ``tool_choice``)."""

SAMPLING_OPTIONS = SAMPLING_KEYS | {"temperature", "top_p", "seed"}
"""Every sampling keyword :func:`sampling` may return."""

_TOOLS_HEADER = "\n\nYou have access to the following functions:\n"
_TOOLS_FOOTER = (
    "\n\nYou can respond to users messages with either a single message or one or more function calls."
    "\n\nTo respond with a message begin the message with 'message:', use the following format:"
    "\n\nmessage:"
    "\n<message>"
    "\n\nTo respond with one or more function calls begin the message with "
    "'functions.<function_name>:', use the following format:"
    "\n\nfunctions.<function_name>:"
    '\n{ "arg1": "value1", "arg2": "value2" }'
    "\nfunctions.<function_name>:"
    '\n{ "arg1": "value1", "arg2": "value2" }'
)


def call_prefix(name: str) -> str:
    """What opens a function call in an assistant turn."""
    return f"functions.{name}:\n"


MESSAGE_PREFIX = "message:\n"


Segment = tuple[str, bool]
"""A piece of a prompt and whether it is markup: markup may hold special tokens (``<|im_start|>``);
content is tokenized as plain text, so a message cannot forge a turn."""


def render_chatml(
    chat: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
) -> list[Segment]:
    """The prompt of llama.cpp's ``chatml-function-calling`` format, ending with an open assistant
    turn. ``chat`` holds OpenAI-style messages with string content (``system`` / ``user`` /
    ``assistant`` with optional ``tool_calls``); with ``tools`` the system turn lists them and
    assistant text is marked ``message:``. Unlike the handler's Jinja template, content is neither
    HTML-escaped (the model reads ``"`` and ``&`` as they are) nor read for special tokens."""
    out: list[Segment] = []
    for entry in chat:
        role = str(entry["role"])
        content = entry.get("content") or ""
        out.append((f"<|im_start|>{role}\n", True))
        if role == "system":
            out.append((str(content), False))
            if tools:
                listing = [_TOOLS_HEADER]
                for spec in tools:
                    function = spec["function"]
                    parameters = json.dumps(function.get("parameters") or {}, ensure_ascii=False)
                    about = " ".join(str(function.get("description") or "").split())
                    comment = f"// {about}\n" if about else ""  # the handler's template drops it
                    listing.append(f"\nfunctions.{function['name']}:\n{comment}{parameters}\n")
                listing.append(_TOOLS_FOOTER)
                out.append(("".join(listing), False))
        elif role == "assistant":
            body: list[str] = []
            if content:
                body.append((MESSAGE_PREFIX if tools else "") + str(content))
            for call in entry.get("tool_calls") or ():
                function = call["function"]
                body.append(call_prefix(str(function["name"])) + str(function["arguments"]))
            out.append(("\n".join(body), False))
        else:
            out.append((str(content), False))
        out.append((f"{TURN_END}\n", True))
    out.append(("<|im_start|>assistant\n", True))
    return [segment for segment in out if segment[0]]


def prompt_text(segments: Sequence[Segment]) -> str:
    """The prompt as one string (what the model reads)."""
    return "".join(text for text, _ in segments)


def decision_grammar(names: Sequence[str], *, allow_message: bool) -> str:
    """GBNF for the first words of a tool turn: ``functions.<name>:`` for one of ``names``, or
    (when allowed) ``message:``."""
    options = [json.dumps(f"functions.{name}:") for name in names]
    if allow_message:
        options.append(json.dumps("message:"))
    return f"root ::= {' | '.join(options)}\n"


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """How a turn with tools starts: ``mode`` is ``"auto"`` (the model picks a call or a message),
    ``"required"`` (a call to any tool), ``"function"`` (a call to ``name``) or ``"none"``."""

    mode: str
    name: str | None = None


def tool_choice(value: object, names: Sequence[str]) -> ToolChoice:
    """``ModelSettings.extra["tool_choice"]`` (OpenAI's forms) checked against the tool names."""
    if value in ("auto", "none", "required"):
        return ToolChoice(str(value))
    if isinstance(value, Mapping):
        given: Mapping[str, Any] = cast(Mapping[str, Any], value)
        function: Any = given.get("function")
        name: Any = cast(Mapping[str, Any], function).get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str):
            if name not in names:
                raise UserError(
                    f"LocalModel: tool_choice names {name!r}, which is not among the tools "
                    f"({', '.join(names) or 'none given'})"
                )
            return ToolChoice("function", name)
    raise UserError(
        "LocalModel: tool_choice must be 'auto', 'none', 'required' or "
        f"{{'type': 'function', 'function': {{'name': …}}}}, not {value!r}"
    )


def sampling(settings: ModelSettings) -> dict[str, Any]:
    """The llama.cpp sampling keyword arguments: the defaults, then ``settings``. Unknown keys in
    ``settings.extra`` are refused (``UserError`` naming the key), not passed on to fail later."""
    options: dict[str, Any] = dict(SAMPLING_DEFAULTS)
    if settings.temperature is not None:
        options["temperature"] = settings.temperature
    if settings.top_p is not None:
        options["top_p"] = settings.top_p
    if settings.seed is not None:
        options["seed"] = settings.seed
    for key, value in settings.extra.items():
        if key == "tool_choice":
            continue
        if key not in SAMPLING_KEYS:
            raise UserError(
                f"LocalModel: unknown setting extra[{key!r}]; known: "
                f"tool_choice, {', '.join(sorted(SAMPLING_KEYS))}"
            )
        options[key] = value
    return options


def generation_bound(requested: int | None, *, n_ctx: int, prompt_tokens: int) -> int:
    """Tokens a step may generate: ``requested`` (default :data:`DEFAULT_MAX_TOKENS`), but never
    past the end of the context. A prompt that leaves no room raises ``ModelError``."""
    room = n_ctx - prompt_tokens
    if room < 1:
        raise ModelError(
            f"the prompt is {prompt_tokens} tokens and the local model's context holds {n_ctx}: "
            "send less history (a history processor) or load the model with a larger n_ctx",
            stage="model",
        )
    if requested is not None and requested < 1:
        raise UserError(f"max_tokens must be at least 1, not {requested}")
    return min(requested if requested is not None else DEFAULT_MAX_TOKENS, room)
