"""``RunStream``: a run as an async context manager and async iterator of events."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

from tether.errors import RunError, UserError

from ._result import Event, Result, RunCompleted

__all__ = ["RunStream"]

Output = TypeVar("Output")
_DONE: Any = object()


class RunStream(Generic[Output]):
    """Events of one run, each stamped with its run and conversation ids, ending with
    ``RunCompleted`` carrying the same ``Result`` that ``run`` returns.

    Use ``async with agent.run_stream(...) as stream: async for event in stream: ...``. Leaving
    the block early cancels the run. A failed run raises its ``RunError`` from the iteration.
    """

    def __init__(self, start: Callable[[Callable[[Event], None]], Awaitable[Result[Output]]]) -> None:
        self._start = start
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[Result[Output]] | None = None
        self._result: Result[Output] | None = None
        self._consumed = False

    def _ensure_started(self) -> asyncio.Task[Result[Output]]:
        if self._task is None:
            self._task = asyncio.ensure_future(self._start(self._queue.put_nowait))
            self._task.add_done_callback(lambda _: self._queue.put_nowait(_DONE))
        return self._task

    async def __aenter__(self) -> RunStream[Output]:
        self._ensure_started()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        task = self._task
        if task is None:
            return
        if not task.done():
            task.cancel()
        with contextlib.suppress(RunError, asyncio.CancelledError):
            await task  # retrieves the outcome, so an unread failure is never "never retrieved"

    def __aiter__(self) -> AsyncGenerator[Event, None]:
        return self._events()

    async def _events(self) -> AsyncGenerator[Event, None]:
        if self._consumed:
            raise UserError("a RunStream can be iterated once")
        self._consumed = True
        task = self._ensure_started()
        try:
            while True:
                item = await self._queue.get()
                if item is _DONE:
                    break
                yield cast(Event, item)
        finally:
            if not task.done():  # the consumer stopped early: a client disconnect
                task.cancel()
        result = task.result()  # raises the run's RunError
        self._result = result
        yield RunCompleted(result.run_id, result.conversation_id, result)

    @property
    def result(self) -> Result[Output]:
        """The run's result, once the stream was iterated to its end."""
        if self._result is None:
            raise UserError("the stream has not finished; iterate it to the end first")
        return self._result

    async def get_result(self) -> Result[Output]:
        """Drain the remaining events and return the result."""
        if self._result is None:
            if not self._consumed:
                async for _ in self:
                    pass
            else:
                self._result = await self._ensure_started()
        assert self._result is not None
        return self._result
