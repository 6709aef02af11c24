"""Preparing a run's messages: the prompt message, the donor conversation id, the history
processor, the check that a prompt-less run can resume, and one distinct id per model call."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from msgspec.structs import replace

from tether.errors import ApprovalError, HistoryError, RunError, UserError
from tether.messages import Document, Image, Message, Part, Text, ToolCall

from ._approvals import DeferredResults
from ._config import Prompt, RunConfig
from ._context import RunContext
from ._decisions import Resolution, resolve_decisions

__all__ = [
    "apply_processor",
    "check_resumable",
    "distinct_calls",
    "donor_conversation_id",
    "interrupted_turn",
    "take_pending",
    "user_message",
]


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
    for i, part in enumerate(parts):
        if type(part) is Text and not part.text.isascii():
            try:
                part.text.encode()
            except UnicodeEncodeError as exc:  # no store, no provider could take it
                raise UserError(
                    f"the prompt's part {i} is not valid Unicode: a lone surrogate at character {exc.start}"
                ) from None
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


def interrupted_turn(history: Sequence[Message], tools: Mapping[str, Any]) -> Message | None:
    """The last message when it is an assistant turn whose calls all have ids, none answered and
    none waiting for an approval or an external result: a turn a run stored before running its
    tools and did not finish (ADR 0015). A prompt-less run continues it by running its calls;
    ``None`` for any other history (a gated turn still needs ``deferred=``)."""
    last = history[-1] if history else None
    if type(last) is not Message or last.role != "assistant" or not last.tool_calls:
        return None
    ids = {c.id for c in last.tool_calls}
    if None in ids or "" in ids or len(ids) != len(last.tool_calls):
        return None
    for call in last.tool_calls:
        tool = tools.get(call.name)
        if tool is not None and (tool.requires_approval or tool.external):
            return None
    return last


def take_pending(
    history: Sequence[Message],
    deferred: DeferredResults | None,
    promptless: bool,
    stored: bool,
    cfg: RunConfig,
    conversation_id: str,
) -> tuple[Sequence[Message], Message | None, Resolution | None]:
    """The history without the assistant turn a run continues, that turn, and how its calls are
    resolved: the turn ``deferred`` answers (decisions checked against it), or, for a prompt-less
    run on a ``stored`` conversation, a turn stored before its tools ran (ADR 0015: its calls
    run). A prompt-less run with neither must be resumable (``check_resumable``)."""
    if deferred is not None:
        last = history[-1] if history else None
        if type(last) is not Message or last.role != "assistant" or not last.tool_calls:
            raise ApprovalError(
                "deferred results need the history to end with the assistant turn that "
                "requested the pending calls",
                stage="approval",
            )
        resolution = resolve_decisions(last, deferred, cfg.tools, cfg.secret, conversation_id, time.time())
        return history[:-1], last, resolution
    if not promptless:
        return history, None, None
    # a client-held history has no ledger to trust: only a stored turn is continued this way
    turn = interrupted_turn(history, cfg.tools) if stored else None
    if turn is None:
        check_resumable(history)
        return history, None, None
    return history[:-1], turn, Resolution({}, None)


def distinct_calls(message: Message, run_id: str, step: int) -> Message:
    """The model turn with one distinct id per call, so its results can always be paired.

    A call without an id, or repeating an earlier call's id with another name or other
    arguments, gets a deterministic fresh id (run id, step, part index) and runs as its own
    call; an exact repeat (same id, name and arguments) is the same call said twice and is
    dropped, so its tool runs once.
    """
    calls = message.tool_calls
    ids = {c.id for c in calls}
    if None not in ids and "" not in ids and len(ids) == len(calls):
        return message
    taken = {i for i in ids if i}
    seen: dict[str, ToolCall] = {}
    parts: list[Part] = []
    tag = "".join(ch for ch in run_id if ch.isalnum())[-8:]
    for index, part in enumerate(message.parts):
        if type(part) is not ToolCall:
            parts.append(part)
            continue
        cid = part.id
        if cid and cid in seen:
            first = seen[cid]
            if first.name == part.name and first.arguments == part.arguments:
                continue
            cid = None
        if not cid:
            base = f"call_{tag}_{step}_{index}"
            cid, n = base, 1
            while cid in taken:
                n += 1
                cid = f"{base}_{n}"
            taken.add(cid)
            part = replace(part, id=cid)
        seen[cid] = part
        parts.append(part)
    return replace(message, parts=tuple(parts))
