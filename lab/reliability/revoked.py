"""Credentials revoked for a while: every in-flight reply of that robot still goes, once.

A phase of ``dta lab reliability chaos``. One daemon serves two robots (``[[robots]]``);
every reply goes by the OpenAPI (the platform hands out session webhooks already expired),
so each send needs its robot's access token. While DMs flow to both robots, one robot's
credentials are revoked for ``REVOKED_S`` (its tokens stop working at once and the token
endpoint refuses it): nothing it sends can leave, so each send asks for a token again with
back-off (``token_wait_s``) and goes once one is given. Judged from the platform: every DM
answered exactly once (``lost``, ``answered_twice``), by the robot it was sent to
(``answered_by_another_robot``), and the revoked robot's replies held up meanwhile went
after it (``delayed_by_the_revocation``).

Before, a send that could not get a token was failed for good: 27 of 160 of that robot's
in-flight replies were lost.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.daemon import (
    DaemonProcess,
    by_another_robot,
    replies_per_user,
    send_dm,
    until,
    wrong_answers,
)

PREFIX, BASE = "rev", 800_000
ROBOTS = ("rev-a", "rev-b")
REVOKED_S = 15.0
RATE_PER_S = 10.0
SIZES: dict[str, float] = {"full": 30.0, "reduced": 12.0}  # seconds of load
REVOKE_AT_S = 3.0


def robot_of(i: int) -> str:
    return ROBOTS[i % len(ROBOTS)]


async def revoked_phase(
    workdir: Path, size: str, secrets: list[str], config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``config``: more daemon settings (``{"token_wait_s": 0}`` shows the old behaviour)."""
    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0, max_redeliveries=50)
    await fake.start()
    robots = []
    for code in ROBOTS:
        app = fake.add_robot(code)
        secrets.append(app.app_secret)
        robots.append(
            {"robot_code": code, "client_id": app.app_key, "client_secret": app.app_secret}
        )
    fake.arm_fault({"webhook": {"expired": True}})  # every reply by the OpenAPI
    daemon = DaemonProcess(fake, workdir / "revoked", {"robots": robots, **(config or {})})
    sent: list[str] = []
    sent_at: list[float] = []
    revoked_at = 0.0
    t0 = time.monotonic()
    try:
        await daemon.start()
        load_s = SIZES[size]
        while time.monotonic() - t0 < load_s:
            i = len(sent)
            sent.append(send_dm(fake, PREFIX, i, BASE, robot_of(i)))
            sent_at.append(time.time())
            if not revoked_at and time.monotonic() - t0 >= REVOKE_AT_S:
                fake.revoke(ROBOTS[0], REVOKED_S)
                revoked_at = time.time()
            await asyncio.sleep(1 / RATE_PER_S)
        users = {f"{PREFIX}-u{i}" for i in range(len(sent))}
        answered = await until(lambda: users <= set(replies_per_user(fake)), 90, 0.2)
        quiet = await fake.wait_idle(30)
        await asyncio.sleep(1.0)  # room for a late duplicate
    finally:
        await daemon.stop()
        await fake.stop()
    per_user = replies_per_user(fake)
    revoked_robot = [i for i in range(len(sent)) if robot_of(i) == ROBOTS[0]]
    held = {  # the revoked robot's DMs that came while it could not speak
        f"{PREFIX}-u{i}"
        for i in revoked_robot
        if revoked_at <= sent_at[i] < revoked_at + REVOKED_S - 1
    }
    delayed = sum(
        1 for m in fake.received if set(m.user_ids) & held and m.time >= revoked_at + REVOKED_S - 1
    )
    report = {
        "injected": len(sent),
        "injected_to_the_revoked_robot": len(revoked_robot),
        "revoked_s": REVOKED_S,
        "answered_once": sum(per_user.get(f"{PREFIX}-u{i}", 0) == 1 for i in range(len(sent))),
        "lost": sum(per_user.get(f"{PREFIX}-u{i}", 0) == 0 for i in range(len(sent))),
        "answered_twice": sum(per_user.get(f"{PREFIX}-u{i}", 0) > 1 for i in range(len(sent))),
        "wrong_answers": wrong_answers(fake, PREFIX, BASE),
        "answered_by_another_robot": by_another_robot(fake, PREFIX, robot_of),
        "delayed_by_the_revocation": delayed,
        "quiet": quiet,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(
        answered
        and quiet
        and report["lost"] == 0
        and report["answered_twice"] == 0
        and report["wrong_answers"] == 0
        and report["answered_by_another_robot"] == 0
        and delayed > 0  # the revocation struck replies in flight
    )
    return report
