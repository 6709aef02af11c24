"""What a run needs from its agent, and the hooks a store binding implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tether.messages import ToolCall
from tether.models import Model, ModelSettings, ToolDefinition

from ._context import RunContext
from ._output import OutputSpec
from ._tools import Tool

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["RunConfig", "RunHooks"]


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs from its agent, resolved for this run."""

    model: Model
    tools: Mapping[str, Tool[Any]]
    definitions: tuple[ToolDefinition, ...]
    output: OutputSpec[Any]
    instructions: str | None
    instructions_fn: Callable[[RunContext[Any]], str | Awaitable[str | None] | None] | None
    history_processor: Callable[..., Any] | None
    processor_takes_ctx: bool
    max_steps: int
    retries: int
    secret: bytes | None
    settings: ModelSettings | None


class RunHooks(Protocol):
    """What a store binding does around tools with side effects (``idempotent=False``)."""

    async def checkpoint(self, run: Run) -> None:
        """Persist the run's messages so far (the turn that requested the calls included)."""
        ...

    async def tool_started(self, run: Run, call: ToolCall) -> bool:
        """Record that ``call`` is about to run; False when it was started before (do not run)."""
        ...

    async def tool_finished(self, run: Run, call: ToolCall, failed: bool) -> None:
        """Record that ``call`` returned."""
        ...
