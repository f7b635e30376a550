"""Soak: 100,000 events through the daemon with flat memory and a bounded store.

A daemon left running for weeks dies of slow leaks, not of one bad frame: a cache keyed by
something unbounded, a list that is only appended to, a store that grows faster than the
work it records. Here 100,000 distinct DMs (reduced: 5,000) go through the daemon
subprocess at a steady rate, capped at ``RATE_PER_S`` and held back (at most ``WINDOW``
messages unanswered) so the run measures the daemon at a pace it sustains rather than an
ever-growing backlog. The daemon's resident memory (VmRSS) is sampled after a warm-up and
at the end.

Pass: every message answered exactly once, RSS growth from warm-up to end ≤ 10%.
Reported too: store bytes per event (after a clean stop, WAL checkpointed) and events/s.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.daemon import DaemonProcess, Size, cli, seal, send_dm, until

# The warm-up fills what the daemon bounds by count (5,000 identities and 4,096 msgIds in
# memory, 4,096 conversations' send spacing): growth is measured once those are full, or a
# short run would measure them filling up rather than a leak.
SIZES: dict[str, tuple[int, int]] = {"full": (100_000, 5_000), "reduced": (5_000, 5_000)}
PREFIX, BASE = "soak", 400_000
RATE_PER_S = 250.0
WINDOW = 250  # most messages injected but not yet answered before the sender waits
GROWTH_TARGET_PCT = 10.0
SAMPLES = 20


class Replies:
    """Folds ``fake.received`` into per-user counts incrementally (it grows to N items)."""

    def __init__(self, fake: FakeDingTalk) -> None:
        self.fake = fake
        self.seen = 0
        self.per_user: dict[str, int] = {}

    def total(self) -> int:
        received = self.fake.received
        for message in received[self.seen :]:
            for user in message.user_ids:
                self.per_user[user] = self.per_user.get(user, 0) + 1
        self.seen = len(received)
        return self.seen


async def _send(
    fake: FakeDingTalk, replies: Replies, start: int, count: int, on_progress: Any = None
) -> None:
    """Messages ``start .. start+count-1`` at the capped rate, never more than WINDOW open."""
    began = time.monotonic()
    for n in range(count):
        await asyncio.sleep(max(0.0, began + n / RATE_PER_S - time.monotonic()))
        if start + n - replies.total() >= WINDOW:
            await until(lambda i=start + n: i - replies.total() < WINDOW, 120, 0.005)
        send_dm(fake, PREFIX, start + n, BASE)
        if on_progress is not None:
            on_progress(n + 1)


def _prune(fake: FakeDingTalk) -> None:
    """Forget the fake's bookkeeping for settled messages, so the harness stays small.

    The fake keeps every frame, callback and session forever (a lab case is short); over
    100,000 messages that would make the harness, not the daemon, the thing that slows.
    Only callbacks already acked are dropped; sessions and replies are kept.
    """
    stream = fake.stream
    for msg_id in [m for m, c in stream.callbacks.items() if c.acked]:
        del stream.callbacks[msg_id]
        fake.inbound.pop(msg_id, None)
    done = [f for f, r in stream.frames.items() if r.ack_code is not None]
    for frame_id in done:
        del stream.frames[frame_id]


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    events, warmup = SIZES[size]
    fake = FakeDingTalk(SystemClock())
    await fake.start()
    # The default daily write budget (10,000) would rightly stop a 100,000-reply run.
    daemon = DaemonProcess(fake, workdir / "soak", {"write_budget_per_day": 10_000_000})
    replies = Replies(fake)
    samples: list[tuple[int, int | None]] = []
    every = max(1, events // SAMPLES)

    def progress(n: int) -> None:
        if n % every == 0:
            samples.append((n, daemon.rss_kb()))
        if n % 5_000 == 0:
            _prune(fake)

    try:
        await daemon.start()
        await _send(fake, replies, 0, warmup)
        warm = await until(lambda: replies.total() >= warmup, 60, 0.05)
        await asyncio.sleep(0.5)
        rss_start = daemon.rss_kb()
        t0 = time.monotonic()
        await _send(fake, replies, warmup, events, progress)
        done = await until(lambda: replies.total() >= warmup + events, 120, 0.02)
        seconds = time.monotonic() - t0
        await asyncio.sleep(0.5)
        rss_end = daemon.rss_kb()
        alive = daemon.running
        exit_status = await daemon.terminate()
    finally:
        await daemon.stop()
        await fake.stop()

    store = daemon.store()
    try:
        counts = store.counts()
    finally:
        store.close()
    db_bytes = daemon.store_path.stat().st_size
    replies.total()
    per_user = replies.per_user
    total = warmup + events
    not_once = sum(per_user.get(f"{PREFIX}-u{i}", 0) != 1 for i in range(total))
    growth = (rss_end - rss_start) / rss_start * 100 if rss_start and rss_end else None
    report: dict[str, Any] = {
        "script": "soak",
        "size": size,
        "events": events,
        "warmup_events": warmup,
        "events_stored": counts.events,
        "replies": len(fake.received),
        "not_answered_once": not_once,
        "seconds": round(seconds, 2),
        "events_per_s": round(events / seconds, 1),
        "rate_cap_per_s": RATE_PER_S,
        "rss_start_kb": rss_start,
        "rss_end_kb": rss_end,
        "rss_growth_pct": round(growth, 2) if growth is not None else None,
        "rss_target_pct": GROWTH_TARGET_PCT,
        "rss_samples_kb": [kb for _, kb in samples],
        "store_bytes": db_bytes,
        "store_bytes_per_event": round(db_bytes / max(1, counts.events)),
        "exit_status": exit_status,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(
        warm
        and done
        and alive
        and exit_status == 0
        and not_once == 0
        and counts.events == total
        and growth is not None
        and growth <= GROWTH_TARGET_PCT
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("soak", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
