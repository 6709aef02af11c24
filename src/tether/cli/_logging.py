"""Where the command line's log goes: tether's drivers log what a request could not carry (a
WARNING per loss on ``tether.models``). In a chat that must never land in the transcript: it is
kept for ``/report`` and shown on stderr only with ``-v``."""

from __future__ import annotations

import logging
import sys
from collections import deque

__all__ = ["RecentLog", "configure_logging"]


class RecentLog(logging.Handler):
    """Keeps the last ``size`` records of the ``tether`` loggers."""

    def __init__(self, size: int = 50) -> None:
        super().__init__(logging.INFO)
        self.records: deque[logging.LogRecord] = deque(maxlen=size)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def configure_logging(verbose: bool) -> RecentLog:
    """Route the ``tether`` loggers: always into a ``RecentLog`` (returned); with ``verbose`` also
    to stderr as ``tether: …`` lines. Nothing reaches Python's last-resort handler (which would
    print warnings into the conversation)."""
    logger = logging.getLogger("tether")
    for handler in list(logger.handlers):
        if isinstance(handler, RecentLog) or getattr(handler, "_tether_cli", False):
            logger.removeHandler(handler)
    recent = RecentLog()
    logger.addHandler(recent)
    if verbose:
        stderr = logging.StreamHandler(sys.stderr)
        stderr.setFormatter(logging.Formatter("tether: %(name)s: %(message)s"))
        stderr._tether_cli = True  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
        logger.addHandler(stderr)
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.propagate = False
    return recent
