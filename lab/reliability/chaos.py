"""Connection chaos: dropped, silent and refused connections lose no message.

Stream Mode's failures are about the socket, not the bot: the gateway cuts it, it goes
silent while looking open (a zombie), or it refuses new connections for a while. While
distinct DMs flow at a steady rate, the fake strikes at random — a drop or a zombie, each
sometimes followed by a refusal of 1–5 s — and waits for the daemon to recover before the
next strike. The daemon runs with a 0.5 s keepalive and a 0.1–2 s reconnect backoff.

Recovery time is measured from the moment the platform would accept the daemon again (the
end of the refusal; for a plain drop or zombie, the strike itself) to the first reply to a
message sent after the strike: such a message can only be answered once the stream works.

Pass: every injected message answered exactly once (none lost, none twice), and every
strike recovered within 30 s.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    cli,
    replies_per_user,
    seal,
    send_dm,
    until,
    wrong_answers,
)

SIZES: dict[str, int] = {"full": 16, "reduced": 4}  # strikes
PREFIX, BASE, SEED = "chaos", 300_000, 20_240_603
RATE_PER_S = 20.0
KINDS = ("drop", "zombie", "drop+refuse", "zombie+refuse")
REFUSE_S = (1.0, 5.0)
GAP_S = (0.5, 2.5)  # calm between a recovery and the next strike
RECOVERY_TARGET_S = 30.0


async def _load(fake: FakeDingTalk, sent: list[str], stop: asyncio.Event) -> None:
    started = time.monotonic()
    while not stop.is_set():
        i = len(sent)
        await asyncio.sleep(max(0.0, started + i / RATE_PER_S - time.monotonic()))
        sent.append(send_dm(fake, PREFIX, i, BASE))


def _first_reply_after(fake: FakeDingTalk, mark: int, first_index: int) -> float | None:
    """When the platform first accepted a reply to message ``first_index`` or a later one."""
    for message in fake.received[mark:]:
        for user in message.user_ids:
            index = user.removeprefix(f"{PREFIX}-u")
            if index.isdigit() and int(index) >= first_index:
                return message.time
    return None


async def _strike(
    fake: FakeDingTalk, rng: random.Random, sent: list[str], kind: str
) -> dict[str, Any]:
    """Arm one fault and wait for the first reply that proves the stream works again."""
    spec: dict[str, Any] = {"drop" if kind.startswith("drop") else "zombie": True}
    refuse_s = round(rng.uniform(*REFUSE_S), 2) if kind.endswith("refuse") else 0.0
    if refuse_s:
        spec["refuse_s"] = refuse_s
    connections = len(fake.stream.connections)
    mark, first_index = len(fake.received), len(sent)
    struck_at = time.time()
    fake.arm_fault({"stream": spec})
    accepting_at = struck_at + refuse_s
    # Wait until a message sent after the strike has been answered.
    reply_at: list[float] = []

    def recovered() -> bool:
        at = _first_reply_after(fake, mark, first_index)
        if at is not None:
            reply_at.append(at)
        return at is not None

    await until(recovered, refuse_s + RECOVERY_TARGET_S + 10, 0.02)
    recovery = round(reply_at[0] - accepting_at, 3) if reply_at else None
    return {
        "kind": kind,
        "refuse_s": refuse_s,
        "recovery_s": recovery,
        "reconnected": len(fake.stream.connections) > connections,
    }


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    rng = random.Random(SEED)
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, max_redeliveries=50)
    await fake.start()
    daemon = DaemonProcess(fake, workdir / "chaos", {"open_connection_timeout_s": 2.0})
    sent: list[str] = []
    stop = asyncio.Event()
    strikes: list[dict[str, Any]] = []
    t0 = time.monotonic()
    try:
        await daemon.start()
        load = asyncio.create_task(_load(fake, sent, stop))
        kinds = [KINDS[n % len(KINDS)] for n in range(SIZES[size])]
        rng.shuffle(kinds)
        for kind in kinds:
            await asyncio.sleep(rng.uniform(*GAP_S))
            strikes.append(await _strike(fake, rng, sent, kind))
        await asyncio.sleep(1.0)
        stop.set()
        await load
        users = {f"{PREFIX}-u{i}" for i in range(len(sent))}
        answered = await until(lambda: users <= set(replies_per_user(fake)), 60, 0.1)
        quiet = await fake.wait_idle(30)
        await asyncio.sleep(1.0)  # room for a late duplicate reply to show up
        alive = daemon.running
        wall_s = time.monotonic() - t0
    finally:
        stop.set()
        await daemon.stop()
        await fake.stop()

    per_user = replies_per_user(fake)
    recoveries = [s["recovery_s"] for s in strikes if s["recovery_s"] is not None]
    report: dict[str, Any] = {
        "script": "chaos",
        "size": size,
        "strikes": len(strikes),
        "strikes_by_kind": {k: sum(s["kind"] == k for s in strikes) for k in KINDS},
        "injected": len(sent),
        "answered_once": sum(per_user.get(f"{PREFIX}-u{i}", 0) == 1 for i in range(len(sent))),
        "lost": sum(per_user.get(f"{PREFIX}-u{i}", 0) == 0 for i in range(len(sent))),
        "answered_twice": sum(per_user.get(f"{PREFIX}-u{i}", 0) > 1 for i in range(len(sent))),
        "wrong_answers": wrong_answers(fake, PREFIX, BASE),
        "unrecovered_strikes": len(strikes) - len(recoveries),
        "recovery_s_max": max(recoveries, default=None),
        "recovery_s_median": round(statistics.median(recoveries), 3) if recoveries else None,
        "recovery_target_s": RECOVERY_TARGET_S,
        "connections": len(fake.stream.connections),
        "stray_acks": len(fake.stream.stray_acks),
        "daemon_alive": alive,
        "wall_s": round(wall_s, 2),
        "strike_log": strikes,
    }
    report["passed"] = bool(
        answered
        and quiet
        and alive
        and report["lost"] == 0
        and report["answered_twice"] == 0
        and report["wrong_answers"] == 0
        and report["unrecovered_strikes"] == 0
        and all(s["reconnected"] for s in strikes)
        and max(recoveries, default=RECOVERY_TARGET_S + 1) <= RECOVERY_TARGET_S
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("chaos", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
