"""What a driver's requests could not carry: the latest request's report and the once-per-loss
WARNING on the ``tether.models`` logger (ADR 0005)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tether.messages import Message
from tether.models.wire._common import ConversionReport
from tether.models.wire._memo import MessageTable

__all__ = ["RequestReports"]

_log = logging.getLogger("tether.models")


class RequestReports:
    """The latest request's :class:`~tether.models.wire.ConversionReport`, and one WARNING on the
    ``tether.models`` logger per (message, part, what), so the steps of a run, which resend the
    same history, do not repeat a loss already told. Messages are tracked by identity and
    forgotten with them. Nothing is printed: the logger's handlers decide where warnings go."""

    def __init__(self) -> None:
        self.last: ConversionReport | None = None
        self._logged: MessageTable[set[tuple[int | None, str]]] = MessageTable()

    def record(self, driver: str, messages: Sequence[Message], report: ConversionReport) -> None:
        """Keep ``report`` as the latest and log the losses not logged before."""
        self.last = report
        for loss in report.losses:
            if not 0 <= loss.message < len(messages):  # pragma: no cover - encoders index messages
                continue
            message = messages[loss.message]
            told = self._logged.get_for(message)
            if told is None:
                told = set[tuple[int | None, str]]()
                self._logged.put(message, told)
            key = (loss.part, loss.what)
            if key in told:
                continue
            told.add(key)
            where = "" if loss.part is None else f" part {loss.part}"
            _log.warning(
                "%s request %s message %d%s %s: %s",
                driver,
                loss.kind,
                loss.message,
                where,
                loss.what,
                loss.reason,
            )
