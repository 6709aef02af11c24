"""tether and the Model Context Protocol (``pip install 'tether[mcp]'``, the official ``mcp`` SDK).

- Tools in: ``MCPTools.stdio(command)`` / ``MCPTools.http(url, headers=...)`` give an agent an
  MCP server's tools, with tether's guarantees read from the tools' annotations (``ToolPolicy``
  overrides them per tool).
- History out: ``history_server(store, owner)`` lets an MCP client list, read, search and recall
  one user's conversations (``tether mcp``; ``tether serve`` at ``/mcp`` through
  ``HistoryEndpoint``).

See docs/mcp.md.
"""

from tether.errors import MissingExtra

try:
    import mcp as _mcp  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtra("tether.integrations.mcp", "mcp", "mcp") from exc

from ._client import MCPFailure, MCPTools
from ._history import MAX_ANSWER_CHARS, OWNER_SCOPE_KEY, history_server, scope_owner
from ._http import HistoryEndpoint
from ._mapping import ApprovalPolicy, ToolPolicy, to_result

__all__ = [
    "MAX_ANSWER_CHARS",
    "OWNER_SCOPE_KEY",
    "ApprovalPolicy",
    "HistoryEndpoint",
    "MCPFailure",
    "MCPTools",
    "ToolPolicy",
    "history_server",
    "scope_owner",
    "to_result",
]
