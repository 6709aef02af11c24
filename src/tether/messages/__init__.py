"""The value model: parts, messages, constructors, ids and the JSON codec.

This package imports nothing of tether except the exception tree.
"""

from tether.messages._codec import (
    CONTRACT_VERSION,
    dumps,
    dumps_message,
    json_schema,
    loads,
    loads_message,
)
from tether.messages._constructors import assistant, system, tool, user
from tether.messages._ids import new_id
from tether.messages._model import (
    ROLES,
    Document,
    Image,
    Message,
    Part,
    Reasoning,
    ResultPart,
    Role,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)

__all__ = [
    "CONTRACT_VERSION",
    "ROLES",
    "Document",
    "Image",
    "Message",
    "Part",
    "Reasoning",
    "ResultPart",
    "Role",
    "Text",
    "ToolCall",
    "ToolResult",
    "Usage",
    "assistant",
    "dumps",
    "dumps_message",
    "json_schema",
    "loads",
    "loads_message",
    "new_id",
    "system",
    "tool",
    "user",
]
