"""The MCP section of docs/compatibility.md (``tether.integrations.mcp``; decisions in ADR 0017)."""

from __future__ import annotations

__all__ = ["mcp_section"]

_INTRO = """
## MCP

`tether.integrations.mcp` (the `tether[mcp]` extra, the official `mcp` SDK 2.x; tested with 2.3.0)
takes tools from MCP servers and offers a user's history to MCP clients ([docs/mcp.md](mcp.md),
[ADR 0017](adr/0017-mcp.md)).

Tools in: an MCP tool result as a tether `ToolResult`:
"""

_RESULTS = (
    ("text content; embedded text resource", "`Text`"),
    ("image content; embedded image resource", "`Image` (bytes, media type)"),
    ("embedded `application/pdf` resource", "`Document`"),
    ("`structuredContent`", "JSON `Text` when no text block carries it"),
    ("`isError: true`", "`failed=True`"),
    ("resource link", "`Text` naming its URI (not fetched); reported"),
    ("audio content, other binary resources, invalid base64", "dropped; logged and said in the result"),
)

_GUARANTEES = (
    ("`readOnlyHint: true` or `idempotentHint: true`", "idempotent"),
    ("neither", "a side effect under the tool-effect ledger (`idempotent=False`)"),
    (
        "not read-only, `destructiveHint` not `false` (absent counts as `true`)",
        "requires approval (a signed pause)",
    ),
    ("`title`, `openWorldHint`", "not used"),
)

_HISTORY = (
    ("conversations, messages", "tool answers: JSON (list, search) or a transcript (read, recall)"),
    ("reasoning, tool calls and results", "transcript lines; media as `[image: type, N bytes]`"),
    ("signatures, provider ids, usage, per-message ids", "not sent"),
    ("writing (append, fork, delete)", "not offered: the server is read-only"),
)


def _table(left: str, right: str, rows: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"| {left} | {right} |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)]


def mcp_section() -> list[str]:
    lines = _INTRO.split("\n")
    lines += _table("MCP", "tether", _RESULTS)
    lines += ["", "Annotations (hints from a server you chose to trust):", ""]
    lines += _table("annotation", "tether's guarantee", _GUARANTEES)
    lines += ["", "History out (`tether mcp`, `/mcp` of `tether serve`):", ""]
    lines += _table("tether", "over MCP", _HISTORY)
    return lines
