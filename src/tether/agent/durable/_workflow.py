"""The one DBOS workflow of tether: run (or continue) one run of a registered durable agent.

The workflow's inputs are references (agent name, owner, conversation id, run id) and the prompt;
its output is a small outcome (status, conversation id, output, counts). It records no DBOS steps:
the conversation store holds every completed step of the run (ADR 0015), so an execution that
DBOS recovers after a crash re-opens the conversation and continues from its last stored step
instead of replaying recorded step outputs. DBOS holds which runs must still finish, who runs
them (one executor at a time) and their outcomes; the store holds the messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from dbos import DBOS

__all__ = ["WORKFLOW_NAME", "DurableHost", "durable_run", "register", "registered"]

WORKFLOW_NAME = "tether.durable_run"
REGISTRY_WAIT = 60.0
"""Seconds a recovered run waits for its agent to be registered (agents are created before
``DBOS.launch()``; a recovery that starts first waits for them instead of failing the run)."""


class DurableHost(Protocol):
    """What the workflow needs of a durable agent."""

    name: str

    def execute(
        self, owner: str, conversation_id: str, run_id: str, prompt: str | None
    ) -> Awaitable[dict[str, Any]]: ...


_agents: dict[str, DurableHost] = {}


def register(host: DurableHost) -> None:
    _agents[host.name] = host


def registered(name: str) -> DurableHost | None:
    return _agents.get(name)


async def _lookup(name: str, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> DurableHost:
    waited = 0.0
    while (host := _agents.get(name)) is None:
        if waited >= REGISTRY_WAIT:
            raise LookupError(f"no durable agent named {name!r} is registered in this process")
        await sleep(0.1)
        waited += 0.1
    return host


@DBOS.workflow(name=WORKFLOW_NAME)
async def durable_run(
    agent: str, owner: str, conversation_id: str, run_id: str, prompt: str | None
) -> dict[str, Any]:
    """Run ``run_id`` of the durable agent ``agent`` to its end (or its pause)."""
    host = await _lookup(agent)
    return await host.execute(owner, conversation_id, run_id, prompt)
