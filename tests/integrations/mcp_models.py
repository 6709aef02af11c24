"""A scripted model for ``tether chat --mcp`` tests: ``-m mcpcall:TOOL`` calls TOOL once with
``{"key": "k", "path": "p"}``-style arguments from the environment, then answers with what the
tool returned (or that it was denied)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from tether import Message, ToolCall, assistant
from tether.models.testing import FunctionInfo, FunctionModel


def _reply(tool: str) -> Any:
    def reply(messages: Sequence[Message], info: FunctionInfo) -> Message | str:
        last = messages[-1]
        if last.role == "tool":
            return "the tool said: " + " | ".join(r.text for r in last.tool_results)
        arguments = os.environ.get("MCP_TEST_ARGUMENTS", "{}")
        json.loads(arguments)
        return assistant(ToolCall("call-1", tool, arguments))

    return reply


def McpCallModel(name: str = "lookup") -> FunctionModel:
    return FunctionModel(_reply(name), name=f"mcpcall:{name}")


def delete_file_model() -> FunctionModel:
    """``--model py:tests.integrations.mcp_models:delete_file_model`` for ``tether serve``."""
    return McpCallModel("delete_file")


def lookup_model() -> FunctionModel:
    return McpCallModel("lookup")
