"""The JSON codec of the message contract: ``dumps``/``loads`` and one-message forms."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, cast

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
_SURROGATE = re.compile("[\ud800-\udfff]")
_any_decoder = msgspec.json.Decoder()


class _Shape(msgspec.Struct):
    """Which of ``content`` and ``parts`` a message object names. Their values stay raw and the
    other fields are skipped, exactly as the typed decoder skips fields it does not know: a
    document that decoded once decodes again here (an unknown field holding a number no decoder
    holds, or a key that is not UTF-8, must not fail the second look)."""

    content: msgspec.Raw = msgspec.Raw(b"")  # empty: the field is absent
    parts: msgspec.Raw = msgspec.Raw(b"")


_shape_list_decoder = msgspec.json.Decoder(list[_Shape])
_shape_one_decoder = msgspec.json.Decoder(_Shape)


def dumps(messages: Iterable[Message]) -> bytes:
    """Encode messages as the tether JSON contract (a JSON array).

    A string that is not valid Unicode (a lone surrogate, which JSON text cannot carry) in any
    field raises ``UserError`` naming the message index and the field's JSON path."""
    if not isinstance(messages, list | tuple):
        messages = list(messages)
    try:
        return _encoder.encode(messages)
    except (UnicodeEncodeError, TypeError, ValueError):
        for index, message in enumerate(messages):
            _encode_one(message, f"message {index}", f"$[{index}]")
        raise


def dumps_message(message: Message) -> bytes:
    """Encode one message as a JSON object (errors as for ``dumps``)."""
    return _encode_one(message, "the message", "$")


def _encode_one(message: Message, where: str, root: str) -> bytes:
    try:
        return _encoder.encode(message)
    except UnicodeEncodeError as exc:
        path = _unencodable(msgspec.to_builtins(message), root) or root
        raise UserError(
            f"{where} holds text that is not valid Unicode ({exc.reason}) at {path}: JSON cannot carry it"
        ) from None
    except (TypeError, ValueError) as exc:  # a field holding something that is not JSON at all
        raise UserError(f"{where} cannot be encoded: {exc}") from None


def _unencodable(value: object, path: str) -> str | None:
    """The JSON path of the first string under ``value`` that UTF-8 cannot encode."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return path
        return None
    if isinstance(value, dict):
        for key, item in cast("dict[str, object]", value).items():
            found = _unencodable(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(cast("list[object]", value)):
            found = _unencodable(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def loads(data: bytes | bytearray | memoryview | str) -> list[Message]:
    """Decode a JSON array of messages. Anything else raises ``DecodeError`` with a JSON path.

    A message written in another format's shape (``"content"`` where the contract has
    ``"parts"``) is refused rather than read as a message with no parts (ADR 0001)."""
    messages: list[Message] = _decode(_list_decoder, data)
    empty = [i for i, message in enumerate(messages) if not message.parts]
    if empty:  # rare: only then look at the document again (once)
        shapes: list[_Shape] = _decode(_shape_list_decoder, data)
        for index in empty:
            _refuse_content(shapes[index], f"message {index}", f"$[{index}]")
    return messages


def loads_message(data: bytes | bytearray | memoryview | str) -> Message:
    """Decode one JSON message object (refusing ``"content"`` as ``loads`` does)."""
    message: Message = _decode(_one_decoder, data)
    if not message.parts:
        _refuse_content(_decode(_shape_one_decoder, data), "the message", "$")
    return message


def _refuse_content(item: _Shape, where: str, path: str) -> None:
    """Raise ``DecodeError`` when a decoded message object has no ``parts`` but a ``content``
    field: the contract never names a field ``content``, so it is another format's message whose
    content would otherwise be dropped in silence."""
    if item.content and not item.parts:
        raise DecodeError(
            f'{where} has "content" where the tether contract has "parts" (another format\'s '
            f"message? tether.convert reads OpenAI, Anthropic, Gemini and peer formats) at {path}.content",
            path=f"{path}.content",
        )


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
    except UnicodeEncodeError as exc:  # a str holding a lone surrogate: not valid Unicode text
        text = cast(str, data)
        path = _surrogate_path(text)
        raise DecodeError(
            f"text holds a lone surrogate (U+{ord(text[exc.start]):04X} at character {exc.start}), "
            f"which is not valid Unicode, at {path}",
            path=path,
        ) from None
    except RecursionError:
        raise DecodeError("JSON nested too deeply at $", path="$") from None
    except TypeError as exc:  # not bytes or str at all
        raise DecodeError(f"cannot decode {type(data).__name__}: {exc}", path="$") from None


def _surrogate_path(text: str) -> str:
    """The JSON path of the first string of ``text`` holding a lone surrogate (``$`` when the
    surrogate is not inside a string of an otherwise valid JSON document)."""
    sentinel = next((chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text), None)
    if sentinel is None:  # every private-use character is taken: say only that it is there
        return "$"
    try:
        value = _any_decoder.decode(_SURROGATE.sub(sentinel, text))
    except (msgspec.DecodeError, RecursionError):
        return "$"
    return _holding(value, sentinel, "$") or "$"


def _holding(value: object, sentinel: str, path: str) -> str | None:
    if isinstance(value, str):
        return path if sentinel in value else None
    if isinstance(value, dict):
        for key, item in cast("dict[str, object]", value).items():
            if sentinel in key:
                return path  # an object key: the path names the object
            found = _holding(item, sentinel, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(cast("list[object]", value)):
            found = _holding(item, sentinel, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a message list (committed per version under tests/contract/)."""
    return msgspec.json.schema(list[Message])
