"""Backlog: more sends than pool places on a slow platform, a stop in the middle of it, and
a burst behind a slow model; every message answered once, the first word on time.

Three phases on one daemon's store (``dta run`` as a subprocess, the fake DingTalk on
loopback), each judged from the platform's record and the store:

1. **Beyond the pool.** The platform takes 2 s to answer a send; far more DMs arrive at
   once than the pool has places (8) while 64 runs may be under way. A send waits for a
   place for as long as that takes: waiting is not failing. Pass: every DM answered exactly
   once, every receipt ``accepted`` (none ``failed`` or ``uncertain``: there is no fault).
2. **A stop while sends wait.** The platform takes 5 s; DMs arrive, the daemon is stopped
   with SIGTERM a second later (its grace is shorter than one send), then started again on
   the same store. Sends that had not left are recorded as not sent and go after the
   restart; those on the wire are owned up to as ``uncertain`` (and the platform has them).
   Pass: every DM on the platform exactly once.
3. **The first word on time.** A burst of DMs behind a model answering in 2-5 s (the lab's
   fake model behind the ``openai`` provider), more than ``max_concurrent_runs`` at once.
   Pass: every DM answered once, and each one's first visible message (its "稍等" or its
   answer) reached the platform within ``ack_after_s`` of its arrival, plus a tolerance
   for this two-core machine (``FIRST_WORD_SLACK_S``).
4. **Pieces** (``lab/reliability/pieces.py``). Long answers (four chunks, half with a chart)
   while the daemon is killed -9 at random moments and started again. Pass: every chunk
   and chart on the platform exactly once, or — a piece whose send a kill cut before the
   platform had it — the person told in one line; none twice.
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
from lab.models.labelled import labelled
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    answer,
    cli,
    fake_model_config,
    judge_messages,
    nothing_wrong,
    question,
    seal,
    send_dm,
    unfinished_runs,
    until,
)
from lab.reliability.pieces import pieces_phase

# (DMs beyond the pool, DMs at the stop, DMs in the burst, long answers killed mid-way)
SIZES: dict[str, tuple[int, int, int, int]] = {
    "full": (100, 48, 300, 40),
    "reduced": (40, 16, 60, 12),
}
SEED = 20_261_202
POOL_LATENCY_S, STOP_LATENCY_S = 2.0, 5.0
STOP_AFTER_S = 1.0
ACK_AFTER_S = 3.0
FIRST_WORD_SLACK_S = 1.5  # scheduling on a loaded two-core machine, not the daemon's delay
CONFIG: dict[str, Any] = {
    "max_concurrent_runs": 64,
    "http_max_connections": 8,
    "shutdown_grace_s": 2,
    "ack_after_s": ACK_AFTER_S,
    # Short, so a wait for a place far longer than it (the backlog's) shows at any size: a
    # send that counted the wait against it would fail after its retries.
    "connect_timeout_s": 1.0,
}


def _strict(figures: dict[str, Any]) -> bool:
    """Nothing wrong, and nothing owed: every DM on the platform once."""
    return nothing_wrong(figures) and figures["unanswered"] == 0


async def _beyond_the_pool(fake: FakeDingTalk, workdir: Path, count: int) -> dict[str, Any]:
    fake.send_latency_s = POOL_LATENCY_S
    daemon = DaemonProcess(fake, workdir / "pool", CONFIG)
    await daemon.start()
    prefix, base = "pool", 300_000
    t0 = time.monotonic()
    try:
        sent = [send_dm(fake, prefix, i, base) for i in range(count)]
        store = daemon.store()
        try:
            quiet = await until(lambda: unfinished_runs(store, sent) == 0, 30 + count, 0.2)
            figures = judge_messages(store, fake, sent, prefix, base)
            statuses = sorted({r.status.value for r in store.actions.receipts() if r.kind})
        finally:
            store.close()
    finally:
        await daemon.stop()
    report = {
        **figures,
        "receipt_statuses": statuses,
        "quiet": quiet,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(
        quiet and _strict(figures) and figures["uncertain"] == 0 and statuses == ["accepted"]
    )
    return report


async def _stop_while_waiting(fake: FakeDingTalk, workdir: Path, count: int) -> dict[str, Any]:
    fake.send_latency_s = STOP_LATENCY_S
    daemon = DaemonProcess(fake, workdir / "stop", CONFIG)
    await daemon.start()
    prefix, base = "stop", 400_000
    t0 = time.monotonic()
    try:
        sent = [send_dm(fake, prefix, i, base) for i in range(count)]
        await asyncio.sleep(STOP_AFTER_S)
        on_platform_at_stop = len(fake.received)
        code = await daemon.terminate(timeout=30)
        fake.send_latency_s = 0.0
        await daemon.start()
        store = daemon.store()
        try:
            quiet = await until(lambda: unfinished_runs(store, sent) == 0, 60, 0.2)
            quiet = quiet and await fake.wait_idle(30)
            figures = judge_messages(store, fake, sent, prefix, base)
        finally:
            store.close()
    finally:
        await daemon.stop()
    report = {
        **figures,
        "stop_exit_code": code,
        "on_platform_at_stop": on_platform_at_stop,
        "quiet": quiet,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(quiet and code == 0 and _strict(figures))
    return report


def _model_script(prefix: str, count: int, rng: random.Random) -> dict[str, list[dict[str, Any]]]:
    """Each DM's answer, 2-5 s late; keys are msgIds padded so none is inside another."""
    return {
        f"{prefix}-{i:04d}": [
            {"json": {"kind": "reply", "text": answer(i, 500_000)}, "delay_s": rng.uniform(2, 5)}
        ]
        for i in range(count)
    }


async def _first_word(
    fake: FakeDingTalk, workdir: Path, count: int, rng: random.Random
) -> dict[str, Any]:
    fake.send_latency_s = 0.0
    prefix, base = "burst", 500_000
    model = FakeModel(_model_script(prefix, count, rng))
    await model.start()
    config = {
        **CONFIG,
        "max_concurrent_runs": 16,  # the default: far fewer than the burst
        **fake_model_config(model.base_url),
    }
    daemon = DaemonProcess(fake, workdir / "burst", config)
    await daemon.start()
    arrived: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        start = len(fake.received)
        sent = []
        for i in range(count):
            msg_id = f"{prefix}-{i:04d}"
            fake.inject({"msg": msg_id, "from": f"{prefix}-u{i}", "text": question(i, base)})
            arrived[f"{prefix}-u{i}"] = fake.clock.now()
            sent.append(msg_id)
        store = daemon.store()
        try:
            quiet = await until(lambda: unfinished_runs(store, sent) == 0, 60 + count / 4, 0.2)
        finally:
            store.close()
    finally:
        await daemon.stop()
        await model.stop()
    first: dict[str, float] = {}
    answered: dict[str, int] = {}
    for message in fake.received[start:]:
        for user in message.user_ids:
            first.setdefault(user, message.time)
            whole = message.text == labelled(_answer_for(user, prefix))
            answered[user] = answered.get(user, 0) + whole
    delays = sorted(first[user] - arrived[user] for user in first)
    late = sum(delay > ACK_AFTER_S + FIRST_WORD_SLACK_S for delay in delays)
    report = {
        "injected": count,
        "answered_once": sum(n == 1 for n in answered.values()),
        "first_word_s_mean": round(sum(delays) / len(delays), 2) if delays else None,
        "first_word_s_p99": round(delays[int(0.99 * (len(delays) - 1))], 2) if delays else None,
        "first_word_s_max": round(delays[-1], 2) if delays else None,
        "first_word_late": late,
        "acks": sum(m.text.startswith("收到") for m in fake.received[start:]),
        "model_requests": len(model.requests),
        "quiet": quiet,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(
        quiet and len(first) == count and late == 0 and report["answered_once"] == count
    )
    return report


def _answer_for(user: str, prefix: str) -> str:
    return answer(int(user.removeprefix(f"{prefix}-u")), 500_000)


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    pool_count, stop_count, burst_count, pieces_count = SIZES[size]
    rng = random.Random(SEED)
    phases: dict[str, dict[str, Any]] = {}
    secrets = []
    for name, phase in (
        ("beyond_the_pool", lambda fake: _beyond_the_pool(fake, workdir, pool_count)),
        ("stop_while_waiting", lambda fake: _stop_while_waiting(fake, workdir, stop_count)),
        ("first_word", lambda fake: _first_word(fake, workdir, burst_count, rng)),
        ("pieces", lambda fake: pieces_phase(fake, workdir, pieces_count, rng, CONFIG)),
    ):
        fake = FakeDingTalk(SystemClock(), redelivery_delay_s=5.0)  # each phase its own
        await fake.start()
        secrets.append(fake.app_secret)
        try:
            phases[name] = await phase(fake)
        finally:
            await fake.stop()
    report: dict[str, Any] = {"script": "backlog", "size": size, **phases}
    report["passed"] = all(phase["passed"] for phase in phases.values())
    return seal(report, secrets)


def main(argv: list[str] | None = None) -> int:
    return cli("backlog", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
