"""Tools a client runs itself (AG-UI's frontend tools): tether ``external`` tools made from the
declaration the client sent, so a run can be rebuilt from its declarations alone (a continued
run of a dead process, ``_durable``)."""

from __future__ import annotations

from typing import Any

from tether.agent import Tool
from tether.models import ToolDefinition

__all__ = ["FrontendTool"]


def _runs_in_the_client() -> None:
    """Never called: an external tool's result comes from the client."""


class FrontendTool(Tool[Any]):
    """A tool the client runs itself: a tether ``external`` tool whose JSON Schema is the one
    the client declared."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any]) -> None:
        super().__init__(_runs_in_the_client, name=name, description=description, external=True)
        self.definition = ToolDefinition(name, description, parameters)
