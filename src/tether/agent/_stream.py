"""``RunStream``: a run as an async context manager and async iterator of events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

from tether.errors import RunCanceled, UserError

from ._result import Event, Result, RunCompleted

__all__ = ["RunStream"]

Output = TypeVar("Output")
_DONE: Any = object()


async def _await_settled(task: asyncio.Task[Any]) -> bool:
    """Wait until ``task`` is done even if the caller is cancelled meanwhile; True when the
    caller was cancelled (the caller re-raises)."""
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError:
            cancelled = True
    if not task.cancelled():
        task.exception()  # retrieved: the outcome is read through get_result() or the iteration
    return cancelled


def _outcome(task: asyncio.Task[Result[Output]]) -> Result[Output]:
    """The run's result; raises its ``RunError``."""
    if task.cancelled():  # stopped before the run began: nothing ran, nothing to keep
        raise RunCanceled("the run was stopped before it started", stage="history")
    return task.result()


class RunStream(Generic[Output]):
    """Events of one run, each stamped with its run and conversation ids, ending with
    ``RunCompleted`` carrying the same ``Result`` that ``run`` returns.

    Use ``async with agent.run_stream(...) as stream: async for event in stream: ...``. The run
    has a task of its own. Leaving the block early, closing the iterator, or ``stream.cancel()``
    is an explicit stop: the run is cancelled once, records its partial evidence (with a store,
    shielded from further cancellation), and ends with ``RunCanceled`` carrying ``partial``, which
    the iteration or ``get_result()`` raises. A failed run raises its ``RunError`` the same way.
    """

    def __init__(
        self, start: Callable[[Callable[[Event], None]], Coroutine[Any, Any, Result[Output]]]
    ) -> None:
        self._start = start
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task: asyncio.Task[Result[Output]] | None = None
        self._result: Result[Output] | None = None
        self._consumed = False
        self._stopped = False
        self._entered = False

    async def _body(self) -> Result[Output]:
        self._entered = True
        return await self._start(self._queue.put_nowait)

    def _ensure_started(self) -> asyncio.Task[Result[Output]]:
        if self._task is None:
            self._task = asyncio.ensure_future(self._body())
            self._task.add_done_callback(lambda _: self._queue.put_nowait(_DONE))
        return self._task

    def cancel(self) -> None:
        """Stop the run (a user's Stop): it ends with ``RunCanceled`` carrying its partial. Calling
        it again, or after the run ended, does nothing."""
        task = self._ensure_started()
        if self._stopped or task.done():
            return
        self._stopped = True
        if self._entered:
            task.cancel()
        else:  # let the run begin first, so that it is the run that ends itself with RunCanceled
            asyncio.get_running_loop().call_soon(task.cancel)

    @property
    def done(self) -> bool:
        """True once the run has ended (completed, failed or stopped)."""
        return self._task is not None and self._task.done()

    async def __aenter__(self) -> RunStream[Output]:
        self._ensure_started()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        task = self._task
        if task is None:
            return
        self.cancel()
        if await _await_settled(task) and exc_type is not asyncio.CancelledError:
            raise asyncio.CancelledError  # the caller was cancelled while the run recorded its evidence

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
            self.cancel()  # the consumer stopped early (a client disconnect); no-op once done
        result = _outcome(task)
        self._result = result
        yield RunCompleted(result.run_id, result.conversation_id, result)

    @property
    def result(self) -> Result[Output]:
        """The run's result, once the stream was iterated to its end."""
        if self._result is None:
            raise UserError("the stream has not finished; iterate it to the end first")
        return self._result

    async def get_result(self) -> Result[Output]:
        """Drain the remaining events and return the result; after an early exit or ``cancel()``,
        raises the ``RunCanceled`` carrying the partial evidence."""
        if self._result is None:
            if not self._consumed:
                async for _ in self:
                    pass
            else:
                task = self._ensure_started()
                if await _await_settled(task):
                    raise asyncio.CancelledError
                self._result = _outcome(task)
        assert self._result is not None
        return self._result
