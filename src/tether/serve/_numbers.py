"""The one parser of the numbers the service reads outside a JSON body: query parameters and
headers (``limit``, ``offset``, ``after``, ``Last-Event-ID``, ``Content-Length``)."""

from __future__ import annotations

import re

from ._errors import ApiError

__all__ = ["COUNT_PATTERN", "is_count", "parse_count"]

_DIGITS = re.compile(r"[0-9]{1,18}")
COUNT_PATTERN = "^[0-9]{1,18}$"
"""What every numeric query parameter and header accepts (in the OpenAPI document too)."""


def parse_count(raw: str, what: str) -> int:
    """A non-negative integer written in 1-18 ASCII digits, else 400 naming ``what``. Python's
    ``int`` also takes a sign, ``_`` separators, surrounding space and every Unicode digit
    (Arabic-Indic, full-width), and ``str.isdigit`` takes superscripts ``int`` then refuses:
    none of them is a number a client means to send. The one parser of numbers the service
    reads outside a JSON body."""
    if _DIGITS.fullmatch(raw) is None:
        shown = raw[:40]
        raise ApiError(400, f"{what} must be a non-negative integer of 1-18 ASCII digits, not {shown!r}")
    return int(raw)


def is_count(raw: str) -> bool:
    """True when ``raw`` is what ``parse_count`` accepts."""
    return _DIGITS.fullmatch(raw) is not None
