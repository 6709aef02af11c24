"""Preparing a run's history: the prompt message, the donor conversation id, the history
processor and the check that a prompt-less run can resume."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, cast

from tether.errors import HistoryError, RunError, UserError
from tether.messages import Document, Image, Message, Part, Text

from ._context import RunContext

__all__ = ["Prompt", "apply_processor", "check_resumable", "donor_conversation_id", "user_message"]

Prompt = str | Text | Image | Document | Sequence[str | Text | Image | Document]


def user_message(prompt: Prompt, run_id: str, conversation_id: str) -> Message:
    given: object = prompt
    if isinstance(prompt, str):
        parts: tuple[Part, ...] = (Text(prompt),)
    elif isinstance(prompt, Text | Image | Document):
        parts = (prompt,)
    elif isinstance(given, list | tuple):
        parts = tuple(Text(p) if isinstance(p, str) else p for p in prompt)
    else:
        raise UserError(f"the prompt must be text or a list of parts, not {type(given).__name__}")
    return Message("user", parts, run_id=run_id, conversation_id=conversation_id)


def donor_conversation_id(history: Sequence[Message]) -> str | None:
    """The conversation id of the most recent identified message, if any."""
    for m in reversed(history):
        if type(m) is Message and m.conversation_id:
            return m.conversation_id
    return None


async def apply_processor(
    processor: Callable[..., Any], takes_ctx: bool, history: Sequence[Message], ctx: RunContext[Any]
) -> list[Message]:
    """Run the history processor once; any failure is ``RunError(stage="history")``, no partial."""
    try:
        processed: Any = processor(history, ctx) if takes_ctx else processor(history)
        if inspect.isawaitable(processed):
            processed = await processed
        out = list(cast(Sequence[Message], processed))
    except Exception as exc:
        raise RunError(f"the history processor failed: {exc}", stage="history") from exc
    for i, m in enumerate(out):
        if type(m) is not Message:
            raise RunError(
                f"the history processor returned a {type(m).__name__} at index {i}, not a Message",
                stage="history",
            )
    return out


def check_resumable(history: Sequence[Message]) -> None:
    last = next((m for m in reversed(history) if type(m) is not Message or m.role != "system"), None)
    if type(last) is not Message and last is not None:
        return  # repair names the bad item and its index
    if last is None:
        raise HistoryError("a run needs a prompt or a history to continue; both are empty")
    if last.role in ("user", "tool"):
        return
    if last.tool_calls:
        raise HistoryError(
            "the history ends with an assistant turn whose tool calls have no results: pass a "
            "prompt (repair closes the calls) or deferred=DeferredResults(...) to answer them"
        )
    raise HistoryError(
        "without a prompt the history must end with a user message or with tool results; "
        "it ends with a finished assistant answer"
    )
