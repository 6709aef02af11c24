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
from tether.messages import Message
from tether.models.wire import ConversionReport
from tether.models.wire import openai_responses as wire

__all__ = ["from_openai_agents", "to_openai_agents"]


def from_openai_agents(data: object) -> tuple[list[Message], ConversionReport]:
    """Session items (a list, or its JSON text) → messages. Report indices are item indices."""
    return wire.decode_messages(load_json(data))


def to_openai_agents(messages: Sequence[Message]) -> tuple[list[dict[str, Any]], ConversionReport]:
    """Messages → session items ``SQLiteSession.add_items`` stores and ``Runner.run`` replays.

    A ``function_call`` with its item id gets ``"status": "completed"``, as a ``message`` item
    with an id does: that is how the SDK stores the calls of a Responses model, so the items it
    wrote come back equal (the SDK matches items by their exact JSON when it resumes a write)."""
    items, report = wire.encode_messages(messages)
    for item in items:
        if item.get("type") == "function_call" and "id" in item:
            item["status"] = "completed"
    return items, report
