"""The telemetry of a run while telemetry is off: ``NO_TRACE`` has every hook a run calls on its
``RunTrace`` (``tether.telemetry``) and does nothing in them, so the run calls its hooks
unconditionally (a model request is just awaited, no span is made)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:
    from tether.models import ModelResponse
    from tether.telemetry import RunTrace

__all__ = ["NO_TRACE", "NoTrace", "Trace"]

R = TypeVar("R")


class NoToolTrace:
    """The tool hooks of ``NoTrace``: each does nothing."""

    __slots__ = ()

    def batch(self, run: object, decided: object) -> None:
        pass

    def started(self, run: object, call: object, tool: object) -> None:
        pass

    def ledger_unknown(self, call: object) -> None:
        pass

    def ran(self, run: object, jobs: object) -> None:
        pass

    def answered(self, run: object, turn: object, results: object) -> None:
        pass

    def pending(self, run: object, turn: object, deferred: object) -> None:
        pass


class NoTrace:
    """A run's telemetry while telemetry is off: the run and its requests are awaited as they
    are; the history and tool hooks do nothing."""

    __slots__ = ()

    tools = NoToolTrace()

    def around(self, run: object, body: Callable[[], Awaitable[R]]) -> Awaitable[R]:
        return body()  # awaited by the caller as it is: no frame of its own

    def chat(self, run: object, request: Callable[[], Awaitable[ModelResponse]]) -> Awaitable[ModelResponse]:
        return request()

    def history_event(self, name: str, attributes: Any) -> None:
        pass

    def history_processed(self, processor: object, given: int, kept: int) -> None:
        pass

    def history_normalized(self, repair: object, messages: int) -> None:
        pass


NO_TRACE = NoTrace()
Trace: TypeAlias = "RunTrace | NoTrace"
"""What a run holds as its telemetry: a ``RunTrace``, or ``NO_TRACE`` while telemetry is off."""
