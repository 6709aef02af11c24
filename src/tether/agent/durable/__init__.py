"""Durable runs on DBOS (``pip install 'tether[durable]'``): runs that outlive their process.

    from tether.agent.durable import DurableAgent, launch

    durable = DurableAgent(agent, name="support", store=lambda: SQLiteStore("chat.db"))
    launch("sqlite:///runs.sqlite")           # recovers this executor's unfinished runs
    outcome = await durable.run("hello", owner="ann")

See docs/durable.md and ADR 0015.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("dbos") is None:  # pragma: no cover - exercised only without the extra
    from tether.errors import MissingExtra

    raise MissingExtra("durable runs", "durable", "dbos")

from tether.agent.durable._agent import (
    DurableAgent,
    DurableOutcome,
    DurableRun,
    RunProgress,
    RunStatus,
    run_progress,
)
from tether.agent.durable._launch import APP_VERSION, launch, recover, shutdown

__all__ = [
    "APP_VERSION",
    "DurableAgent",
    "DurableOutcome",
    "DurableRun",
    "RunProgress",
    "RunStatus",
    "launch",
    "recover",
    "run_progress",
    "shutdown",
]
