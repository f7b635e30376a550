"""``dta run``: the daemon an operator leaves running, serving one robot or several.

Each robot of the deployment (``[[robots]]`` in dta.toml, or the top level as the one robot)
is a ``RobotDaemon`` (agent/daemon/robot.py): its own store, runtime, readiness probe and
Stream connection, reconnecting on its own. The deployment adds what the process has once:
signals, one health and metrics port labelled by robot, and what a robot's trouble means for
the rest.

- A robot whose store cannot be taken at start (locked by another daemon, corrupt, …) is
  reported (log and ``/readyz``) and tried again with back-off while the others answer;
  when no robot can start, ``dta run`` refuses in one line, as with one robot.
- A robot whose credentials DingTalk refuses keeps retrying its connection; ``/readyz``
  names it and why.
- A robot whose store is lost while running stops alone (named in ``/readyz``); the process
  exits with ``EXIT_STORE_LOST`` only once every robot's store is lost, so the supervisor
  notices; the restart then refuses for that store (see the lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from pathlib import Path

from agent.config import Settings
from agent.daemon.handoff import ACK_SWITCH_INTERVAL_S
from agent.daemon.health import HealthServer
from agent.daemon.metrics import Latencies, Metrics
from agent.daemon.robot import RobotDaemon
from storage.integrity import StoreError

log = logging.getLogger("dta.daemon")

EXIT_STORE_LOST = 3  # every robot's store was deleted, replaced or corrupted while it ran
RETRY_START_S = 5.0  # a robot that could not start is tried again after this, doubling
RETRY_START_MAX_S = 60.0


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


def recording_for(record: Path | None, code: str, several: bool) -> Path | None:
    """Where a robot's frames are recorded: the file given, or with several robots one
    file each beside it (``frames.jsonl`` -> ``frames.<robot>.jsonl``)."""
    if record is None or not several:
        return record
    return record.with_name(f"{record.stem}.{code}{record.suffix}")


class Daemon:
    def __init__(self, settings: Settings, record: Path | None = None, new_store: bool = False):
        self.settings = settings
        self.latencies = Latencies()  # observed by each robot's runtime and connector
        robots = settings.robot_settings()
        several = len(robots) > 1
        self.robots = [
            RobotDaemon(
                robot,
                self.latencies,
                recording_for(record, str(robot.robot_code), several),
                new_store,
            )
            for robot in robots
        ]
        self.stopping = asyncio.Event()
        self.unclaimed: dict[str, StoreError] = {}  # robots whose store could not be taken

    def claim(self) -> None:
        """Take every robot's store; ``StoreError`` (the line to print) only when none can
        be taken. The ones that cannot are tried again once the others serve."""
        self.unclaimed = {}
        for robot in self.robots:
            try:
                robot.claim()
            except StoreError as exc:
                self.unclaimed[robot.code] = exc
                robot.view.down = f"could not start: {_said(exc)}; retrying"
        if len(self.unclaimed) == len(self.robots):
            raise next(iter(self.unclaimed.values()))

    async def run(self) -> int:
        self.claim()
        try:
            return await self._serve()
        finally:
            for robot in self.robots:
                if robot.lock is not None:
                    robot.lock.release()

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
            await self._health(stack)
            await self._start_all()
            settle_heap()
            for robot in self.robots:
                if robot.serving:
                    robot.open_stream()
            log.info(
                "daemon started",
                extra={
                    "robots": [robot.code for robot in self.robots if robot.serving],
                    "provider": self.settings.provider,
                },
            )
            try:
                lost = await self._until_stopped(stack)
            finally:  # every robot is stopped, whatever went wrong with one of them
                stopping = [robot for robot in self.robots if robot.serving]
                done = await asyncio.gather(
                    *(robot.stop() for robot in stopping), return_exceptions=True
                )
                for robot, result in zip(stopping, done, strict=True):
                    if isinstance(result, BaseException):
                        log.error(
                            "robot did not stop cleanly",
                            extra={"robot": robot.code, "error": _said(result)},
                        )
        log.info("stopped")
        return EXIT_STORE_LOST if lost else 0

    async def _start_all(self) -> None:
        """Start each robot whose store was taken. One that fails (its store unreachable,
        say) is reported and tried again later, while the others serve; when none starts,
        the first failure stops start-up."""
        failures: list[BaseException] = []
        for robot in self.robots:
            if robot.code in self.unclaimed:
                continue
            try:
                await robot.start()
            except Exception as exc:
                failures.append(exc)
                robot.view.down = f"could not start: {_said(exc)}; retrying"
                log.warning(
                    "robot could not start", extra={"robot": robot.code, "error": _said(exc)}
                )
        if failures and not any(robot.serving for robot in self.robots):
            raise failures[0]

    async def _health(self, stack: contextlib.AsyncExitStack) -> None:
        """One health and metrics port for every robot (none when ``health_port`` is 0)."""
        if not self.settings.health_port:
            return
        views = [robot.view for robot in self.robots]
        health = HealthServer(
            self.settings.health_host,
            self.settings.health_port,
            views,
            Metrics(views, self.latencies),
        )
        await stack.enter_async_context(health)
        log.info("health server listening", extra={"url": health.url})

    async def _until_stopped(self, stack: contextlib.AsyncExitStack) -> bool:
        """Serve until a signal, or until every robot's store is lost (True then). A robot
        that could not start is tried again meanwhile; one whose store is lost stops alone.
        """
        tasks = {asyncio.ensure_future(self.stopping.wait()): None}
        for robot in self.robots:
            if robot.serving:
                tasks[asyncio.ensure_future(robot.until_lost())] = robot
            else:
                tasks[asyncio.ensure_future(self._start_later(robot))] = robot
        lost: set[str] = set()
        try:
            while not self.stopping.is_set() and len(lost) < len(self.robots):
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    robot = tasks.pop(task)
                    if robot is None or task.cancelled():
                        continue
                    result = task.result()
                    if result is None:  # started after all: now watched like the others
                        tasks[asyncio.ensure_future(robot.until_lost())] = robot
                        continue
                    lost.add(robot.code)
                    await self._lost(robot, result)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if len(lost) == len(self.robots):
            return True
        log.info("stopping")
        return False

    async def _lost(self, robot: RobotDaemon, health: object) -> None:
        problem, detail = getattr(health, "problem", "?"), getattr(health, "detail", "")
        log.error(
            f"robot {robot.code}: store lost ({problem}: {detail}): nothing more is acked;"
            " finishing in-flight work, then this robot stops. A restart refuses until the"
            " store is restored or dta run --new-store is given",
            extra={"robot": robot.code, "problem": str(problem), "exit_code": EXIT_STORE_LOST},
        )
        await robot.stop(why=f"store lost ({problem}: {detail})")

    async def _start_later(self, robot: RobotDaemon) -> None:
        """Try a robot that could not start again, with back-off, until it serves; a
        robot started late opens its stream at once."""
        wait = RETRY_START_S
        while True:
            await asyncio.sleep(wait)
            try:
                await asyncio.to_thread(robot.claim)  # it checks the file: off the loop
                await robot.start()
            except Exception as exc:  # its store still cannot be had: reported, tried again
                robot.view.down = f"could not start: {_said(exc)}; retrying"
                log.warning(
                    "robot still cannot start",
                    extra={"robot": robot.code, "error": _said(exc), "in_s": wait},
                )
                wait = min(RETRY_START_MAX_S, wait * 2)
                continue
            self.unclaimed.pop(robot.code, None)
            robot.open_stream()
            return


def _said(exc: BaseException) -> str:
    """An error in one line for readiness and logs (its type when it says nothing)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text[:300] or type(exc).__name__
