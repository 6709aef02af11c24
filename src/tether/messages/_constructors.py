"""Short constructors: ``user``, ``assistant``, ``tool``, ``system``."""

from __future__ import annotations

from tether.messages._model import (
    Document,
    Image,
    Message,
    Part,
    Reasoning,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = ["assistant", "system", "tool", "user"]


def _texts(content: tuple[object, ...]) -> tuple[Part, ...]:
    return tuple(Text(c) if isinstance(c, str) else c for c in content)  # type: ignore[misc]


def user(
    *content: str | Text | Image | Document,
    run_id: str | None = None,
    conversation_id: str | None = None,
) -> Message:
    """A user message; strings become ``Text`` parts."""
    return Message("user", _texts(content), run_id=run_id, conversation_id=conversation_id)


def system(*content: str | Text) -> Message:
    """A system message. It exists for importing foreign transcripts: runs never send it."""
    return Message("system", _texts(content))


def assistant(
    *content: str | Text | Image | Document | ToolCall | Reasoning,
    run_id: str | None = None,
    conversation_id: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    stop_reason: str | None = None,
    usage: Usage | None = None,
    response_id: str | None = None,
) -> Message:
    """An assistant message; strings become ``Text`` parts."""
    return Message(
        "assistant",
        _texts(content),
        run_id=run_id,
        conversation_id=conversation_id,
        provider=provider,
        model=model,
        stop_reason=stop_reason,
        usage=usage,
        response_id=response_id,
    )


def tool(*results: ToolResult, run_id: str | None = None, conversation_id: str | None = None) -> Message:
    """A tool message holding tool results."""
    return Message("tool", results, run_id=run_id, conversation_id=conversation_id)
