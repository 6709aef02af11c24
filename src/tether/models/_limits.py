"""Published token limits per model: the data behind ``Profile.context_window`` and
``Profile.max_output_tokens`` (for context compaction; drivers do not enforce them).

Each entry names a model prefix and the numbers its provider publishes. A model takes the entry
with the longest prefix that matches it as a whole name part: ``gpt-4o`` matches ``gpt-4o``,
``gpt-4o-mini`` and ``gpt-4o-2024-08-06``, but a later minor version is another model
(``claude-opus-4`` does not match ``claude-opus-4-5``, ``gpt-5`` does not match ``gpt-5.4``), so
a model nobody listed gets no numbers rather than wrong ones. ``source`` says where each pair was
confirmed: ``"provider docs"`` (the provider's own model page), ``"secondary"`` (a gateway or
framework page quoting the provider) or ``"unconfirmed"`` (not found; kept from the provider's
announcement as remembered, or ``None``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tether.models._base import Profile

__all__ = ["ANTHROPIC_LIMITS", "GEMINI_LIMITS", "OPENAI_LIMITS", "Limits", "apply_limits", "limits_for"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The published limits of the models named ``prefix…``."""

    prefix: str
    context_window: int | None
    max_output_tokens: int | None
    source: str


OPENAI_LIMITS: tuple[Limits, ...] = (
    Limits("gpt-3.5-turbo", 16_385, 4_096, "secondary"),
    Limits("gpt-4o", 128_000, 16_384, "secondary"),
    Limits("chatgpt-4o", 128_000, 16_384, "secondary"),
    Limits("gpt-4.1", 1_047_576, 32_768, "secondary"),
    Limits("o1", 200_000, 100_000, "unconfirmed"),
    Limits("o1-mini", 128_000, 65_536, "unconfirmed"),
    Limits("o1-preview", 128_000, 32_768, "unconfirmed"),
    Limits("o3", 200_000, 100_000, "secondary"),
    Limits("o3-mini", 200_000, 100_000, "secondary"),
    Limits("o4-mini", 200_000, 100_000, "secondary"),
    Limits("codex-mini", 200_000, 100_000, "unconfirmed"),
    Limits("gpt-5", 400_000, 128_000, "secondary"),
    Limits("gpt-5-chat", 128_000, 16_384, "secondary"),
    Limits("gpt-5-pro", 400_000, 272_000, "unconfirmed"),
    Limits("gpt-5.1", 400_000, 128_000, "secondary"),
    Limits("gpt-5.1-chat", 128_000, 16_384, "secondary"),
    Limits("gpt-5.2", 400_000, 128_000, "secondary"),
    Limits("gpt-5.4", 1_050_000, 128_000, "secondary"),
)
"""OpenAI models (Chat Completions and Responses): the OpenAI model pages' context window and
max output tokens."""

ANTHROPIC_LIMITS: tuple[Limits, ...] = (
    Limits("claude-3-opus", 200_000, 4_096, "secondary"),
    Limits("claude-3-sonnet", 200_000, 4_096, "unconfirmed"),
    Limits("claude-3-haiku", 200_000, 4_096, "secondary"),
    Limits("claude-3-5", 200_000, 8_192, "secondary"),
    Limits("claude-3-5-sonnet", 200_000, 8_192, "secondary"),
    Limits("claude-3-5-haiku", 200_000, 8_192, "secondary"),
    Limits("claude-3-7-sonnet", 200_000, 64_000, "secondary"),
    Limits("claude-sonnet-4", 200_000, 64_000, "secondary"),
    Limits("claude-sonnet-4-0", 200_000, 64_000, "secondary"),
    Limits("claude-sonnet-4-5", 200_000, 64_000, "provider docs"),
    Limits("claude-sonnet-4-6", 1_000_000, 128_000, "provider docs"),
    Limits("claude-opus-4", 200_000, 32_000, "secondary"),
    Limits("claude-opus-4-0", 200_000, 32_000, "secondary"),
    Limits("claude-opus-4-1", 200_000, 32_000, "secondary"),
    Limits("claude-opus-4-5", 200_000, 64_000, "secondary"),
    Limits("claude-opus-4-6", 1_000_000, 128_000, "provider docs"),
    Limits("claude-haiku-4-5", 200_000, 64_000, "secondary"),
)
"""Anthropic models: the "Context window" and "Max output" of Anthropic's model pages (the
standard window; a larger one behind a beta header is not counted)."""

GEMINI_LIMITS: tuple[Limits, ...] = (
    Limits("gemini-1.5-pro", 2_097_152, 8_192, "secondary"),
    Limits("gemini-1.5-flash", 1_048_576, 8_192, "secondary"),
    Limits("gemini-2.0-flash", 1_048_576, 8_192, "provider docs"),
    Limits("gemini-2.5", 1_048_576, 65_536, "secondary"),
    Limits("gemini-2.5-pro", 1_048_576, 65_536, "provider docs"),
    Limits("gemini-2.5-flash", 1_048_576, 65_536, "secondary"),
    Limits("gemini-3", 1_048_576, 65_536, "provider docs"),
    Limits("gemini-3-pro", 1_048_576, 65_536, "provider docs"),
    Limits("gemini-3-flash", 1_048_576, 65_536, "provider docs"),
    Limits("gemini-3.1-pro", 1_048_576, 65_536, "provider docs"),
)
"""Gemini models: the "Input token limit" (as the context window) and "Output token limit" of
the Gemini API model pages."""

_MINOR_VERSION = re.compile(r"\d{1,2}(?:$|[-@:])")


def _matches(name: str, prefix: str) -> bool:
    if not name.startswith(prefix):
        return False
    rest = name[len(prefix) :]
    if not rest:
        return True
    if rest[0] in "@:":
        return True
    # "-mini", "-2024-08-06", "-preview", "-001" continue the same model; "-5" is a later minor one
    return rest[0] == "-" and _MINOR_VERSION.match(rest, 1) is None


def _names(model: str) -> list[str]:
    """The model name and, for a deployment name (``models/…``, ``us.anthropic.claude-…``), the
    name after each ``/`` or ``.`` separator, so provider prefixes do not hide the model."""
    name = model.lower()
    out = [name]
    for index, char in enumerate(name):
        if char in "/." and index + 1 < len(name):
            out.append(name[index + 1 :])
    return out


def limits_for(table: Iterable[Limits], model: str) -> Limits | None:
    """The entry of ``table`` with the longest prefix matching ``model``, or ``None``."""
    best: Limits | None = None
    for name in _names(model):
        for entry in table:
            if _matches(name, entry.prefix) and (best is None or len(entry.prefix) > len(best.prefix)):
                best = entry
    return best


def apply_limits(profile: Profile, table: Iterable[Limits], model: str) -> Profile:
    """``profile`` with the published limits of ``model`` (unchanged when none is listed)."""
    found = limits_for(table, model)
    if found is None:
        return profile
    return replace(profile, context_window=found.context_window, max_output_tokens=found.max_output_tokens)
