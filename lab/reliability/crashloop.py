"""Crash loop: ``kill -9`` at random moments under steady load loses and repeats nothing.

A process can die between any two instructions: after storing an event but before the
ack, after recording an attempt but before DingTalk answered, after DingTalk answered but
before the receipt. Here distinct DMs arrive at a steady 50 msg/s while the daemon is
killed with SIGKILL at random moments at least 20 times (reduced: 6) and restarted each
time; the platform answers sends in 50 ms, so kills regularly land mid-send. Messages sent
while it is dead wait at the fake, and callbacks whose ack was lost are redelivered.

Pass, once quiet: every injected message has exactly one decision and a finished run; no
message was answered twice; every message without an ``accepted`` reply receipt has an
``uncertain`` one (an attempt cut by a crash is never resent blindly); no attempt is left
``started``.

``lost`` counts messages without a run in the bot's own store, which a bot that forgot a
message would not see; ``unanswered`` is counted on the platform alone: messages it pushed to
the robot whose sender never received a reply. The only unanswered messages allowed are those
whose attempt a kill cut before the request reached the platform: the bot must own up to each
with an ``uncertain`` receipt (``unanswered_not_uncertain`` is 0), since resending it could
answer twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    cli,
    judge_messages,
    nothing_wrong,
    seal,
    send_dm,
    unfinished_runs,
    until,
)

SIZES: dict[str, int] = {"full": 20, "reduced": 6}  # kills
PREFIX, BASE, SEED = "crash", 200_000, 20_240_602
RATE_PER_S = 50.0
SEND_LATENCY_S = 0.05  # a send takes this long to be answered: the window a kill can cut
UP_S = (0.3, 2.0)  # how long the daemon lives between kills, uniformly at random


async def _load(fake: FakeDingTalk, sent: list[str], stop: asyncio.Event) -> None:
    """Distinct DMs at a steady rate, whether or not the daemon is alive to take them."""
    started = time.monotonic()
    while not stop.is_set():
        i = len(sent)
        await asyncio.sleep(max(0.0, started + i / RATE_PER_S - time.monotonic()))
        sent.append(send_dm(fake, PREFIX, i, BASE))


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    kills_wanted = SIZES[size]
    rng = random.Random(SEED)
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, send_latency_s=SEND_LATENCY_S)
    await fake.start()
    daemon = DaemonProcess(fake, workdir / "crashloop")
    sent: list[str] = []
    stop = asyncio.Event()
    kills, restart_s, t0 = 0, [], time.monotonic()
    try:
        await daemon.start()
        load = asyncio.create_task(_load(fake, sent, stop))
        for _ in range(kills_wanted):
            await asyncio.sleep(rng.uniform(*UP_S))
            await daemon.kill9()
            kills += 1
            restart_s.append(await daemon.start())
        await asyncio.sleep(rng.uniform(*UP_S))
        stop.set()
        await load
        # Quiet: every callback acked, every run finished, then a moment for stragglers.
        quiet = await fake.wait_idle(60)
        store = daemon.store()
        try:
            quiet = quiet and await until(lambda: unfinished_runs(store, sent) == 0, 60, 0.2)
            await asyncio.sleep(1.0)
            figures = judge_messages(store, fake, sent, PREFIX, BASE)
        finally:
            store.close()
        wall_s = time.monotonic() - t0
    finally:
        stop.set()
        await daemon.stop()
        await fake.stop()

    report: dict[str, Any] = {
        "script": "crashloop",
        "size": size,
        "kills": kills,
        **figures,
        "quiet": quiet,
        "restart_s_max": round(max(restart_s), 2),
        "wall_s": round(wall_s, 2),
    }
    report["passed"] = bool(
        quiet and kills >= kills_wanted and figures["injected"] > 0 and nothing_wrong(figures)
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("crashloop", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
