"""Small JSON-shape readers shared by the peer formats: each failure names its JSON path."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, cast

from tether.errors import DecodeError

__all__ = ["b64decode", "fail", "obj", "opt_obj", "opt_str", "seq", "string"]


def fail(what: str, path: str) -> DecodeError:
    """A ``DecodeError`` whose message ends with the path it carries."""
    return DecodeError(f"{what} at {path}", path=path)


def obj(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(f"expected a JSON object, got {type(value).__name__}", path)
    return cast(Mapping[str, Any], value)


def opt_obj(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object, else an empty one (for optional metadata fields)."""
    return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else {}


def seq(value: object, path: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise fail(f"expected a JSON array, got {type(value).__name__}", path)
    return list(cast(Sequence[Any], value))


def string(data: Mapping[str, Any], key: str, path: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        got = "missing" if value is None else type(value).__name__
        raise fail(f"{key!r} must be a string ({got})", f"{path}.{key}")
    return value


def opt_str(data: Mapping[str, Any], key: str, path: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise fail(f"{key!r} must be a string, got {type(value).__name__}", f"{path}.{key}")
    return value


def b64decode(text: str, path: str) -> bytes:
    """Standard or URL-safe base64 (pydantic writes the URL-safe alphabet)."""
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text.encode())
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise fail("not valid base64", path) from None
