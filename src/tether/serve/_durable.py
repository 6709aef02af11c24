"""Service runs as DBOS workflows: a run whose process dies is continued, not closed.

In a durable service (``tether serve``; ``ServeConfig(durable=True)``) each run executes as DBOS
workflows keyed by its run id: ``<run id>`` for the part started by the prompt, ``<run id>/<pause
id>`` for each part resumed by decisions (a paused run ends its workflow and waits in the event
log, which any process answers). A workflow's input is a small JSON document (``RunInputs``:
references, the prompt, the accepted decisions, the client's tool declarations); it records no
DBOS steps. The conversation store holds every completed step of the run (ADR 0015), the event
log its state and events; DBOS holds which workflows must still finish and which process runs
each one.

When a process dies (SIGKILL, a lost host) or stops before its runs end (SIGTERM after the
drain), a live process that notices (``RunManager.recover``: the pid is gone on this host, or the
heartbeat is stale, or the process unregistered) asks DBOS to recover that executor's workflows.
DBOS puts each one back on its queue once, exactly one live process takes it and runs the body,
which takes the run over in the event log (a compare-and-set on the dead holder that appends
``run.recovered``) and continues it from the store.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import msgspec
from dbos import DBOS, SetWorkflowID

from tether.agent import DeferredResults, Tool
from tether.agent.durable import launch, recover, shutdown
from tether.errors import StoreError, UserError

from ._client_tools import FrontendTool
from ._config import ServeConfig
from ._pause import decisions_for, decode_pause
from ._schemas import DecisionsIn

__all__ = ["WORKFLOW_NAME", "DurableRuns", "RunHost", "RunInputs", "client_tools", "engine_for"]

WORKFLOW_NAME = "tether.serve_run"
MAX_EXECUTIONS = 10
"""Executions of one run part before DBOS gives up on it (a run that took its process down nine
times is a poison pill: the next process closes it as interrupted instead of dying with it)."""
HOST_WAIT = 60.0
"""Seconds a workflow dequeued before this process's run manager is ready waits for it."""


class ClientTool(msgspec.Struct, frozen=True):
    """A client's tool declaration, as the run that continues needs it again."""

    name: str
    description: str
    parameters: dict[str, Any]


class RunInputs(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a run's workflow is started with: enough to run it again on another process."""

    run_id: str
    owner: str
    conversation_id: str
    prompt: str | None = None
    segment: str = ""
    """``""``: the part started by the prompt; else the pause id whose decisions it carries."""
    pause: str | None = None
    """The stored pause (JSON, tokens included) the decisions answer."""
    decisions: str | None = None
    """The accepted decisions (``DecisionsIn`` JSON)."""
    context: dict[str, str] = {}
    """The starting request's trace context (``traceparent``/``tracestate``)."""
    client_tools: list[ClientTool] = []

    @property
    def workflow_id(self) -> str:
        return self.run_id if not self.segment else f"{self.run_id}/{self.segment}"

    def deferred(self) -> DeferredResults | None:
        """The decisions as the run takes them (the tokens come from the stored pause)."""
        if self.pause is None or self.decisions is None:
            return None
        body = msgspec.json.decode(self.decisions, type=DecisionsIn)
        return decisions_for(decode_pause(self.pause.encode()), body)[0]

    def tools(self) -> list[Tool[Any]]:
        return [FrontendTool(t.name, t.description, t.parameters) for t in self.client_tools]


def client_tools(tools: Collection[Tool[Any]]) -> list[ClientTool]:
    """The declarations of a request's client tools (all ``FrontendTool``s)."""
    return [ClientTool(t.definition.name, t.definition.description, t.definition.parameters) for t in tools]


class RunHost(Protocol):
    """What the workflow needs of the process's run manager."""

    async def run_segment(self, inputs: RunInputs) -> str: ...


_hosts: list[RunHost] = []


async def _host() -> RunHost:
    waited = 0.0
    while not _hosts:
        if waited >= HOST_WAIT:
            raise LookupError("no tether service runs in this process")
        await asyncio.sleep(0.1)
        waited += 0.1
    return _hosts[0]


@DBOS.workflow(name=WORKFLOW_NAME, max_recovery_attempts=MAX_EXECUTIONS)
async def serve_run(inputs: str) -> str:
    """Run (or continue) one part of a service run; returns how it ended here."""
    host = await _host()
    return await host.run_segment(msgspec.json.decode(inputs, type=RunInputs))


class DurableRuns:
    """The engine under one service process's runs (one per process: DBOS is process-wide)."""

    def __init__(self, system_database_url: str, *, schema: str | None = None) -> None:
        self.url = system_database_url
        self.schema = schema
        self._launched = False

    def launch(self, host: RunHost, executor_id: str) -> None:
        """Start DBOS in this process as executor ``executor_id`` (the service process id)."""
        if _hosts:
            raise UserError("one durable tether service per process (DBOS is process-wide)")
        _hosts.append(host)
        try:
            launch(self.url, app="tether-serve", executor_id=executor_id, schema=self.schema)
        except Exception as exc:
            _hosts.clear()
            shown = re.sub(r"//[^@/]*@", "//", self.url)  # no password in the message
            raise StoreError(
                f"durable runs: DBOS could not start on {shown}: {exc} (or run with --no-durable)"
            ) from exc
        self._launched = True

    async def start(self, inputs: RunInputs) -> None:
        """Start the workflow of ``inputs`` (it runs in this process, on this event loop)."""
        with SetWorkflowID(inputs.workflow_id):
            await DBOS.start_workflow_async(serve_run, msgspec.json.encode(inputs).decode())

    async def recover(self, executor_ids: Collection[str]) -> set[str]:
        """Hand the unfinished workflows of dead executors to the live processes (idempotent:
        a workflow another process already took is not handed twice); returns their run ids."""
        if not executor_ids:
            return set()
        ids = await asyncio.to_thread(recover, sorted(executor_ids))
        return {wid.partition("/")[0] for wid in ids}

    async def unfinished(self, run_id: str) -> bool:
        """Whether a workflow of ``run_id`` is still to finish (so a live process will continue it)."""
        found = await DBOS.list_workflows_async(
            workflow_id_prefix=run_id,
            status=["PENDING", "ENQUEUED"],
            load_input=False,
            load_output=False,
        )
        return any(w.workflow_id == run_id or w.workflow_id.startswith(run_id + "/") for w in found)

    def shutdown(self) -> None:
        """Stop DBOS here; workflows still going stay pending and are continued elsewhere."""
        if self._launched:
            self._launched = False
            shutdown()
        _hosts.clear()


def _postgres_url(dsn: str) -> str:
    if dsn.startswith(("postgresql://", "postgres://")):
        return "postgresql://" + dsn.split("://", 1)[1]
    from psycopg.conninfo import conninfo_to_dict  # the postgres extra, present with a DSN

    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user = quote(parts.pop("user", ""), safe="")
    password = parts.pop("password", None)
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = parts.pop("host", "localhost")
    port = parts.pop("port", "5432")
    name = parts.pop("dbname", "")
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in parts.items())
    return f"postgresql://{auth}{host}:{port}/{name}" + (f"?{query}" if query else "")


def engine_for(config: ServeConfig) -> DurableRuns | None:
    """The engine a configuration asks for (``None`` when ``durable`` is off). DBOS's tables
    live beside the service's: ``<db>.dbos`` next to a SQLite file; the schema
    ``<postgres_schema>_dbos`` (``tether_dbos``) of the same PostgreSQL database."""
    if not config.durable:
        return None
    if config.db is not None:
        return DurableRuns(f"sqlite:///{Path(config.db).resolve()}.dbos")
    assert config.postgres is not None
    schema = f"{config.postgres_schema}_dbos" if config.postgres_schema else "tether_dbos"
    return DurableRuns(_postgres_url(config.postgres), schema=schema)
