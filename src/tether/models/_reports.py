"""What a driver's requests could not carry and what its responses held that tether cannot keep:
the latest request's and response's reports and the once-per-loss WARNING on the
``tether.models`` logger (ADR 0005)."""

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
    forgotten with them. The latest response's report is kept beside it (:meth:`record_response`).
    Nothing is printed: the logger's handlers decide where warnings go."""

    def __init__(self) -> None:
        self.last: ConversionReport | None = None
        self.last_response: ConversionReport | None = None
        self._logged: MessageTable[set[tuple[int | None, str]]] = MessageTable()
        self._response_logged: set[str] = set()

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

    def record_response(self, driver: str, report: ConversionReport | None) -> None:
        """Keep ``report`` (what a decoded response left out; ``None`` while a request is under
        way) as the latest and log each kind of loss (``what``) the first time this driver meets
        it: every response is new, so telling each one would repeat the same warning every step."""
        self.last_response = report
        if report is None:
            return
        for loss in report.losses:
            if loss.what in self._response_logged:
                continue
            self._response_logged.add(loss.what)
            where = "" if loss.part is None else f" part {loss.part}"
            _log.warning("%s response %s%s %s: %s", driver, loss.kind, where, loss.what, loss.reason)
