"""OpenAI Agents SDK session items (what ``SQLiteSession.get_items()`` returns) to and from tether.

A session stores Responses API input items (``item.to_input_item()``), so this format shares the
Responses wire mapping; only the framing differs: items may come from ``get_items()`` directly or
as the JSON text of that list. Read a session with ``await session.get_items()`` and write one with
``await session.add_items(items)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.convert._input import load_json
from tether.messages import Message, ToolCall
from tether.models.wire import ConversionReport, Loss
from tether.models.wire import openai_responses as wire

__all__ = ["from_openai_agents", "to_openai_agents"]


def from_openai_agents(data: object) -> tuple[list[Message], ConversionReport]:
    """Session items (a list, or its JSON text) → messages. Report indices are item indices."""
    return wire.decode_messages(load_json(data))


SDK_PLACEHOLDER_ID = "__fake_id__"
"""The item id the SDK gives the items of models without item ids (Chat Completions, LiteLLM)."""


def to_openai_agents(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Messages → session items ``SQLiteSession.add_items`` stores and ``Runner.run`` replays.

    Two details follow the SDK rather than the Responses wire, so the items the SDK wrote come
    back equal (it matches items by their exact JSON when it resumes a write): a
    ``function_call`` with a Responses id (``fc_…``) gets ``"status": "completed"``, as a
    ``message`` item with an id does; and the SDK's placeholder id ``__fake_id__`` of a call is
    kept (the wire drops ids that are not ``fc_…``)."""
    items, report = wire.encode_messages(messages)
    placeholders: set[str] = set()
    kept: list[Loss] = []
    for loss in report.losses:
        part = messages[loss.message].parts[loss.part] if loss.part is not None else None
        if (
            loss.what == "tool call provider id"
            and type(part) is ToolCall
            and part.provider_id == SDK_PLACEHOLDER_ID
            and part.id is not None
        ):
            placeholders.add(part.id)
        else:
            kept.append(loss)
    for item in items:
        if item.get("type") != "function_call":
            continue
        if str(item.get("id", "")).startswith("fc"):
            item["status"] = "completed"
        elif "id" not in item and item.get("call_id") in placeholders:
            item["id"] = SDK_PLACEHOLDER_ID
    return items, ConversionReport(kept)
