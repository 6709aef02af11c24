"""The one gate every ``from_<format>`` input passes: JSON text is parsed, and parsed JSON (from
the caller or from the text) is checked before any decoder walks it.

Two things would otherwise escape as bare built-in exceptions deep inside a decoder or encoder:

- a ``str`` holding a lone surrogate (what ``json.loads`` makes of a client's ``"\\ud800"``):
  no UTF-8 encoder takes it (``UnicodeEncodeError`` when a call's arguments, an id or a text are
  encoded, hashed or exported);
- nesting deeper than the recursive code after it can follow (``RecursionError`` in the JSON
  codec, in copies, in argument parsing).

A number JSON text cannot carry either: ``inf``/``nan`` (JSON has no form for them; an encoder
writes ``null`` or invalid JSON) and an integer of more than 4,275 digits (no decoder reads it
back, and Python refuses to print it: ``ValueError`` in any message naming it).

All raise :class:`~tether.DecodeError` here, naming the JSON path (``$[2].content[0].text``).
The walk is iterative, so no input is too deep to be checked.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final, cast

import msgspec

from tether.errors import DecodeError
from tether.models.wire import fail

__all__ = ["MAX_DEPTH", "check_json", "check_text", "explain_text", "load_json"]

MAX_DEPTH: Final = 200
"""How many arrays and objects may nest in a converted document. Provider transcripts use about
ten levels (tool arguments add their own); anything deeper is refused, not recursed into."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
MAX_INT_BITS: Final = 14_200
"""The widest integer taken from parsed JSON: 2**14200 has 4,275 digits, under Python's 4,300
(``str(n)`` fails past it) and every JSON decoder tether uses."""

_Node = tuple["_Node | None", object]  # (parent, key): a path built only when it is reported


def _path(node: _Node | None) -> str:
    keys: list[object] = []
    while node is not None:
        node, key = node
        keys.append(key)
    out = ["$"]
    for key in reversed(keys):
        if isinstance(key, int):
            out.append(f"[{key}]")
        elif isinstance(key, str) and _IDENTIFIER.match(key):
            out.append(f".{key}")
        else:
            out.append(f"[{key!a}]")
    return "".join(out)


def _surrogate_at(text: str) -> int | None:
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def _unicode_error(text: str, at: int, where: str, path: str) -> DecodeError:
    code = f"U+{ord(text[at]):04X}"
    return fail(f"{where} holds a lone surrogate ({code} at character {at}): not valid Unicode", path)


def check_text(text: str) -> None:
    """``DecodeError`` at ``$`` when JSON text holds a lone surrogate (no UTF-8 parser takes it)."""
    at = _surrogate_at(text)
    if at is not None:
        raise _unicode_error(text, at, "the JSON text", "$")


def _walked(value: object) -> bool:
    """Strings (``str`` subclasses too) are checked, arrays and objects walked, numbers checked
    (:func:`_number_problem`); other values need nothing."""
    return isinstance(value, str | Mapping | list | tuple | int | float)


def _number_problem(value: int | float) -> str | None:
    """Why JSON cannot carry a number, or ``None`` when it can (``bool`` is JSON ``true``)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the number {value!r} has no JSON form"
    if not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        return f"an integer of {value.bit_length()} bits is more than JSON decoders hold"
    return None


def check_json(value: object) -> None:
    """``DecodeError`` naming the path of the first string (value or object key) holding a lone
    surrogate, of the first number JSON cannot carry, or of the first array/object nested deeper
    than :data:`MAX_DEPTH`."""
    stack: list[tuple[object, int, _Node | None]] = [(value, 0, None)]
    while stack:
        item, depth, node = stack.pop()
        if isinstance(item, str):
            at = _surrogate_at(item)
            if at is not None:
                raise _unicode_error(item, at, "the string", _path(node))
            continue
        if isinstance(item, int | float):
            problem = _number_problem(item)
            if problem is not None:
                raise fail(problem, _path(node))
            continue
        if isinstance(item, Mapping):
            children: list[tuple[object, object]] = []
            for key, child in cast(Mapping[object, object], item).items():
                if isinstance(key, str) and (at := _surrogate_at(key)) is not None:
                    raise _unicode_error(key, at, "the object key", _path((node, key)))
                children.append((key, child))
        elif isinstance(item, list | tuple):
            children = list(enumerate(cast(list[object], item)))
        else:
            continue
        if depth >= MAX_DEPTH:
            path = _path(node)
            shown = path if len(path) <= 80 else f"{path[:40]}…{path[-30:]}"
            raise DecodeError(f"nested deeper than {MAX_DEPTH} arrays and objects at {shown}", path=path)
        for key, child in reversed(children):
            if _walked(child):
                stack.append((child, depth + 1, (node, key)))


def load_json(data: object) -> Any:
    """JSON text (``str``/``bytes``) parsed, or already-parsed JSON as it is; either way checked
    (:func:`check_json`). Anything malformed raises ``DecodeError``."""
    if isinstance(data, str):
        check_text(data)
    if isinstance(data, str | bytes | bytearray):
        try:
            data = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            explain_text(data)  # a lone surrogate escape ("\ud800") gets its JSON path
            raise fail(f"not JSON: {exc}", "$") from None
        except RecursionError:
            raise fail(f"not readable JSON: nested deeper than {MAX_DEPTH} arrays and objects", "$") from None
    check_json(data)
    return data


def explain_text(text: str | bytes | bytearray) -> None:
    """JSON text the strict parser refused may still be JSON that Python's parser reads, holding a
    lone surrogate escape: then :func:`check_json` names where it is. Otherwise nothing."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return
    check_json(value)
