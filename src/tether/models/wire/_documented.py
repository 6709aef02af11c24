"""What importing a provider transcript can report, per wire format: the table
docs/compatibility.md lists (rendered by :mod:`tether.models._compat`), and the contract a test
holds every ``decode_messages`` report to (a loss nobody listed is a test failure).

Each entry is ``(what, kind, why)``: ``what`` is the ``Loss.what`` text (``<…>`` stands for a
name taken from the input), ``kind`` ``dropped`` or ``approximated``. Report indices of an import
are source positions: the entry (item, message, content) index and the index inside its content
list, ``None`` for a field of the entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

__all__ = ["IMPORT_LOSSES", "documented_loss"]

Kind = Literal["dropped", "approximated"]
Entry = tuple[str, Kind, str]

IMPORT_LOSSES: Final[Mapping[str, tuple[Entry, ...]]] = MappingProxyType(
    {
        "openai_chat": (
            ("developer role", "approximated", "a `developer` entry imports as a system message"),
            ("participant name", "dropped", "an entry's `name`: tether messages carry no participant name"),
            (
                "field '<name>'",
                "dropped",
                "any other non-null field of an entry (`audio`, `function_call`, …)",
            ),
            ("image detail", "dropped", "an `image_url` part's `detail` other than `auto` (`low`, `high`)"),
            ("<type> content", "dropped", "a content part with no tether equivalent (`input_audio`, …)"),
            ("file reference", "dropped", "a `file` part naming an uploaded `file_id`: no bytes to import"),
            ("refusal", "approximated", "a refusal (field or content part) imports as text"),
            (
                "reasoning_content field",
                "dropped",
                "not text, or a second reasoning text differing from `reasoning`",
            ),
            ("reasoning field", "dropped", "not text (e.g. an object), or a second reasoning text differing"),
            ("tool call id", "approximated", "a call without an id: export invents a positional one"),
            ("tool name", "approximated", "a `tool` entry answering no earlier call: its name is empty"),
        ),
        "openai_responses": (
            ("developer role", "approximated", "a `developer` message imports as a system message"),
            (
                "<kind> item",
                "dropped",
                "provider-native items (`web_search_call`, `mcp_call`, `compaction`, …)",
            ),
            ("message phase", "dropped", "a message's `phase`: tether messages have no phase"),
            ("message item id", "dropped", "the `msg_…` id of a message item with no text to hold it"),
            ("text annotations", "dropped", "`annotations` of an output text (citations)"),
            ("refusal", "approximated", "a refusal content imports as text"),
            (
                "image detail",
                "approximated",
                "an `input_image` `detail` other than `auto`: exported as `auto`",
            ),
            ("file media type", "approximated", "bare base64 `file_data` (no data URL) is taken as a PDF"),
            ("reasoning content", "approximated", "raw reasoning text (`reasoning_text`) kept as reasoning"),
            (
                "tool name",
                "approximated",
                "a `function_call_output` answering no `function_call`: empty name",
            ),
        ),
        "anthropic": (
            ("<type> block", "dropped", "blocks with no tether equivalent (server tools, compaction, …)"),
            ("<field>", "dropped", "a carried block's other fields (`cache_control`, `citations`, …)"),
            ("tool result <type> block", "dropped", "a tool result content block with no tether equivalent"),
            ("tool result content[<i>] <field>", "dropped", "a field of a block inside a tool result"),
            (
                "tool result name",
                "approximated",
                "a `tool_result` answering no earlier `tool_use`: empty name",
            ),
            ("system message", "dropped", "a system turn none of whose blocks tether can hold"),
        ),
        "gemini": (
            ("<kinds> part", "dropped", "parts with no tether equivalent (`executableCode`, `toolCall`, …)"),
            ("empty part", "dropped", "a part with no content at all"),
            ("empty text", "dropped", 'an unsigned `{"text": ""}` in a model turn (the turn is kept)'),
            ("videoMetadata", "dropped", "a file part's video offsets and frame rate"),
            ("part", "dropped", "a function call or thought inside a user turn"),
        ),
    }
)
"""Per wire format, everything ``decode_messages`` may report (read-only)."""


def _pattern(what: str) -> re.Pattern[str]:
    """``<kinds>`` stands for a comma-separated list, any other ``<…>`` for one word."""
    out: list[str] = []
    for piece in re.split(r"(<[^>]+>)", what):
        if piece == "<kinds>":
            out.append(r".+")
        elif piece.startswith("<") and piece.endswith(">"):
            out.append(r"\S+")
        else:
            out.append(re.escape(piece))
    return re.compile("".join(out) + r"\Z")


_PATTERNS: Final = MappingProxyType(
    {
        fmt: tuple((_pattern(what), kind) for what, kind, _why in entries)
        for fmt, entries in IMPORT_LOSSES.items()
    }
)


def documented_loss(fmt: str, what: str, kind: str) -> bool:
    """Whether a loss reported by ``fmt``'s import is one :data:`IMPORT_LOSSES` lists."""
    return any(pattern.match(what) and kind == listed for pattern, listed in _PATTERNS.get(fmt, ()))
