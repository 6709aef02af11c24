"""What a run needs from its agent (resolved once per agent, or per run when ``tools=`` is given),
and the per-run options, built once from the keyword arguments of ``run``/``run_stream``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.messages import Document, Image, Message, Text
from tether.models import Model, ModelSettings, ToolDefinition

from ._approvals import DeferredResults, ReplayGuard
from ._context import RunContext
from ._output import OutputSpec
from ._recorder import RunRecorder
from ._tools import Tool, ToolLike
from ._toolset import Toolset
from .compaction._config import Compaction

if TYPE_CHECKING:
    from tether.stores import Store

__all__ = ["Prompt", "RunConfig", "RunOptions"]

Prompt = str | Text | Image | Document | Sequence[str | Text | Image | Document]


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs from its agent."""

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
    approval_ttl: float
    replay_guard: ReplayGuard
    accept_truncated: bool
    settings: ModelSettings | None
    compaction: Compaction | None = None


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The arguments of one run, as given to ``run``, ``run_sync`` or ``run_stream``."""

    prompt: Prompt | None = None
    history: Sequence[Message] = ()
    deps: Any = None
    tools: Sequence[ToolLike | Toolset] | None = None
    run_id: str | None = None
    conversation_id: str | None = None
    deferred: DeferredResults | None = None
    store: Store | None = None
    owner: str | None = None
    recorder: RunRecorder | None = None
