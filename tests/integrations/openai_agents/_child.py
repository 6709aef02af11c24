"""A process that runs one SDK turn into a TetherSession on a SQLite file, prints "done" once
``Runner.run`` returned, then waits to be killed (run as a script, never collected).

_child.py DB SESSION_ID
"""

from __future__ import annotations

import asyncio
import sys
import time

from agents import set_tracing_disabled
from scripted import Scripted, run, two_turns  # the script's folder is on sys.path

from tether.integrations.openai_agents import TetherSession
from tether.stores import SQLiteStore


async def main(path: str, session_id: str) -> None:
    set_tracing_disabled(True)
    store = SQLiteStore(path)
    session = TetherSession(session_id, store, owner="alice")
    result = await run(session, Scripted(two_turns()[:2]), "Weather in Paris?")
    print("done", result.final_output, flush=True)
    time.sleep(600)  # killed here: the store is never closed


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
