"""Session items ↔ tether messages, and the markers ``pop_item`` and ``clear_session`` append.

The log holds tether messages. A session's items are the items of its messages, in order, each
message encoded on its own with ``tether.convert.to_openai_agents``, with two kinds of marker
applied: a *pop* marker removes the item before it that is still in view, a *clear* marker
removes every item before it. A marker is a ``system`` message stamped
``provider=MARKER_PROVIDER`` and ``stop_reason`` naming the operation; tether runs never send a
stored system message to a model, and other readers see it as a note in the transcript.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias, cast

import msgspec

from tether.convert import ConversionReport, Loss, from_openai_agents, to_openai_agents
from tether.errors import DecodeError
from tether.messages import Message, Text, ToolResult

__all__ = [
    "MARKER_PROVIDER",
    "Item",
    "Op",
    "call_names",
    "decode_items",
    "encode_message",
    "is_marker",
    "marker",
    "marker_op",
    "name_results",
    "summary",
    "unkept",
    "unnamed_calls",
]

Item: TypeAlias = dict[str, Any]
Op: TypeAlias = Literal["pop_item", "clear_session"]

MARKER_PROVIDER = "tether.session"
"""The ``provider`` stamp of the system messages that mark a ``pop_item`` or ``clear_session``."""

_NOTES: dict[str, str] = {
    "pop_item": "OpenAI Agents session: pop_item removed the last item ({what})",
    "clear_session": "OpenAI Agents session: clear_session removed every earlier item",
}


def marker(op: Op, popped: Mapping[str, Any] | None = None) -> Message:
    """The marker message of one operation; a pop names the kind of item it removed."""
    what = _kind(popped) if popped is not None else "an item"
    return Message("system", (Text(_NOTES[op].format(what=what)),), provider=MARKER_PROVIDER, stop_reason=op)


def marker_op(message: Message) -> Op | None:
    """The operation a message marks, or ``None`` for a message of the conversation."""
    if message.role != "system" or message.provider != MARKER_PROVIDER:
        return None
    if message.stop_reason == "pop_item":
        return "pop_item"
    if message.stop_reason == "clear_session":
        return "clear_session"
    return None


def is_marker(message: Message) -> bool:
    """True for the system messages ``TetherSession.pop_item`` and ``clear_session`` append."""
    return marker_op(message) is not None


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind is None or kind == "message":
        return f"{item.get('role', 'message')} message"
    return str(kind)


def encode_message(message: Message) -> tuple[list[Item], ConversionReport]:
    """The session items of one stored message (never a marker)."""
    return to_openai_agents([message])


def _plain(items: object) -> object:
    """SDK items as plain JSON values: pydantic models (what some SDK paths hand over) are dumped
    the way the SDK dumps them for a session; everything else goes to the converter as it is."""
    if not isinstance(items, list):
        return items
    out: list[object] = []
    for item in cast(list[object], items):
        dump: object = getattr(item, "model_dump", None)
        out.append(dump(exclude_unset=True, mode="json") if callable(dump) else item)
    return out


def decode_items(items: object) -> tuple[list[Message], ConversionReport, list[object]]:
    """Items from ``add_items`` → messages, the report, and the items as plain JSON values.
    Malformed items raise ``DecodeError`` with the JSON path of the offending element
    (``$[2].call_id``); nothing is written then."""
    try:
        plain = _plain(items)
        messages, report = from_openai_agents(plain)
    except TypeError as exc:  # a Python value that is not JSON (a set, an object)
        raise DecodeError(f"session items must be JSON values: {exc}", path="$") from None
    return messages, report, cast(list[object], plain)


def unnamed_calls(report: ConversionReport, items: Sequence[object]) -> dict[int, str]:
    """The results the converter found no call for in their own batch: item index → call id."""
    found: dict[int, str] = {}
    for loss in report.losses:
        if loss.what != "tool name" or loss.part is not None or not 0 <= loss.message < len(items):
            continue
        item = items[loss.message]
        call_id = cast(Mapping[str, Any], item).get("call_id") if isinstance(item, Mapping) else None
        if isinstance(call_id, str):
            found[loss.message] = call_id
    return found


def name_results(
    messages: Sequence[Message],
    report: ConversionReport,
    unnamed: Mapping[int, str],
    names: Mapping[str, str],
) -> tuple[list[Message], ConversionReport]:
    """Give results whose call was added in an earlier batch the name of that call (``names``:
    call id → tool name from the stored log) and drop the losses this resolves."""
    resolved = {index for index, call_id in unnamed.items() if call_id in names}
    if not resolved:
        return list(messages), report
    fixed: list[Message] = []
    for m in messages:
        if m.role == "tool":
            parts = tuple(
                msgspec.structs.replace(p, name=names[p.call_id])
                if type(p) is ToolResult and not p.name and p.call_id in names
                else p
                for p in m.parts
            )
            m = msgspec.structs.replace(m, parts=parts)
        fixed.append(m)
    kept = [
        loss
        for loss in report.losses
        if not (loss.what == "tool name" and loss.part is None and loss.message in resolved)
    ]
    return fixed, ConversionReport(kept)


_SHAPE_ONLY = frozenset({"type", "status"})
"""Keys an item may come back without and mean the same: ``type`` of a message item (the short
form ``{"role", "content"}`` has none) and ``status`` of an item without an id."""


def unkept(items: Sequence[object], report: ConversionReport, messages: Sequence[Message]) -> list[str]:
    """What ``get_items`` will not give back of these items, beyond the report: the keys of an
    item the converter ignores (``provider_data``, fields of newer SDKs), one line per item, or
    one line when the items do not come back one for one."""
    dropped = {
        loss.message
        for loss in report.losses
        if loss.part is None and loss.kind == "dropped" and loss.what.endswith(" item")
    }
    kept = [item for i, item in enumerate(items) if i not in dropped]
    back = [out for m in messages for out in encode_message(m)[0]]
    if len(kept) != len(back):
        return [f"the {len(kept)} items carried come back as {len(back)} items"]
    lines: list[str] = []
    index = [i for i in range(len(items)) if i not in dropped]
    for i, given, returned in zip(index, kept, back, strict=True):
        if not isinstance(given, Mapping):
            continue
        missing = sorted(set(cast(Mapping[str, Any], given)) - set(returned) - _SHAPE_ONLY)
        if missing:
            lines.append(f"item {i}: dropped {', '.join(missing)} (fields tether messages do not keep)")
    return lines


def call_names(messages: Iterable[Message]) -> dict[str, str]:
    """call id → tool name over the calls of ``messages``."""
    return {p.id: p.name for m in messages for p in m.tool_calls if p.id}


def summary(losses: Sequence[Loss], *, unit: str | None) -> str:
    """The losses on one line: ``item 3: dropped web_search_call item (…)``; ``unit=None`` for
    the losses of one message (only the part is named)."""
    out: list[str] = []
    for loss in losses:
        where = [] if unit is None else [f"{unit} {loss.message}"]
        if loss.part is not None:
            where.append(f"part {loss.part}")
        out.append(f"{' '.join(where) or 'message'}: {loss.kind} {loss.what} ({loss.reason})")
    return "; ".join(out)
