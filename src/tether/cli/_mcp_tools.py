"""``--mcp`` and ``--mcp-header`` of ``tether chat`` and ``tether serve``: MCP servers whose tools
the model gets (the ``mcp`` extra is loaded only when one is given)."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

__all__ = ["McpHeaderOpt", "McpOpt", "mcp_toolsets"]

McpOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        help="Give the model the tools of an MCP server: a command (stdio) or an http(s):// URL. "
        "Repeatable. Needs the mcp extra.",
        metavar="SPEC",
        show_default=False,
    ),
]
McpHeaderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp-header",
        help="'Name: value' sent to every --mcp URL (e.g. 'Authorization: Bearer …'). Repeatable.",
        metavar="HEADER",
        show_default=False,
    ),
]


def mcp_toolsets(specs: list[str] | None, headers: list[str] | None) -> list[Any]:
    """The toolsets ``--mcp`` names (MissingExtra without the extra; UserError for a bad one)."""
    if not specs:
        return []
    module = importlib.import_module("tether.integrations.mcp")  # the optional extra, when asked for
    return [module.MCPTools.from_spec(spec, headers=headers or ()) for spec in specs]
