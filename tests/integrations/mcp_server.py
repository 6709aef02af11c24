"""An MCP server written with the official SDK's server API, for the tests of MCP tools in.

Run as ``python mcp_server.py COUNTS_FILE [stdio|http PORT]``. Every tool call appends its name to
COUNTS_FILE (one line per call, written before the tool does anything else), so a test counts how
often the server really ran a tool, across restarts of the server and of tether.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import AudioContent, CallToolResult, ImageContent, TextContent, ToolAnnotations

COUNTS = Path(sys.argv[1])
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
)
server = MCPServer("tether-test-tools")


def count(name: str) -> None:
    with COUNTS.open("a") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str) -> str:
    """Look a key up (read-only)."""
    count("lookup")
    return f"value of {key}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def append_note(text: str) -> str:
    """Append a note (a side effect, not destructive)."""
    count("append_note")
    return f"noted: {text}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file (destructive)."""
    count("delete_file")
    return f"deleted {path}"


@server.tool()
def unannotated(n: int) -> str:
    """A tool without annotations."""
    count("unannotated")
    return str(n * 2)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def picture() -> CallToolResult:
    """An image, some audio and structured content."""
    count("picture")
    return CallToolResult(
        content=[
            TextContent(text="a pixel"),
            ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
            AudioContent(data=base64.b64encode(b"RIFF").decode(), mime_type="audio/wav"),
        ],
        structured_content={"width": 1},
    )


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def structured() -> dict[str, Any]:
    """Structured content only."""
    count("structured")
    return {"answer": 42}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fails() -> str:
    """A tool that reports an error."""
    count("fails")
    raise ToolError("the disk is full")


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
def crash() -> str:
    """The server process dies in the middle of this call."""
    count("crash")
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def hang() -> str:
    """Never answers."""
    count("hang")
    await asyncio.sleep(3600)
    return "late"


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
def slow_side_effect(path: str) -> str:
    """A side effect that takes a while after it happened (a kill lands in between)."""
    count("slow_side_effect")
    Path(path).write_text("started")
    import time

    time.sleep(60)
    return "done"


@server.tool(annotations=ToolAnnotations(destructive_hint=False))
async def add_tool(ctx: Context) -> str:
    """Adds a tool named 'added' and tells the client the list changed."""
    count("add_tool")

    def added() -> str:
        """A tool added at run time."""
        return "I was added"

    server.add_tool(added, annotations=ToolAnnotations(read_only_hint=True))
    # a 2025-11-25 session (what initialize negotiates) is told spontaneously
    await ctx.request_context.session.send_tool_list_changed()
    return "added"


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    else:
        import uvicorn

        app = server.streamable_http_app()
        token = os.environ.get("MCP_TEST_TOKEN")

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            if token and scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"no"})
                    return
            await app(scope, receive, send)

        uvicorn.run(guarded, host="127.0.0.1", port=int(sys.argv[3]), log_level="warning", lifespan="on")
