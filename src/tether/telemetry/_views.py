"""What telemetry reads of a run, a result and a tool: structural types, so the agent layer
hands over its own objects and this package never imports it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from tether.messages import Message, ToolCall, ToolResult, Usage
from tether.models import Model, ModelSettings

__all__ = [
    "ConfigView",
    "DeferredView",
    "JobView",
    "OutputView",
    "PendingView",
    "ResultView",
    "RunView",
    "StateView",
    "ToolRunView",
    "ToolView",
]


class StateView(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def conversation_id(self) -> str: ...
    @property
    def requests(self) -> int: ...
    @property
    def tool_executions(self) -> int: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def sent(self) -> Sequence[Message]: ...


class ToolView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def requires_approval(self) -> bool: ...
    @property
    def external(self) -> bool: ...
    @property
    def idempotent(self) -> bool: ...


class OutputView(Protocol):
    @property
    def is_text(self) -> bool: ...


class ConfigView(Protocol):
    @property
    def model(self) -> Model: ...
    @property
    def settings(self) -> ModelSettings | None: ...
    @property
    def tools(self) -> Mapping[str, ToolView]: ...
    @property
    def output(self) -> OutputView: ...


class ToolRunView(Protocol):
    """What a tool step's telemetry reads of its run."""

    @property
    def cfg(self) -> ConfigView: ...
    @property
    def state(self) -> StateView: ...
    @property
    def stored(self) -> bool: ...


class RunView(ToolRunView, Protocol):
    """A run (``tether.agent``'s ``Run``) as telemetry reads it."""

    @property
    def stage(self) -> str: ...
    @property
    def instructions(self) -> str | None: ...
    @property
    def streaming(self) -> bool: ...
    @property
    def deferred_in(self) -> object | None: ...


class JobView(Protocol):
    """One executed call of a tool batch."""

    @property
    def call(self) -> ToolCall: ...
    @property
    def result(self) -> ToolResult | None: ...
    @property
    def started(self) -> bool: ...


class PendingView(Protocol):
    @property
    def call(self) -> ToolCall: ...
    @property
    def kind(self) -> str: ...


class DeferredView(Protocol):
    @property
    def calls(self) -> Sequence[PendingView]: ...


class ResultView(Protocol):
    @property
    def deferred(self) -> DeferredView | None: ...
    @property
    def requests(self) -> int: ...
    @property
    def tool_executions(self) -> int: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def conversation_id(self) -> str: ...
