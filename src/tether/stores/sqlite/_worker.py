"""One dedicated thread that runs a store's blocking calls in order, awaited from asyncio.

Cheaper per call than ``loop.run_in_executor`` (measured ~26 µs against ~38 µs per round trip):
no ``concurrent.futures.Future`` to chain, no executor bookkeeping — a queue put, and the result
handed back with ``call_soon_threadsafe``. The thread is a daemon, so a store that is never closed
does not keep the interpreter alive; SQLite rolls back any transaction a dying process left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

__all__ = ["Worker"]

R = TypeVar("R")
Ts = TypeVarTuple("Ts")
_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():  # the caller gave up waiting; the call itself has already run
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class Worker:
    """A thread named ``name`` that runs submitted calls one at a time, first in, first out."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[*Ts], R], *args: *Ts) -> asyncio.Future[R]:
        """Run ``fn(*args)`` on the thread; the returned future (of the running loop) gets its
        result or exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._jobs.put((loop, future, fn, args))
        return future

    def stop(self) -> None:
        """Let the thread end after the calls already submitted."""
        self._jobs.put(None)

    def _serve(self) -> None:
        get = self._jobs.get
        while (job := get()) is not None:
            loop, future, fn, args = job
            try:
                value, ok = fn(*args), True
            except BaseException as exc:  # handed to the awaiting task, never lost on this thread
                value, ok = exc, False
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_settle, future, ok, value)
            del job, future, value, args
