"""The one state value of a run, and the only place its ``Result`` and ``Partial`` are built."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec.structs import replace

from tether.errors import Partial
from tether.history import HistoryRepair
from tether.messages import Message, Text, Usage

from ._approvals import Deferred
from ._result import Result
from .compaction._report import CompactionReport

__all__ = ["CANCELED_STOP_REASON", "RunState"]

CANCELED_STOP_REASON = "canceled"
"""``stop_reason`` of the assistant message holding the text a stopped run had streamed."""


class RunState:
    """What a run has done so far.

    ``messages`` is the canonical conversation (the supplied history as processed and repaired,
    then every new message); ``sent`` is what the model sees (the same list, or a copy without
    system messages); ``new`` is what this run added; ``recorded`` counts the new messages a
    recorder already holds. ``streamed`` collects the text of the model turn being streamed.
    """

    __slots__ = (
        "compactions",
        "conversation_id",
        "messages",
        "new",
        "recorded",
        "repair",
        "requests",
        "run_id",
        "sent",
        "streamed",
        "tool_executions",
        "usage",
    )

    def __init__(self, run_id: str, conversation_id: str) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.messages: list[Message] = []
        self.sent: list[Message] = self.messages
        self.new: list[Message] = []
        self.recorded = 0
        self.usage = Usage()
        self.requests = 0
        self.tool_executions = 0
        self.repair = HistoryRepair()
        self.streamed: list[str] = []
        self.compactions: list[CompactionReport] = []

    def start(self, messages: list[Message]) -> None:
        """Adopt the prepared history."""
        self.messages = messages
        self.sent = (
            [m for m in messages if m.role != "system"]
            if any(m.role == "system" for m in messages)
            else messages
        )

    def add(self, message: Message) -> None:
        self.messages.append(message)
        if self.sent is not self.messages:
            self.sent.append(message)
        self.new.append(message)

    def unrecorded(self) -> list[Message]:
        return self.new[self.recorded :]

    def move(self, conversation_id: str) -> None:
        """The recorder stored this run in another conversation (a fork on conflict): re-stamp
        the new messages, which are the tail of ``messages`` and of ``sent``."""
        old, self.conversation_id = self.conversation_id, conversation_id
        n = len(self.new)
        lists = (
            [self.new, self.messages] if self.sent is self.messages else [self.new, self.messages, self.sent]
        )
        for items in lists:
            for i in range(len(items) - n, len(items)):
                m = items[i]
                if m.conversation_id == old:
                    items[i] = replace(m, conversation_id=conversation_id)

    def unfinished(self, provider: str | None, model: str | None) -> Message | None:
        """The model turn being streamed when the run stopped, as far as it got."""
        text = "".join(self.streamed)
        if not text:
            return None
        return Message(
            "assistant",
            (Text(text),),
            run_id=self.run_id,
            conversation_id=self.conversation_id,
            provider=provider,
            model=model,
            stop_reason=CANCELED_STOP_REASON,
        )

    def partial(self, *, stopped: bool = False, unfinished: Message | None = None) -> Partial | None:
        """Resumable evidence. ``None`` when no model turn or tool execution completed, unless
        the run was ``stopped`` (cancelled): a stop keeps what the user said."""
        if not stopped and self.requests == 0 and self.tool_executions == 0:
            return None
        return Partial(
            tuple(self.messages),
            tuple(self.new),
            self.usage,
            self.requests,
            self.tool_executions,
            self.run_id,
            self.conversation_id,
            unfinished,
        )

    def result(
        self,
        output: Any,
        deferred: Deferred | None,
        stop_reason: str | None,
        view: Sequence[Message] | None = None,
    ) -> Result[Any]:
        """The run's result; ``view``: the compacted view, returned as its messages."""
        return Result(
            tuple(self.messages if view is None else view),
            tuple(self.new),
            self.usage,
            self.requests,
            self.tool_executions,
            self.run_id,
            self.conversation_id,
            deferred,
            self.repair,
            stop_reason,
            output,
            tuple(self.compactions),
        )
