"""The Model protocol every driver implements, and the values that cross it.

A model turns (messages, instructions, tool definitions, settings) into one assistant message.
It never executes tools: the agent owns the tool loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from tether.errors import UserError
from tether.messages import Message, Usage

__all__ = [
    "Model",
    "ModelResponse",
    "ModelSettings",
    "Profile",
    "ReasoningDelta",
    "ReasoningReplay",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolDefinition",
    "aclose_model",
    "with_limits",
]

ReasoningReplay: TypeAlias = Literal["same-provider", "same-family", "never"]
"""Which reasoning parts a driver sends back: signed reasoning from the same provider, only from
the same model family, or none (dropped and reported)."""


@dataclass(frozen=True, slots=True)
class Profile:
    """What a driver/model family can take. Drivers check content against it before any I/O.

    ``context_window`` (tokens of input and output together) and ``max_output_tokens`` (the most
    one response may generate) are the provider's published limits for the family, ``None`` where
    none is published or known (data for context compaction; drivers do not enforce them). A
    driver's ``context_window=`` / ``max_output_tokens=`` arguments override them."""

    provider: str
    family: str = ""
    images: bool = True
    image_urls: bool = True
    documents: bool = False
    document_urls: bool = False
    document_types: tuple[str, ...] = ()
    """Media types accepted for inline documents (``"text/*"`` matches every text type);
    empty means any."""
    tool_result_media: bool = False
    reasoning_replay: ReasoningReplay = "never"
    parallel_tool_calls: bool = True
    streaming: bool = True
    context_window: int | None = None
    max_output_tokens: int | None = None


def with_limits(
    profile: Profile, *, context_window: int | None = None, max_output_tokens: int | None = None
) -> Profile:
    """``profile`` with the given token limits replacing its own (``None`` keeps the profile's).
    A limit that is not a positive integer raises ``UserError``."""
    for name, value in (("context_window", context_window), ("max_output_tokens", max_output_tokens)):
        if value is not None and (type(value) is not int or value <= 0):
            raise UserError(f"{name} must be a positive integer of tokens, not {value!r}")
    if context_window is None and max_output_tokens is None:
        return profile
    return replace(
        profile,
        context_window=profile.context_window if context_window is None else context_window,
        max_output_tokens=profile.max_output_tokens if max_output_tokens is None else max_output_tokens,
    )


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as the model sees it: name, description, JSON Schema of the arguments object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Request settings common to providers. ``extra`` is passed through to the driver."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    parallel_tool_calls: bool | None = None
    timeout: float | None = None
    extra: dict[str, Any] = field(default_factory=lambda: {})


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One response: the assistant message (with provider/model/usage stamped on it), the
    normalized stop reason and usage. Check ``stop_reason`` before treating it as an answer:
    ``"stop"`` | ``"tool_calls"`` | ``"length"`` | ``"content_filter"`` | ``"error"`` or a
    provider value passed through."""

    message: Message
    stop_reason: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text. ``index`` is the part index in the final message."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A tool call starting (``name``/``id`` set) or receiving more argument text."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


StreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | ModelResponse
"""What ``Model.stream`` yields: deltas, then exactly one final ``ModelResponse`` equal to what
``generate`` would have returned for the same provider output."""


@runtime_checkable
class Model(Protocol):
    """A language model behind one provider API.

    Lifecycle: a model that holds connections (every shipped driver) also has ``async def
    aclose()`` and is an async context manager (``async with model: ...``); ``aclose`` releases
    what the model created itself (its SDK client, its HTTP connections) and leaves a client the
    caller passed in open. A closed driver opens a new client on its next request; ``aclose`` is
    idempotent. The offline models (``FunctionModel``, ``TestModel``) have a no-op ``aclose``.
    ``aclose`` is not required of a ``Model`` (models written before it was documented still
    satisfy the protocol): call :func:`aclose_model`, which closes any model that has it.
    """

    @property
    def name(self) -> str: ...

    @property
    def profile(self) -> Profile: ...

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> ModelResponse:
        """One request, no tool execution."""
        ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        instructions: str | None = None,
        tools: Sequence[ToolDefinition] = (),
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """One streamed request: deltas, then the final ``ModelResponse``."""
        ...


async def aclose_model(model: object) -> None:
    """Close ``model`` if it can be closed (``await model.aclose()``); models without ``aclose``
    hold nothing to release."""
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()
