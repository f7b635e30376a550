"""Reactions under kill -9 and transient 503s: none is left on a person's message.

With ``ack_style = "reaction"`` a run slower than ``ack_after_s`` puts 🤔 on the person's
message and recalls it when the run ends. DMs arrive behind a slow model (the lab's fake
model behind the ``openai`` provider, 1-3 s an answer); the daemon is killed -9 at random
moments and started again, and every few recalls DingTalk answers 503. Judged from the
platform: every DM answered once, and after recovery no reaction still on a message
(``left_on_messages``); ``reactions_put`` shows the signal was in use.

Before (issue 38), a reaction was recalled only if its put was accepted, and only once: a
put a kill cut, or one refused recall, left it there for good.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.models.fake_model import FakeModel
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    cli,
    fake_model_config,
    replies_per_user,
    seal,
    unfinished_runs,
    until,
)

SIZES: dict[str, int] = {"full": 60, "reduced": 20}
PREFIX, SEED = "react", 20_261_203
KILL_EVERY_S = (1.0, 2.5)
DOWN_S = (0.1, 0.4)
CONFIG: dict[str, Any] = {"ack_style": "reaction", "ack_after_s": 0.3, "recovery_interval_s": 1}


def _script(count: int, rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    answer = {"kind": "reply", "text": "好的，看过了。"}
    return {
        f"{PREFIX}-{i:04d}": [{"json": answer, "delay_s": rng.uniform(1, 3)}] * 3
        for i in range(count)
    }


async def _faults_and_kills(
    fake: FakeDingTalk, daemon: DaemonProcess, rng: random.Random, done: asyncio.Event
) -> int:
    kills = 0
    while not done.is_set():
        await asyncio.sleep(rng.uniform(*KILL_EVERY_S))
        if done.is_set():
            break
        fake.arm_fault({"reaction_recall": {"status": 503, "times": 1}})
        if rng.random() < 0.5:
            await daemon.kill9()
            kills += 1
            await asyncio.sleep(rng.uniform(*DOWN_S))
            await daemon.start()
    return kills


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    count = SIZES[size]
    rng = random.Random(SEED)
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=2.0)
    await fake.start()
    model = FakeModel(_script(count, rng))
    await model.start()
    config = {
        **CONFIG,
        **fake_model_config(model.base_url),
    }
    daemon = DaemonProcess(fake, workdir / "reactions", config)
    done = asyncio.Event()
    t0 = time.monotonic()
    try:
        await daemon.start()
        sent = []
        chaos = asyncio.create_task(_faults_and_kills(fake, daemon, rng, done))
        for i in range(count):
            msg_id = f"{PREFIX}-{i:04d}"
            fake.inject({"msg": msg_id, "from": f"{PREFIX}-u{i}", "text": f"第{i}个问题"})
            sent.append(msg_id)
            await asyncio.sleep(0.15)

        def finished() -> bool:
            store = daemon.store()
            try:
                return unfinished_runs(store, sent) == 0
            finally:
                store.close()

        quiet = await until(finished, 60 + count, 0.3)
        done.set()
        kills = await chaos
        if not daemon.running:
            await daemon.start()
        # the recovery pass (every second here) retries refused recalls with back-off
        left = await until(lambda: not any(not r["recalled"] for r in fake.reactions), 40, 0.5)
        quiet = quiet and await fake.wait_idle(30)
    finally:
        done.set()
        await daemon.stop()
        await model.stop()
        await fake.stop()
    per_user = replies_per_user(fake)
    report: dict[str, Any] = {
        "script": "reactions",
        "size": size,
        "injected": count,
        "answered_once": sum(per_user.get(f"{PREFIX}-u{i}", 0) == 1 for i in range(count)),
        "reactions_put": len(fake.reactions),
        "left_on_messages": sum(not r["recalled"] for r in fake.reactions),
        "kills": kills,
        "quiet": quiet,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(
        quiet
        and left
        and report["left_on_messages"] == 0
        and report["reactions_put"] > 0
        and report["kills"] > 0
        and report["answered_once"] == count
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("reactions", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
