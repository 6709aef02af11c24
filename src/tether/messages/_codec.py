"""The JSON codec of the message contract: ``dumps``/``loads`` and one-message forms."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec

from tether.errors import DecodeError, UserError
from tether.messages._model import Message

__all__ = [
    "CONTRACT_VERSION",
    "dumps",
    "dumps_message",
    "json_schema",
    "loads",
    "loads_message",
]

CONTRACT_VERSION = 1
"""The version of the JSON contract. It only ever gains fields (ADR 0001)."""

_encoder = msgspec.json.Encoder()
_list_decoder = msgspec.json.Decoder(list[Message])
_one_decoder = msgspec.json.Decoder(Message)
_PATH = re.compile(r" - at `(\$[^`]*)`$")
_PART = re.compile(r"^part (\d+) \(")


def dumps(messages: Iterable[Message]) -> bytes:
    """Encode messages as the tether JSON contract (a JSON array).

    Text that is not valid Unicode (a lone surrogate, which JSON text cannot carry) raises
    ``UserError`` naming the message index."""
    if not isinstance(messages, list | tuple):
        messages = list(messages)
    try:
        return _encoder.encode(messages)
    except UnicodeEncodeError:
        for index, message in enumerate(messages):
            _encode_one(message, f"message {index}")
        raise


def dumps_message(message: Message) -> bytes:
    """Encode one message as a JSON object."""
    return _encode_one(message, "the message")


def _encode_one(message: Message, where: str) -> bytes:
    try:
        return _encoder.encode(message)
    except UnicodeEncodeError as exc:
        raise UserError(
            f"{where} holds text that is not valid Unicode ({exc.reason}): JSON cannot carry it"
        ) from None


def loads(data: bytes | bytearray | memoryview | str) -> list[Message]:
    """Decode a JSON array of messages. Anything else raises ``DecodeError`` with a JSON path."""
    return _decode(_list_decoder, data)


def loads_message(data: bytes | bytearray | memoryview | str) -> Message:
    """Decode one JSON message object."""
    return _decode(_one_decoder, data)


def _decode(decoder: msgspec.json.Decoder[Any], data: Any) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _PATH.search(text)
        path = match.group(1) if match else "$"
        if match:
            text = text[: match.start()]
        part = _PART.match(text)
        if part:  # a role/part mismatch found by Message.__post_init__: point at the part
            path = f"{path}.parts[{part.group(1)}]"
        raise DecodeError(f"{text} at {path}", path=path) from None
    except msgspec.DecodeError as exc:
        raise DecodeError(f"not valid JSON: {exc} at $", path="$") from None
    except RecursionError:
        raise DecodeError("JSON nested too deeply at $", path="$") from None
    except TypeError as exc:  # not bytes or str at all
        raise DecodeError(f"cannot decode {type(data).__name__}: {exc}", path="$") from None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a message list (committed per version under tests/contract/)."""
    return msgspec.json.schema(list[Message])
