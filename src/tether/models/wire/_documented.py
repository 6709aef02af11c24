"""What importing a provider transcript, or decoding a response, can report, per wire format: the
tables docs/compatibility.md lists (rendered by :mod:`tether.models._compat`), and the contract a test
holds every ``decode_messages`` (and ``decode_response``) report to (a loss nobody listed is a test failure).

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

__all__ = ["IMPORT_LOSSES", "RESPONSE_LOSSES", "documented_loss"]

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


RESPONSE_LOSSES: Final[Mapping[str, tuple[Entry, ...]]] = MappingProxyType(
    {
        "openai_chat": (
            ("audio", "dropped", "the message's `audio` (data and transcript)"),
            ("annotations", "dropped", "the message's `annotations` (`url_citation`, …)"),
            ("<type> content", "dropped", "a content entry without text (compatible servers)"),
        ),
        "openai_responses": (
            (
                "<kind> item",
                "dropped",
                "provider-side items (`web_search_call`, `mcp_call`, `file_search_call`, …)",
            ),
            ("text annotations", "dropped", "`annotations` of an `output_text` (citations)"),
            ("refusal", "approximated", "a refusal content is kept as text (stop reason `content_filter`)"),
        ),
        "anthropic": (
            (
                "<type> block",
                "dropped",
                "provider-side blocks (`server_tool_use`, `web_search_tool_result`, `mcp_tool_use`, …)",
            ),
            (
                "<type> <field>",
                "dropped",
                "a kept block's other non-empty fields (`text citations`; `tool_use caller` unless `direct`)",
            ),
        ),
        "gemini": (
            (
                "<kinds> part",
                "dropped",
                "parts with no tether equivalent (`executableCode`, `codeExecutionResult`, …)",
            ),
            ("videoMetadata", "dropped", "a file part's video offsets and frame rate"),
            ("groundingMetadata", "dropped", "the candidate's search grounding"),
            ("citationMetadata", "dropped", "the candidate's citations"),
            ("urlContextMetadata", "dropped", "the candidate's URL context retrieval"),
            ("finishMessage", "dropped", "the explanation of a finish reason other than `STOP`"),
        ),
    }
)
"""What a decoded response can report (``last_response_report`` of a driver, ``report=`` of the
wires' ``decode_response``): message 0, part = the position of the item in the provider's list
(content block, output item, candidate part), ``None`` for a field of the whole response."""


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


_RESPONSE_PATTERNS: Final = MappingProxyType(
    {
        fmt: tuple((_pattern(what), kind) for what, kind, _why in entries)
        for fmt, entries in RESPONSE_LOSSES.items()
    }
)


def documented_loss(fmt: str, what: str, kind: str, *, response: bool = False) -> bool:
    """Whether a loss reported by ``fmt``'s import is one :data:`IMPORT_LOSSES` lists (with
    ``response``: by a decoded response, one :data:`RESPONSE_LOSSES` lists)."""
    patterns = (_RESPONSE_PATTERNS if response else _PATTERNS).get(fmt, ())
    return any(pattern.match(what) and kind == listed for pattern, listed in patterns)
