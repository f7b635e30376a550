"""Connection chaos: dropped, silent and refused connections lose no message.

Stream Mode's failures are about the socket, not the bot: the gateway cuts it, it goes
silent while looking open (a zombie), or it refuses new connections for a while. While
distinct DMs flow at a steady rate, the fake strikes at random — a drop or a zombie, each
sometimes followed by a refusal of 1–5 s — and waits for the daemon to recover before the
next strike. The daemon runs with a 0.5 s keepalive and a 0.1–2 s reconnect backoff.

Recovery time is measured from the moment the platform would accept the daemon again (the
end of the refusal; for a plain drop or zombie, the strike itself) to the first reply to a
message sent after the strike: such a message can only be answered once the stream works.

The daemon serves two robots (``[[robots]]``, each with its own app, store and Stream
connection); messages alternate between them and each strike hits one robot's connection
(a refusal refuses both: the gateway is shared).

Pass: every injected message answered exactly once (none lost, none twice) and by the robot
it was sent to, and every strike recovered within 30 s. Then the ``pieces`` fault
(``lab/reliability/pieces.py``, on a platform of its own): long answers with charts while
the daemon is killed -9; every chunk and chart once, or the person told; none twice. Last,
``revoked`` (``lab/reliability/revoked.py``): one of two robots' credentials revoked for
15 s while replies go by the OpenAPI; every reply of that robot still goes, once.
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
    by_another_robot,
    cli,
    replies_per_user,
    seal,
    send_dm,
    until,
    wrong_answers,
)
from lab.reliability.pieces import pieces_phase
from lab.reliability.revoked import revoked_phase

SIZES: dict[str, int] = {"full": 16, "reduced": 4}  # strikes
PIECES: dict[str, int] = {"full": 40, "reduced": 12}  # long answers of the pieces fault
PREFIX, BASE, SEED = "chaos", 300_000, 20_240_603
RATE_PER_S = 20.0
KINDS = ("drop", "zombie", "drop+refuse", "zombie+refuse")
REFUSE_S = (1.0, 5.0)
GAP_S = (0.5, 2.5)  # calm between a recovery and the next strike
RECOVERY_TARGET_S = 30.0
ROBOTS = ("chaos-a", "chaos-b")


def robot_of(i: int) -> str:
    """The robot message ``i`` is sent to: the two take turns."""
    return ROBOTS[i % len(ROBOTS)]


async def _load(fake: FakeDingTalk, sent: list[str], stop: asyncio.Event) -> None:
    started = time.monotonic()
    while not stop.is_set():
        i = len(sent)
        await asyncio.sleep(max(0.0, started + i / RATE_PER_S - time.monotonic()))
        sent.append(send_dm(fake, PREFIX, i, BASE, robot_of(i)))


def _first_reply_after(fake: FakeDingTalk, mark: int, first_index: int, robot: str) -> float | None:
    """When the platform first accepted a reply by ``robot`` to message ``first_index`` or
    a later one."""
    for message in fake.received[mark:]:
        if message.robot_code != robot:
            continue
        for user in message.user_ids:
            index = user.removeprefix(f"{PREFIX}-u")
            if index.isdigit() and int(index) >= first_index:
                return message.time
    return None


async def _strike(
    fake: FakeDingTalk, rng: random.Random, sent: list[str], kind: str, robot: str
) -> dict[str, Any]:
    """Arm one fault on ``robot``'s connection and wait for the first reply that proves
    its stream works again."""
    spec: dict[str, Any] = {"drop" if kind.startswith("drop") else "zombie": True}
    refuse_s = round(rng.uniform(*REFUSE_S), 2) if kind.endswith("refuse") else 0.0
    if refuse_s:
        spec["refuse_s"] = refuse_s
    connections = len(fake.stream.connections)
    mark, first_index = len(fake.received), len(sent)
    struck_at = time.time()
    fake.arm_fault({"stream": spec}, robot=robot)
    accepting_at = struck_at + refuse_s
    # Wait until a message sent after the strike has been answered.
    reply_at: list[float] = []

    def recovered() -> bool:
        at = _first_reply_after(fake, mark, first_index, robot)
        if at is not None:
            reply_at.append(at)
        return at is not None

    await until(recovered, refuse_s + RECOVERY_TARGET_S + 10, 0.02)
    recovery = round(reply_at[0] - accepting_at, 3) if reply_at else None
    return {
        "kind": kind,
        "robot": robot,
        "refuse_s": refuse_s,
        "recovery_s": recovery,
        "reconnected": len(fake.stream.connections) > connections,
    }


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    rng = random.Random(SEED)
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, max_redeliveries=50)
    await fake.start()
    robots = []
    for code in ROBOTS:
        app = fake.add_robot(code)
        robots.append(
            {"robot_code": code, "client_id": app.app_key, "client_secret": app.app_secret}
        )
    config = {"open_connection_timeout_s": 2.0, "robots": robots}
    daemon = DaemonProcess(fake, workdir / "chaos", config)
    sent: list[str] = []
    stop = asyncio.Event()
    strikes: list[dict[str, Any]] = []
    t0 = time.monotonic()
    try:
        await daemon.start()
        load = asyncio.create_task(_load(fake, sent, stop))
        kinds = [KINDS[n % len(KINDS)] for n in range(SIZES[size])]
        rng.shuffle(kinds)
        for number, kind in enumerate(kinds):
            await asyncio.sleep(rng.uniform(*GAP_S))
            strikes.append(await _strike(fake, rng, sent, kind, robot_of(number)))
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
        "robots": list(ROBOTS),
        "answered_by_another_robot": by_another_robot(fake, PREFIX, robot_of),
        "injected_per_robot": {
            code: sum(robot_of(i) == code for i in range(len(sent))) for code in ROBOTS
        },
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
        and report["answered_by_another_robot"] == 0
        and report["unrecovered_strikes"] == 0
        and all(s["reconnected"] for s in strikes)
        and max(recoveries, default=RECOVERY_TARGET_S + 1) <= RECOVERY_TARGET_S
    )
    secrets = [fake.app_secret, *(fake.add_robot(code).app_secret for code in ROBOTS)]
    report["pieces"] = await _pieces(workdir, size, rng, secrets)
    report["revoked"] = await revoked_phase(workdir, size, secrets)
    report["passed"] = (
        report["passed"] and report["pieces"]["passed"] and report["revoked"]["passed"]
    )
    return seal(report, secrets)


async def _pieces(
    workdir: Path, size: Size, rng: random.Random, secrets: list[str]
) -> dict[str, Any]:
    """The pieces fault (lab/reliability/pieces.py): long answers with charts while the
    daemon is killed -9, on a platform of its own."""
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, max_redeliveries=50)
    await fake.start()
    secrets.append(fake.app_secret)
    try:
        return await pieces_phase(fake, workdir / "chaos", PIECES[size], rng, {})
    finally:
        await fake.stop()


def main(argv: list[str] | None = None) -> int:
    return cli("chaos", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
