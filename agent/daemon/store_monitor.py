"""The store's health as the daemon sees it: probed off the loop, every second.

A ``StoreMonitor`` asks every second whether a robot's store can take writes
(``storage/integrity.py``). Its answer is ``/readyz`` and the connector's ``accepting``: a
frame is acked only once it is durable, so while the store cannot take writes the connector
acks nothing and closes the stream (DingTalk keeps the frames and, with replicas, routes them
to another connection). A locked or full store is transient: acking resumes when a probe
passes. A store deleted, replaced or corrupted under the daemon is not: it is ``lost``, and
its robot stops (``agent/daemon/robot.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

from storage.base import StoreBase
from storage.integrity import (
    StoreHealth,
    StoreProblem,
    check_identity,
    classify,
    connect_existing,
    healthy,
    quick_check,
    unhealthy,
)

log = logging.getLogger("dta.daemon")

PROBE_INTERVAL_S = 1.0  # how often the write probe runs
# quick_check reads the whole file: at least this far apart, and never more than this share
# of the time (a check that took 3 s waits 150 s for the next). A probe failing for a reason
# it cannot name (an I/O error, say) brings the next check forward.
QUICK_CHECK_MIN_INTERVAL_S = 10.0
QUICK_CHECK_BUDGET = 0.02


class StoreMonitor:
    """The store's latest health, probed off the loop; what readiness and acking go by.

    ``current()`` and ``accepting()`` are safe from any thread (the connector asks before
    each ack): they read the latest probe and add a fresh ``stat`` of the file, so a
    deletion stops acking at once rather than at the next probe. A fatal problem is final:
    ``lost`` holds it and ``lost_event`` is set, even if a file reappears at the path.
    """

    def __init__(
        self,
        store: StoreBase,
        timeout_s: float,
        interval_s: float = PROBE_INTERVAL_S,
        quick_check_every_s: float = QUICK_CHECK_MIN_INTERVAL_S,
    ) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.quick_check_every_s = quick_check_every_s
        self.health: StoreHealth = healthy("not probed yet")
        self.lost: StoreHealth | None = None
        self.lost_event = asyncio.Event()
        self._probes = ThreadPoolExecutor(1, thread_name_prefix="dta-store-probe")
        self._checks = ThreadPoolExecutor(1, thread_name_prefix="dta-store-check")
        self._checking: sqlite3.Connection | None = None
        self._check_soon = asyncio.Event()
        self._closed = False

    def current(self) -> StoreHealth:
        if self.lost is not None:
            return self.lost
        return check_identity(self.store.path, self.store.identity) or self.health

    def accepting(self) -> bool:
        """May a new frame be stored and acked? (the connector's ``accepting``)"""
        return self.current().ok

    async def probe_once(self) -> StoreHealth:
        try:
            limit: int | None = self.store.page_limit()
        except sqlite3.Error:
            limit = None
        loop = asyncio.get_running_loop()
        health = await loop.run_in_executor(self._probes, self.store.probe, self.timeout_s, limit)
        self._update(health)
        return self.current()

    async def check_pages_once(self) -> StoreHealth:
        loop = asyncio.get_running_loop()
        health = await loop.run_in_executor(self._checks, self._quick_check)
        if health.fatal and not self._closed:
            self._update(health)
        elif not health.ok:
            log.warning("page check not done", extra={"detail": health.detail})
        return health

    def _quick_check(self) -> StoreHealth:
        """On a worker thread; ``close`` interrupts it (a big file takes a while)."""
        if self.store.identity is None:
            return healthy("in memory")
        moved = check_identity(self.store.path, self.store.identity)
        if moved is not None:
            return moved
        try:
            conn = connect_existing(self.store.path, self.timeout_s)
        except sqlite3.Error as exc:
            return unhealthy(classify(exc), str(exc))
        self._checking = conn
        try:
            return quick_check(conn)
        finally:
            self._checking = None
            conn.close()

    async def run(self) -> None:
        """Probe every ``interval_s`` until the store is lost; check pages now and then."""
        checker = asyncio.create_task(self._check_pages_forever())
        try:
            while self.lost is None:
                await self.probe_once()
                if self.lost is None:
                    await asyncio.sleep(self.interval_s)
        finally:
            checker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checker

    async def _check_pages_forever(self) -> None:
        """Every ``gap``, or sooner when asked (``_check_soon``), but never closer together
        than the budget allows for a check that took as long as the last one."""
        gap, floor = self.quick_check_every_s, 0.0  # the claim checked every page at start-up
        while self.lost is None:
            await asyncio.sleep(floor)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._check_soon.wait(), max(0.0, gap - floor))
            self._check_soon.clear()
            started = time.monotonic()
            await self.check_pages_once()
            floor = (time.monotonic() - started) / QUICK_CHECK_BUDGET
            gap = max(self.quick_check_every_s, floor)

    def _update(self, health: StoreHealth) -> None:
        if self.lost is not None:
            return
        health = check_identity(self.store.path, self.store.identity) or health
        previous, self.health = self.health, health
        if health.fatal:
            self.lost = health
            self.lost_event.set()
            return
        if health.ok:
            if not previous.ok:
                log.info("store ready again: acking resumed")
            return
        if health.problem != previous.problem:
            log.warning(
                "store not ready: acking paused",
                extra={"problem": str(health.problem), "detail": health.detail},
            )
        if health.problem is StoreProblem.ERROR:
            self._check_soon.set()  # a failure the probe cannot name: are the pages sound?

    def close(self) -> None:
        self._closed = True
        conn = self._checking
        if conn is not None:
            conn.interrupt()  # thread-safe: ends a long quick_check
        self._probes.shutdown(wait=False, cancel_futures=True)
        self._checks.shutdown(wait=False, cancel_futures=True)
