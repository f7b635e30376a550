"""``dta run``: the daemon an operator leaves running against a robot.

Start-up order matters. First the store is claimed (``storage/lock.py``): the instance lock
(one daemon per store), a store that existed and is now missing, a corrupt, read-only or
too-new file — each refused with one line. Then the runtime reconciles what a previous crash
left (uncertain attempts, unfinished runs) before the connector opens the stream, so
recovered work and new frames never race. Shutdown is the reverse and bounded: stop taking
frames, give in-flight runs ``shutdown_grace_s`` to finish, then cancel the rest — their
events are stored and are picked up at the next start.

While it runs, a ``StoreMonitor`` asks every second whether the store can take writes
(``storage/integrity.py``). Its answer is ``/readyz`` and the connector's ``accepting``: a
frame is acked only once it is durable, so while the store cannot take writes the connector
acks nothing and closes the stream (DingTalk keeps the frames and, with replicas, routes them
to another connection). A locked or full store is transient: acking resumes when a probe
passes. A store deleted, replaced or corrupted under the daemon is not: in-flight work
finishes through the still-open handle, nothing more is acked, and the daemon exits with
``EXIT_STORE_LOST`` so the supervisor notices; the restart then refuses (see the lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from agent.components import build_provider, connector_config
from agent.config import Settings
from agent.daemon.connect import connect
from agent.daemon.handoff import ACK_SWITCH_INTERVAL_S
from agent.daemon.health import HealthServer
from agent.daemon.metrics import Latencies, Metrics
from agent.daemon.recorder import FrameRecorder
from agent.dingtalk.connector import Connector
from agent.runtime import Runtime
from skills.loader import SkillLibrary
from storage.backends.sqlite_checkpoints import WalCheckpoints
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
from storage.lock import StoreLock, claim_store

log = logging.getLogger("dta.daemon")

EXIT_STORE_LOST = 3  # the store was deleted, replaced or corrupted while the daemon ran
PROBE_INTERVAL_S = 1.0  # how often the write probe runs
# quick_check reads the whole file: at least this far apart, and never more than this share
# of the time (a check that took 3 s waits 150 s for the next). A probe failing for a reason
# it cannot name (an I/O error, say) brings the next check forward.
QUICK_CHECK_MIN_INTERVAL_S = 10.0
QUICK_CHECK_BUDGET = 0.02


def settle_heap() -> None:
    """Move everything built so far out of the garbage collector's sight.

    A full collection walks every object the process holds, and while it runs no thread
    runs: with the modules, schemas and skills a daemon loads, one took 90 ms, and every
    frame arriving meanwhile waited that long for its ack. Start-up's objects live as
    long as the process, so they are frozen (``gc.freeze``): later collections walk only
    what the runs themselves create.
    """
    gc.collect()
    gc.freeze()


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


class Daemon:
    def __init__(self, settings: Settings, record: Path | None = None, new_store: bool = False):
        self.settings = settings
        self.config = connector_config(settings)
        # Load (and so validate) skills and the provider now: a broken SKILL.md or provider
        # setting stops start-up with the file and field named, before anything connects.
        self.skills = SkillLibrary(settings.skill_paths)
        self.provider = build_provider(settings)
        self.latencies = Latencies()  # observed by the runtime and the connector
        self.record = record
        self.new_store = new_store
        self.stopping = asyncio.Event()
        self.lock: StoreLock | None = None

    def claim(self) -> None:
        """Take the store (``StoreError`` with the line to print if it cannot be taken)."""
        if self.settings.store_url:
            return  # PostgreSQL: replicas share it; run leases take the lock's place
        if self.lock is None and str(self.settings.store_path) != ":memory:":
            self.lock = claim_store(
                self.settings.store_path,
                new_store=self.new_store,
                synchronous=self.settings.store_synchronous,
            )

    async def run(self) -> int:
        self.claim()
        try:
            return await self._serve()
        finally:
            if self.lock is not None:
                self.lock.release()

    async def _serve(self) -> int:
        loop = asyncio.get_running_loop()
        sys.setswitchinterval(ACK_SWITCH_INTERVAL_S)  # see agent/daemon/handoff.py
        stops = {signal.SIGINT, signal.SIGTERM}
        # A parent may have started us with these blocked (a thread's mask is inherited
        # across fork and exec): blocked, an operator's stop would wait forever.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
        for sig in stops:
            loop.add_signal_handler(sig, self.stopping.set)
        async with contextlib.AsyncExitStack() as stack:
            parts = await self._store_side(stack)
            connector = await self._stream_side(stack, parts)
            lost = await self._until_stopped(parts.monitor)
            if lost is not None:
                log.error(
                    f"store lost ({lost.problem}: {lost.detail}): nothing more is acked;"
                    " finishing in-flight work, then exiting. A restart refuses until the"
                    " store is restored or dta run --new-store is given",
                    extra={"problem": str(lost.problem), "exit_code": EXIT_STORE_LOST},
                )
            else:
                log.info("stopping")
            await loop.run_in_executor(None, connector.stop, 5.0)
            try:
                await asyncio.wait_for(parts.runtime.drain(), self.settings.shutdown_grace_s)
            except TimeoutError:
                log.warning("in-flight runs left for recovery at the next start")
        log.info("stopped")
        return EXIT_STORE_LOST if lost is not None else 0

    async def _store_side(self, stack: contextlib.AsyncExitStack) -> _Parts:
        """The runtime on its store, recovered, with its checkpoints and readiness probe."""
        runtime = Runtime(
            self.settings,
            skills=self.skills,
            provider=self.provider,
            on_run_finished=self.latencies.run.observe,
        )
        stack.push_async_callback(runtime.aclose)
        monitor = StoreMonitor(runtime.store, self.settings.store_probe_timeout_s)
        stack.callback(monitor.close)
        recorder = None
        if self.record:
            recorder = FrameRecorder(self.record, self.settings.secret_values)
            stack.callback(recorder.close)
        recovered = await runtime.start(recovery_loop=True)
        checkpoints = WalCheckpoints(runtime.store)  # commits never wait for one
        checkpoints.start()
        stack.callback(checkpoints.stop)
        await monitor.probe_once()  # readiness is known before the stream opens
        return _Parts(runtime, monitor, recorder, recovered)

    async def _stream_side(self, stack: contextlib.AsyncExitStack, parts: _Parts) -> Connector:
        """The connector, metrics, health port, watchers and heartbeat; the stream opens
        last, once everything that takes its frames is ready."""
        loop, runtime, monitor = asyncio.get_running_loop(), parts.runtime, parts.monitor
        connector = connect(
            runtime,
            self.config,
            loop,
            on_frame=parts.recorder,
            on_ack=self.latencies.ack.observe,
            accepting=monitor.accepting,
        )
        metrics = Metrics(runtime.store, connector, monitor.current, self.latencies)
        if self.settings.health_port:
            health = HealthServer(
                self.settings.health_host,
                self.settings.health_port,
                runtime.store,
                connector,
                metrics,
                store_health=monitor.current,
            )
            await stack.enter_async_context(health)
            log.info("health server listening", extra={"url": health.url})
        stack.push_async_callback(_cancel, loop.create_task(monitor.run()))
        if runtime.heartbeat is not None:  # proactive work (agent/proactive/heartbeat.py)
            stack.push_async_callback(_cancel, loop.create_task(runtime.heartbeat.run_forever()))
        settle_heap()
        connector.start()
        extra = {"store": runtime.store.where, "recovered": parts.recovered}
        log.info("daemon started", extra={**extra, "provider": self.settings.provider})
        return connector

    async def _until_stopped(self, monitor: StoreMonitor) -> StoreHealth | None:
        """Wait for a signal or a lost store; the lost store's health, if that came first."""
        waits = {
            asyncio.ensure_future(self.stopping.wait()),
            asyncio.ensure_future(monitor.lost_event.wait()),
        }
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return monitor.lost


@dataclass(frozen=True)
class _Parts:
    """What the store side of a starting daemon made, for the stream side."""

    runtime: Runtime
    monitor: StoreMonitor
    recorder: FrameRecorder | None
    recovered: int


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
