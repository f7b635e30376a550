"""One robot of a running deployment: its store, its runtime and its stream, started and
stopped as one.

Start-up order matters. First the store is claimed (``storage/lock.py``): the instance lock
(one daemon per SQLite store), a store that existed and is now missing, a corrupt,
read-only or too-new file — each refused with one line (``StoreError``). Then the runtime
reconciles what a previous crash left (uncertain attempts, unfinished runs) before the
connector opens the stream, so recovered work and new frames never race. Stopping is the
reverse and bounded: stop taking frames, give in-flight runs ``shutdown_grace_s``, then
cancel the rest — their events are stored and are picked up at the next start.

While it serves, its ``StoreMonitor`` (agent/daemon/store_monitor.py) says whether the store
takes writes; a store deleted, replaced or corrupted under it is ``lost``: nothing more is
acked, in-flight work finishes through the still-open handle, and the robot stops (the
deployment's other robots go on). ``view`` is what health and metrics read of it.

    robot = RobotDaemon(settings, latencies)
    robot.claim()                 # StoreError: one line to print
    await robot.start()
    lost = await robot.until_lost()
    await robot.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from agent.components import build_provider, connector_config
from agent.config import Settings
from agent.daemon.connect import connect
from agent.daemon.metrics import Latencies, RobotView
from agent.daemon.recorder import FrameRecorder
from agent.daemon.store_monitor import StoreMonitor
from agent.dingtalk.connector import Connector
from agent.logs import robot_context
from agent.runtime import Runtime
from skills.loader import SkillLibrary
from storage.backends.sqlite_checkpoints import WalCheckpoints
from storage.integrity import StoreHealth
from storage.lock import StoreLock, claim_store

log = logging.getLogger("dta.daemon")


class RobotDaemon:
    def __init__(
        self,
        settings: Settings,
        latencies: Latencies,
        record: Path | None = None,
        new_store: bool = False,
    ) -> None:
        self.settings = settings
        self.code = str(settings.robot_code or "default")
        self.config = connector_config(settings)
        # Load (and so validate) skills and the provider now: a broken SKILL.md or provider
        # setting stops start-up with the file and field named, before anything connects.
        self.skills = SkillLibrary(settings.skill_paths, settings.tools)
        self.provider = build_provider(settings)
        self.observe_ack, self.observe_run = latencies.of(self.code)
        self.record = record
        self.new_store = new_store
        self.lock: StoreLock | None = None
        self.view = RobotView(self.code)
        self.runtime: Runtime | None = None
        self.monitor: StoreMonitor | None = None
        self.connector: Connector | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def serving(self) -> bool:
        return self.connector is not None

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

    async def start(self) -> int:
        """The store side (runtime recovered, checkpoints, readiness known), then the stream
        side; returns how many runs recovery queued. A failure leaves nothing running."""
        try:
            with robot_context(self.code):  # its tasks' log lines name it
                recovered = await self._store_side()
                self._stream_side()
        except BaseException:
            await self._close()
            raise
        self.view.down = None
        extra = {"robot": self.code, "store": self.runtime.store.where if self.runtime else None}
        log.info("robot serving", extra={**extra, "recovered": recovered})
        return recovered

    async def _store_side(self) -> int:
        stack = self._stack
        runtime = Runtime(
            self.settings,
            skills=self.skills,
            provider=self.provider,
            on_run_finished=self.observe_run,
        )
        stack.push_async_callback(runtime.aclose)
        self.runtime = runtime
        monitor = StoreMonitor(runtime.store.db, self.settings.store_probe_timeout_s)
        stack.callback(monitor.close)
        self.monitor = monitor
        recovered = await runtime.start(recovery_loop=True)
        checkpoints = WalCheckpoints(runtime.store.db)  # commits never wait for one
        checkpoints.start()
        stack.callback(checkpoints.stop)
        await monitor.probe_once()  # readiness is known before the stream opens
        self.view.store, self.view.store_health = runtime.store, monitor.current
        sources = runtime.knowledge
        self.view.knowledge = (lambda: sources.sync.last) if sources is not None else None
        return recovered

    def _stream_side(self) -> None:
        """The connector, the readiness probe's loop and the heartbeat; the stream opens
        last, once everything that takes its frames is ready."""
        runtime, monitor = self.runtime, self.monitor
        assert runtime is not None and monitor is not None
        loop = asyncio.get_running_loop()
        recorder = None
        if self.record:
            recorder = FrameRecorder(self.record, self.settings.secret_values)
            self._stack.callback(recorder.close)
        connector = connect(
            runtime,
            self.config,
            loop,
            on_frame=recorder,
            on_ack=self.observe_ack,
            accepting=monitor.accepting,
        )
        self._stack.push_async_callback(_cancel, loop.create_task(monitor.run()))
        if runtime.heartbeat is not None:  # proactive work (agent/proactive/heartbeat.py)
            task = loop.create_task(runtime.heartbeat.run_forever())
            self._stack.push_async_callback(_cancel, task)
        self.connector = connector
        self.view.connector = connector

    def open_stream(self) -> None:
        """Start taking frames (after the whole deployment is ready to)."""
        assert self.connector is not None
        with robot_context(self.code):  # the connector's thread names it too
            self.connector.start()

    async def until_lost(self) -> StoreHealth:
        """Wait until the store is lost; its health then."""
        assert self.monitor is not None
        await self.monitor.lost_event.wait()
        assert self.monitor.lost is not None
        return self.monitor.lost

    async def stop(self, why: str | None = None) -> None:
        """Stop taking frames, give in-flight runs their grace, then close everything;
        ``why``: it stops alone (its store was lost), said by readiness from now on."""
        if why is not None:
            self.view.down = why
        loop = asyncio.get_running_loop()
        if self.connector is not None:
            await loop.run_in_executor(None, self.connector.stop, 5.0)
        if self.runtime is not None:
            try:
                await asyncio.wait_for(self.runtime.drain(), self.settings.shutdown_grace_s)
            except TimeoutError:
                log.warning(
                    "in-flight runs left for recovery at the next start",
                    extra={"robot": self.code},
                )
        await self._close()

    async def _close(self) -> None:
        self.view.connector, self.view.store, self.view.store_health = None, None, None
        self.view.knowledge = None
        try:
            await self._stack.aclose()
        finally:  # the store is let go even if something failed to close
            self._stack = contextlib.AsyncExitStack()
            self.connector, self.monitor = None, None
            if self.lock is not None:
                self.lock.release()
                self.lock = None


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
