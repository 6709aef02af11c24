"""A durable run (DBOS) in a process of its own, for ``test_durable.py``: the crash child's model,
tools and stopping store (``crash_child.py``), run as a ``DurableAgent``.

    python durable_child.py STORE SYSDB CID RUN POINT DIR start|recover [EXECUTOR [DEAD]]

``SYSDB`` is DBOS's system database (``sqlite:///<file>`` or ``postgresql://...#<schema>``).
``start`` starts run ``RUN`` and stops at ``POINT`` (``AT <point>``, then waits for SIGKILL).
``recover`` launches DBOS as executor ``EXECUTOR`` (the same one on SQLite: DBOS continues its
unfinished runs at launch; on PostgreSQL another one, which first recovers executor ``DEAD``),
waits for run ``RUN`` and prints its outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from crash_child import OWNER, PROMPT, Planned, _open, _tools  # pyright: ignore[reportPrivateUsage]

from tether import Agent
from tether.agent.durable import DurableAgent, launch, recover, shutdown


async def main(argv: list[str]) -> None:
    spec, sysdb, cid, run_id, point, directory, mode = argv[:7]
    executor = argv[7] if len(argv) > 7 else None
    dead = argv[8] if len(argv) > 8 else None
    first = mode == "start"
    folder = Path(directory)
    agent: Agent[None, str] = Agent(Planned(point, folder, first), tools=_tools(point, folder, first))
    durable = DurableAgent(agent, name="trip", store=lambda: _open(spec, point, first))
    url, _, schema = sysdb.partition("#")
    launch(url, executor_id=executor, schema=schema or None)
    try:
        if first:
            outcome = await durable.run(PROMPT, owner=OWNER, conversation_id=cid, run_id=run_id)
        else:
            if dead is not None:
                recover([dead])
            outcome = await durable.attach(run_id).result()
        print(
            "OUTCOME "
            + json.dumps(
                {
                    "status": outcome.status,
                    "output": outcome.output,
                    "requests": outcome.requests,
                    "continued_from": outcome.continued_from,
                }
            ),
            flush=True,
        )
    finally:
        shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
