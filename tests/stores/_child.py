"""Child processes for the multi-process SQLite tests (run as a script, never collected).

_child.py crash  DB SEED          append batches to 3 conversations forever (until SIGKILL), printing
                                  "ready" once open and each batch's tag once its append returned
_child.py writer DB CID K N       append N messages "K:i" one by one with expected_version + retry
_child.py claim  DB N START       wait for "go" on stdin, claim the digests of tokens 0..N-1 from
                                  START on (wrapping), print the index of each claim this process
                                  won, then "done"
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import sys

from tether import ConflictError, assistant, user
from tether.stores import SQLiteStore

OWNER = "owner"
CONVERSATIONS = ("c0", "c1", "c2")


async def crash(path: str, seed: int) -> None:
    """Each batch is ``size`` messages tagged ``B<seed>.<n>:<i>/<size>``; print "ready" once
    open, then ``B<seed>.<n>`` after each committed batch."""
    rng = random.Random(seed)
    async with SQLiteStore(path) as store:
        for cid in CONVERSATIONS:
            await store.create(OWNER, cid, exist_ok=True)
        print("ready", flush=True)
        n = 0
        while True:
            n += 1
            size = rng.randint(1, 6)
            tag = f"B{seed}.{n}"
            batch = [
                (user if i % 2 == 0 else assistant)(f"{tag}:{i}/{size} " + "x" * rng.randint(0, 3000))
                for i in range(size)
            ]
            await store.append(OWNER, rng.choice(CONVERSATIONS), batch)
            print(tag, flush=True)


async def writer(path: str, cid: str, k: int, n: int) -> None:
    conflicts = 0
    async with SQLiteStore(path) as store:
        version = 0
        for i in range(n):
            while True:
                try:
                    version = await store.append(OWNER, cid, [user(f"{k}:{i}")], expected_version=version)
                    break
                except ConflictError as exc:
                    conflicts += 1
                    version = exc.actual
    print(f"conflicts {conflicts}", flush=True)


def digest(i: int) -> str:
    return hashlib.sha256(f"token-{i}".encode()).hexdigest()


async def claim(path: str, n: int, start: int) -> None:
    async with SQLiteStore(path) as store:
        print("ready", flush=True)
        sys.stdin.readline()  # all processes start claiming together
        for j in range(n):
            i = (start + j) % n
            if await store.claim_token(digest(i), 4_000_000_000.0):
                print(i, flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    mode, db, *rest = sys.argv[1:]
    if mode == "claim":
        asyncio.run(claim(db, int(rest[0]), int(rest[1])))
    elif mode == "crash":
        asyncio.run(crash(db, int(rest[0])))
    else:
        asyncio.run(writer(db, rest[0], int(rest[1]), int(rest[2])))
