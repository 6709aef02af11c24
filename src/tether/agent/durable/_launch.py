"""Starting and stopping DBOS for tether's durable runs, and handing a dead executor's runs on."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Sequence

from dbos import DBOS, DBOSConfig

__all__ = ["APP_VERSION", "launch", "recover", "shutdown"]

APP_VERSION = "tether-durable-1"
"""The DBOS application version of tether's workflow. DBOS recovers a workflow only on
executors of the same version; the workflow's body continues from the store, so one fixed
version lets every tether process continue every other one's runs (bumped when the workflow's
inputs change)."""


def launch(
    system_database_url: str | None = None,
    *,
    app: str = "tether",
    executor_id: str | None = None,
    schema: str | None = None,
    log_level: str = "WARNING",
) -> None:
    """Configure and launch DBOS (once per process, after every ``DurableAgent`` is created).

    ``system_database_url``: ``sqlite:///<file>`` (the default: ``<app>.sqlite`` in the working
    directory; one host) or ``postgresql://...`` (a fleet); ``executor_id``: this process's name
    in a fleet (each process its own; its runs are recovered under it); ``schema``: the
    PostgreSQL schema of DBOS's tables. Launching recovers this executor's unfinished runs."""
    config: DBOSConfig = {"name": app, "application_version": APP_VERSION, "log_level": log_level}
    if executor_id is not None:
        config["executor_id"] = executor_id
    if schema is not None:
        config["dbos_system_schema"] = schema
    url = config["system_database_url"] = system_database_url or f"sqlite:///{app}.sqlite"
    if url.startswith("sqlite:///"):
        _write_ahead(url.removeprefix("sqlite:///"))
    DBOS(config=config)
    DBOS.launch()


def _write_ahead(path: str) -> None:
    """Put DBOS's SQLite file in write-ahead-log mode (kept in the file): DBOS opens it in the
    rollback-journal default, where each workflow's writes cost journal files and fsyncs and a
    reader blocks the writers (bench/durable.py: a service's runs/s 0.28x of --no-durable before, ~1x
    after and on PostgreSQL)."""
    deadline = time.monotonic() + 30
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        while True:  # SQLite answers a mode switch racing another process at once, not after its busy wait
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def recover(executor_ids: Sequence[str]) -> list[str]:
    """Hand the unfinished runs of dead executors to the live ones (PostgreSQL fleets): each run
    is re-enqueued once and exactly one live process continues it. Returns their run ids.
    Call it for an executor known to be dead (its process gone, its heartbeat stale)."""
    handles = DBOS._recover_pending_workflows(list(executor_ids))  # pyright: ignore[reportPrivateUsage]
    return [h.get_workflow_id() for h in handles]


def shutdown(timeout: float = 0) -> None:
    """Stop DBOS in this process; runs still going stay PENDING and are continued elsewhere."""
    DBOS.destroy(workflow_completion_timeout_sec=int(timeout))
