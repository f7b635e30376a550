"""The places of the outbound HTTP pool (``agent/dingtalk/http_pool.py``): at most so many
requests in flight, the rest waiting in turn."""

from __future__ import annotations

import asyncio
import collections

import httpcore


class Places:
    """The pool's free places and the requests waiting for one, first come first served.

    What ``asyncio.Semaphore`` under ``asyncio.timeout`` did, for less: under a burst most
    requests wait, and a cancellation scope per wait (and the semaphore's look over its
    waiters on every take) cost more than the wait. A waiter's timeout is a timer on its
    own future; a place handed to a waiter that gave up at that moment (its time ran out,
    it was cancelled) goes on to the next one, never lost."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def free(self) -> int:
        return self._free

    def release(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():  # (one that gave up is skipped)
                waiter.set_result(None)
                return
        self._free += 1

    async def acquire(self, timeout: float | None = None) -> None:
        """A place: at once when one is free and nobody waits, else in turn; past
        ``timeout`` seconds, ``httpcore.PoolTimeout``."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _time_out, waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # handed a place just as it gave up: the next one has it
            raise
        finally:
            if timer is not None:
                timer.cancel()


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.PoolTimeout("no connection free in time"))
