"""Format names for ``--from``/``--to``/``--format``: the ``tether.convert.FORMATS`` table."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from tether.cli._common import fail
from tether.convert import FORMATS, Format
from tether.errors import TetherError
from tether.messages import Message
from tether.models.wire import ConversionReport

__all__ = ["export_messages", "format_names", "import_messages"]


def format_names() -> list[str]:
    """Every format ``tether.convert`` offers (``tether`` first)."""
    return list(FORMATS)


def _format(name: str) -> Format:
    found = FORMATS.get(name.strip().lower().replace("-", "_"))
    if found is None:
        fail(f"unknown format {name!r}; choose one of: {', '.join(FORMATS)}")
    return found


def import_messages(data: bytes, fmt: str, *, name: str) -> tuple[list[Message], ConversionReport]:
    """Decode ``data`` in format ``fmt``; a malformed transcript (not JSON, too deep, invalid
    Unicode, wrong shape) names the file and the JSON path."""
    found = _format(fmt)
    try:
        messages, report = found.load(data)  # the format parses and checks the text itself
    except TetherError as exc:
        kind = "tether history" if found.name == "tether" else f"valid {found.name} transcript"
        fail(f"{name} is not a {kind}: {exc}", cause=exc)
    return list(messages), report


def export_messages(messages: Sequence[Message], fmt: str) -> tuple[bytes, ConversionReport]:
    """Encode ``messages`` in format ``fmt`` as indented JSON, with the loss report."""
    data, report = _format(fmt).dump(list(messages))
    return msgspec.json.format(msgspec.json.encode(data), indent=2), report
