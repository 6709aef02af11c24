"""What the current task is part of: a traced run, a continued HTTP trace. Plain context
variables (no OpenTelemetry import), read by the store hooks and the boundary-pass recorders."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tether.stores import Store

__all__ = ["ActiveRun", "LinkSink", "active_link", "active_run", "traced_store"]

Attributes = Mapping[str, "str | int | float | bool | tuple[str, ...]"]


class ActiveRun(Protocol):
    """The traced run of the current task (``RunTrace``)."""

    def store(self, store: Store) -> Store:
        """``store`` with every call traced as a client span of this run."""
        ...

    def history_event(self, name: str, attributes: Attributes) -> None:
        """A boundary pass over the history (an event on the run span)."""
        ...


class LinkSink(Protocol):
    """The trace link of ``continue_trace`` a run started inside reports to."""

    def run_started(self, trace_id: str, span_id: str) -> None: ...

    def add_event(self, name: str, attributes: Attributes) -> None:
        """A boundary pass recorded before the run began (kept for the next run span)."""
        ...

    def take_events(self) -> list[tuple[str, Attributes, int]]:
        """Boundary passes recorded before the run began: (name, attributes, time in ns)."""
        ...


_run: ContextVar[ActiveRun | None] = ContextVar("tether_active_run", default=None)
_link: ContextVar[LinkSink | None] = ContextVar("tether_trace_link", default=None)


def active_run() -> ContextVar[ActiveRun | None]:
    return _run


def active_link() -> ContextVar[LinkSink | None]:
    return _link


def traced_store(store: Store) -> Store:
    """``store`` as the current task should use it: wrapped so that every call is a client span
    of the traced run it belongs to, or ``store`` itself outside a traced run (one context
    variable read)."""
    run = _run.get()
    return store if run is None else run.store(store)
