"""Readers for JSON-shaped input (wire transcripts, response bodies, peer formats), each failure a
``DecodeError`` whose ``path`` points at the offending element (``$[3].content[0].text``), and
:func:`given` for building objects whose optional fields are left out when unset."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, cast

from tether.errors import DecodeError

__all__ = [
    "MAX_TOKENS",
    "b64decode",
    "b64decode_either",
    "fail",
    "given",
    "obj",
    "opt_obj",
    "opt_str",
    "seq",
    "string",
    "token_count",
]

MAX_TOKENS = (1 << 63) - 1
"""The largest token count kept from foreign data: a signed 64-bit integer."""


def fail(what: str, path: str) -> DecodeError:
    """A ``DecodeError`` whose message ends with the path it carries."""
    return DecodeError(f"{what} at {path}", path=path)


def obj(value: object, path: str) -> Mapping[str, Any]:
    """``value`` as a JSON object, or ``DecodeError`` at ``path``."""
    if not isinstance(value, Mapping):
        raise fail(f"expected a JSON object, got {type(value).__name__}", path)
    return cast(Mapping[str, Any], value)


def opt_obj(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one (for optional metadata fields)."""
    return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else {}


def seq(value: object, path: str) -> list[Any]:
    """``value`` as a JSON array (a list is returned as is, a tuple copied), or ``DecodeError``."""
    if isinstance(value, list):
        return cast(list[Any], value)
    if isinstance(value, tuple):
        return list(cast(Sequence[Any], value))
    raise fail(f"expected a JSON array, got {type(value).__name__}", path)


def string(data: Mapping[str, Any], key: str, path: str) -> str:
    """The string at ``data[key]``; missing or another type fails at ``path.key``."""
    value = data.get(key)
    if not isinstance(value, str):
        got = "missing" if value is None else type(value).__name__
        raise fail(f"{key!r} must be a string ({got})", f"{path}.{key}")
    return value


def opt_str(data: Mapping[str, Any], key: str, path: str) -> str | None:
    """The string at ``data[key]``, or ``None`` when absent or null; another type fails."""
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(f"{key!r} must be a string, got {type(value).__name__}", f"{path}.{key}")
    return value


def token_count(value: object) -> int:
    """A token count read from foreign data (a provider's usage, an imported transcript): an
    ``int`` from 0 to :data:`MAX_TOKENS`. Anything else — ``true`` (a ``bool`` is an ``int`` to
    Python, never to the contract), a string, a float, a negative or an enormous number — counts
    0: usage is metadata, and a value the contract cannot read back must never reach a
    ``Usage`` (a stored message holding it would be unreadable)."""
    return value if type(value) is int and 0 <= value <= MAX_TOKENS else 0


def b64decode(text: str, path: str) -> bytes:
    """Standard base64 (strict: other characters fail at ``path``)."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise fail("not valid base64", path) from None


def b64decode_either(text: str, path: str) -> bytes:
    """Standard or URL-safe base64 (pydantic writes the URL-safe alphabet)."""
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text.encode())
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise fail("not valid base64", path) from None


def given(**values: object) -> dict[str, Any]:
    """The keyword arguments whose value is not ``None``, in order (fields sent only when set)."""
    return {key: value for key, value in values.items() if value is not None}
