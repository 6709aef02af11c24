"""Fixtures for agent tests: scripted models built from a list of replies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import Message, ToolCall, assistant
from tether.models.testing import FunctionInfo, FunctionModel


class Script:
    """A FunctionModel driven by a list of replies; records what each request received."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.seen: list[list[Message]] = []
        self.infos: list[FunctionInfo] = []
        self.model = FunctionModel(self._fn)

    def _fn(self, messages: Sequence[Message], info: FunctionInfo) -> Any:
        self.seen.append(list(messages))
        self.infos.append(info)
        if not self.replies:
            raise AssertionError("the script ran out of replies")
        reply = self.replies.pop(0)
        return reply(messages, info) if callable(reply) else reply


def calls(*specs: tuple[str, str, str]) -> Message:
    """An assistant turn with tool calls given as (id, name, arguments)."""
    return assistant(*(ToolCall(i, n, a) for i, n, a in specs))
