"""Store faults under load: a full disk and a held lock delay answers, never drop them; a
deleted or corrupt store stops the acks and the daemon, and a restart refuses.

While distinct DMs flow at a steady rate, the store fails under the running daemon (a real
``dta run`` against the fake DingTalk):

- ``full``: the daemon may not write past the first page of any file (``RLIMIT_FSIZE`` set
  on its process from outside; SQLite reports an I/O error, as on a full disk), then it
  may again;
- ``locked``: another process holds the store's write lock three times longer than the
  daemon's busy timeout (a backup, a ``VACUUM``), then lets go;
- ``deleted``: the store file is unlinked; the daemon must finish what it holds through its
  open handle, ack nothing more and exit 3, and a restart must refuse (exit 2) to start on a
  new empty store (old messages redelivered later would be answered twice);
- ``corrupt``: pages in the middle of the file are overwritten; once the daemon notices it
  acks nothing more and exits 3.

Counted on the platform (the fake's record), not in the bot's store. Pass: for ``full`` and
``locked`` every message is answered exactly once after the fault clears, no attempt is left
``started``, and ``/readyz`` said 503 during the fault; for ``deleted`` and ``corrupt`` no
frame is acked after the daemon noticed, it exits 3, and (deleted) a restart refuses (exit 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from agent.clock import SystemClock
from agent.daemon.serve import EXIT_STORE_LOST
from lab.fake import FakeDingTalk
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    attempts_left_started,
    cli,
    replies_per_user,
    seal,
    send_dm,
    until,
    wrong_answers,
)

SIZES: dict[str, float] = {"full": 10.0, "reduced": 3.0}  # seconds each fault lasts
WRITE_CAP_BYTES = 4096  # while the disk is "full", nothing is written past this offset
RATE_PER_S = 20.0
BASE = 500_000
CONFIG: dict[str, Any] = {
    "store_busy_timeout_s": 1.0,
    "recovery_interval_s": 0.5,
    "open_connection_timeout_s": 2.0,
}


class Load:
    """Distinct DMs at a steady rate, each from its own sender, until stopped."""

    def __init__(self, fake: FakeDingTalk, prefix: str) -> None:
        self.fake, self.prefix = fake, prefix
        self.sent: list[str] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            i = len(self.sent)
            await asyncio.sleep(max(0.0, started + i / RATE_PER_S - time.monotonic()))
            self.sent.append(send_dm(self.fake, self.prefix, i, BASE))

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    def users(self) -> set[str]:
        return {f"{self.prefix}-u{i}" for i in range(len(self.sent))}


class Readiness:
    """Polls ``/readyz`` in the background; remembers every answer with its time."""

    def __init__(self, daemon: DaemonProcess) -> None:
        self.daemon = daemon
        self.seen: list[tuple[float, int]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                try:
                    response = await client.get(self.daemon.url("/readyz"), timeout=1)
                    self.seen.append((time.time(), response.status_code))
                except httpx.HTTPError:
                    self.seen.append((time.time(), 0))
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def first_not_ready(self, since: float) -> float | None:
        return next((at for at, status in self.seen if at >= since and status != 200), None)

    def not_ready_between(self, start: float, end: float) -> bool:
        return any(status == 503 for at, status in self.seen if start <= at <= end)


def acked_after(fake: FakeDingTalk, moment: float) -> int:
    """Callback frames the daemon acked after ``moment`` (platform time)."""
    return sum(
        1
        for record in fake.stream.frames.values()
        if record.kind == "callback" and record.acked_at is not None and record.acked_at > moment
    )


# --------------------------------------------------------------------------- the faults


async def fill_the_disk(daemon: DaemonProcess, seconds: float) -> None:
    """For ``seconds`` the daemon can write nothing past the first page of any file.

    Stricter than "no file may grow", which a full disk is: the daemon's WAL, checkpointed
    on its own thread, is recycled in place and would go on taking writes without growing,
    so the fault would never bite. One limit holds for every file of the process
    (``RLIMIT_FSIZE``, which SQLite meets as an I/O error)."""
    assert daemon.pid is not None
    cap = WRITE_CAP_BYTES
    resource.prlimit(daemon.pid, resource.RLIMIT_FSIZE, (cap, resource.RLIM_INFINITY))
    try:
        await asyncio.sleep(seconds)
    finally:
        if daemon.running:
            unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            resource.prlimit(daemon.pid, resource.RLIMIT_FSIZE, unlimited)


async def hold_the_lock(daemon: DaemonProcess, seconds: float) -> None:
    """Another process takes the write lock and keeps it for ``seconds``."""
    other = sqlite3.connect(daemon.store_path, isolation_level=None, timeout=10)
    try:
        other.execute("BEGIN IMMEDIATE")
        await asyncio.sleep(seconds)
        other.execute("ROLLBACK")
    finally:
        other.close()


def corrupt(path: Path) -> None:
    """Fold the WAL into the file, then overwrite pages in its middle with garbage."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None, timeout=10)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    size = path.stat().st_size
    with path.open("r+b") as file:
        for offset in range(page * 2, size - page, page * 2):
            file.seek(offset)
            file.write(os.urandom(page))


# --------------------------------------------------------------------------- phases


async def _transient(kind: str, seconds: float, workdir: Path) -> dict[str, Any]:
    """A fault that passes: every message answered exactly once after it clears."""
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, max_redeliveries=100)
    await fake.start()
    daemon = DaemonProcess(fake, workdir / kind, CONFIG)
    load = Load(fake, kind)
    ready = Readiness(daemon)
    try:
        await daemon.start()
        ready.start()
        load.start()
        await asyncio.sleep(1.0)
        struck = time.time()
        if kind == "full":
            await fill_the_disk(daemon, seconds)
        else:
            await hold_the_lock(daemon, seconds)
        cleared = time.time()
        await asyncio.sleep(1.0)
        await load.stop()
        users = load.users()
        answered = await until(lambda: users <= set(replies_per_user(fake)), 90, 0.1)
        await fake.wait_idle(30)
        await asyncio.sleep(1.0)  # room for a late duplicate to show up
        alive = daemon.running
    finally:
        await load.stop()
        await ready.stop()
        await daemon.stop()
        await fake.stop()
    per_user = replies_per_user(fake)
    with contextlib.closing(daemon.store()) as store:
        started = attempts_left_started(store)
        uncertain = sum(r.status.value == "uncertain" for r in store.actions.receipts())
    report = {
        "fault_s": seconds,
        "injected": len(load.sent),
        "answered_once": sum(per_user.get(u, 0) == 1 for u in users),
        "unanswered": sum(per_user.get(u, 0) == 0 for u in users),
        "answered_twice": sum(per_user.get(u, 0) > 1 for u in users),
        "wrong_answers": wrong_answers(fake, kind, BASE),
        "uncertain_receipts": uncertain,
        "attempts_left_started": started,
        "not_ready_during_fault": ready.not_ready_between(struck, cleared + 0.5),
        "daemon_alive": alive,
    }
    report["passed"] = bool(
        answered
        and alive
        and report["unanswered"] == 0
        and report["answered_twice"] == 0
        and report["wrong_answers"] == 0
        and started == 0
        and report["not_ready_during_fault"]
    )
    return report


async def _fatal(kind: str, workdir: Path) -> dict[str, Any]:
    """A fault that does not pass: no ack after it is noticed, a non-zero exit, and (for a
    deleted store) a restart that refuses rather than answering old messages again."""
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, max_redeliveries=100)
    await fake.start()
    daemon = DaemonProcess(fake, workdir / kind, CONFIG)
    load = Load(fake, kind)
    ready = Readiness(daemon)
    refused: dict[str, Any] = {}
    try:
        await daemon.start()
        ready.start()
        load.start()
        await asyncio.sleep(1.5)
        struck = time.time()
        if kind == "deleted":
            daemon.store_path.unlink()
        else:
            corrupt(daemon.store_path)
        exited = await until(lambda: not daemon.running, 30, 0.1)
        noticed = ready.first_not_ready(struck) or time.time()
        exit_code = daemon.proc.returncode if daemon.proc is not None else None
        await load.stop()
        if kind == "deleted":
            refused = await _restart_refuses(daemon)
    finally:
        await load.stop()
        await ready.stop()
        await daemon.stop()
        await fake.stop()
    report = {
        "injected": len(load.sent),
        "exited": exited,
        "exit_code": exit_code,
        "noticed_after_s": round(noticed - struck, 3),
        "acked_after_noticed": acked_after(fake, noticed),
        **refused,
    }
    report["passed"] = bool(
        exited
        and exit_code == EXIT_STORE_LOST
        and report["acked_after_noticed"] == 0
        and refused.get("restart_refused", True)
    )
    return report


EXIT_REFUSED = 2  # start-up refused in one line (storage/lock.py, agent/cli/commands.py)


async def _restart_refuses(daemon: DaemonProcess) -> dict[str, Any]:
    """Start again on the missing store: it must refuse, quickly, in one clear line."""
    try:
        await daemon.start(timeout=15)
        started = True
    except Exception:
        started = False
    code = daemon.proc.returncode if daemon.proc is not None else None
    lines = [line for line in daemon.log_tail().splitlines() if line.strip()]
    return {
        "restart_refused": not started and code == EXIT_REFUSED,
        "restart_message": lines[-1][:300] if lines else "",
    }


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    seconds = SIZES[size]
    t0 = time.monotonic()
    phases = {
        "full": await _transient("full", seconds, workdir),
        "locked": await _transient("locked", seconds, workdir),
        "deleted": await _fatal("deleted", workdir),
        "corrupt": await _fatal("corrupt", workdir),
    }
    report: dict[str, Any] = {
        "script": "storefaults",
        "size": size,
        **phases,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = all(phase["passed"] for phase in phases.values())
    return seal(report, [])


def main(argv: list[str] | None = None) -> int:
    return cli("storefaults", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
