"""Format names for ``--from``/``--to``/``--format``: ``tether`` plus every ``tether.convert`` format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import msgspec

from tether import convert
from tether.cli._common import dump_history, fail
from tether.errors import TetherError
from tether.messages import Message, loads
from tether.models.wire import ConversionReport

__all__ = ["export_messages", "format_names", "import_messages"]

TETHER = "tether"


def format_names() -> list[str]:
    """``tether`` and the names of the formats ``tether.convert`` offers."""
    names = {
        name.removeprefix("from_")
        for name in dir(convert)
        if name.startswith("from_") and hasattr(convert, "to_" + name.removeprefix("from_"))
    }
    return [TETHER, *sorted(names)]


def _function(prefix: str, fmt: str) -> Callable[[Any], tuple[Any, ConversionReport]]:
    key = fmt.strip().lower().replace("-", "_")
    if key == TETHER or key not in format_names():
        fail(f"unknown format {fmt!r}; choose one of: {', '.join(format_names())}")
    return cast(Callable[[Any], tuple[Any, ConversionReport]], getattr(convert, f"{prefix}_{key}"))


def import_messages(data: bytes, fmt: str, *, name: str) -> tuple[list[Message], ConversionReport | None]:
    """Decode ``data`` in format ``fmt``; a malformed transcript names the file and the JSON path."""
    if fmt.strip().lower() == TETHER:
        try:
            return loads(data), None
        except TetherError as exc:
            fail(f"{name} is not a tether history: {exc}")
    function = _function("from", fmt)
    try:
        parsed = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        fail(f"{name} is not JSON: {exc}")
    try:
        messages, report = function(parsed)
    except TetherError as exc:
        fail(f"{name} is not a valid {fmt} transcript: {exc}")
    return list(messages), report


def export_messages(messages: Sequence[Message], fmt: str) -> tuple[bytes, ConversionReport | None]:
    """Encode ``messages`` in format ``fmt`` as JSON bytes, with the loss report."""
    if fmt.strip().lower() == TETHER:
        return dump_history(messages), None
    function = _function("to", fmt)
    data, report = function(list(messages))
    return msgspec.json.format(msgspec.json.encode(data), indent=2), report
