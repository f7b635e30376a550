"""Run jobs serially per key and concurrently across keys, under one global bound.

The key is a thread (conversation + actor): one person's messages are handled in order,
while different people never wait for each other beyond the global limit.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from agent.crashpoints import Crash

log = logging.getLogger("dta.dispatcher")

Job = Callable[[], Awaitable[object]]


class Dispatcher:
    def __init__(self, limit: int) -> None:
        self._limit = asyncio.Semaphore(limit)
        self._queues: dict[str, deque[Job]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self.crash: Crash | None = None

    @property
    def busy(self) -> int:
        return len(self._workers)

    def submit(self, key: str, job: Job) -> None:
        self._queues.setdefault(key, deque()).append(job)
        if key not in self._workers:
            self._workers[key] = asyncio.get_running_loop().create_task(self._work(key))

    async def _work(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue and self.crash is None:
                job = queue.popleft()
                async with self._limit:
                    try:
                        await job()
                    except Crash as crash:
                        # Simulated kill -9: remember it and stop; the lab restarts us.
                        self.crash = crash
                        return
                    except Exception:
                        log.exception("job failed", extra={"thread_key": key})
        finally:
            if not queue or self.crash is not None:
                self._queues.pop(key, None)
            self._workers.pop(key, None)

    async def join(self) -> None:
        """Wait until every queued job has run (or a simulated crash stopped us)."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)
        if self.crash is not None:
            raise self.crash

    async def cancel(self, timeout: float | None = None) -> None:
        """Stop now: queued jobs are dropped; stored events are recovered on restart."""
        self._queues.clear()
        workers = list(self._workers.values())
        for task in workers:
            task.cancel()
        if workers:
            await asyncio.wait(workers, timeout=timeout)
