"""``tether mcp``: the user's conversations offered to an MCP client (a desktop assistant, an IDE
agent) over stdio, read-only: list, read, search and recall (docs/mcp.md).

Standard output is the MCP channel: nothing else is written there; errors and logs go to stderr.
"""

from __future__ import annotations

import asyncio

from tether.cli._store import DEFAULT_OWNER, DbOpt, OwnerOpt, open_store
from tether.integrations.mcp import history_server

__all__ = ["mcp"]


async def _serve(db: DbOpt, owner: str) -> None:
    async with open_store(db, create=False) as store:
        await history_server(store, owner).run_stdio_async()


def mcp(db: DbOpt = None, owner: OwnerOpt = DEFAULT_OWNER) -> None:
    """Serve your conversations to an MCP client over stdio (read-only: list, read, search,
    recall)."""
    asyncio.run(_serve(db, owner))
