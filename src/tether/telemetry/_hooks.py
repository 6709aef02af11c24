"""The agent layer's entry: the trace of a run about to start, or ``None`` (telemetry off)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._settings import Telemetry, default_telemetry

if TYPE_CHECKING:
    from ._run_trace import RunTrace

__all__ = ["run_trace"]


def run_trace(telemetry: Telemetry | None, agent_name: str) -> RunTrace | None:
    """The trace of a run about to start, or ``None`` when telemetry is off (the usual case,
    decided once per run: see ``Telemetry.instruments``)."""
    instruments = (telemetry if telemetry is not None else default_telemetry()).instruments()
    if instruments is None:
        return None
    from ._run_trace import RunTrace  # loaded with the API, only once telemetry is on

    return RunTrace(instruments, agent_name)
