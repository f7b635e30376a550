"""Redelivery storm: every msgId answered once, however often and whenever it comes back.

DingTalk redelivers a callback whose ack it did not see, and a bot that dedupes in memory
answers twice after a restart. Here 1,000 distinct msgIds (reduced: 200) arrive as 10,000
frames (reduced: 2,000): each original together with redeliveries sent back to back in a
shuffled order (so most arrive while the first is still being worked on), more after the
reply, and more after a daemon restart midway (SIGTERM, then a fresh process on the same
store; ``kill -9`` is the crash loop's job) — half the msgIds are first sent before the
restart, half after. The fake redelivers on its own too (short delay) when an ack is slow;
those frames are counted as well.

Pass: exactly one reply per msgId on the platform, exactly one run per msgId in the store,
and the store's duplicate count equals the frames the daemon acked minus the distinct msgIds.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    cli,
    question,
    replies_per_user,
    seal,
    unfinished_runs,
    until,
    wrong_answers,
)

SIZES: dict[str, tuple[int, int]] = {"full": (1_000, 10_000), "reduced": (200, 2_000)}
PREFIX, BASE, SEED = "storm", 100_000, 20_240_601
CHUNK_FRAMES = 250  # frames sent back to back before waiting for their acks (pacing)
REDELIVERY_DELAY_S = 3.0


class Storm:
    """Sends originals and redeliveries, remembering which frame is which."""

    def __init__(self, fake: FakeDingTalk, rng: random.Random) -> None:
        self.fake, self.rng = fake, rng
        self.sent: set[str] = set()
        self.frame_ids: list[str] = []
        self.counts = {"before_reply": 0, "after_reply": 0, "after_restart": 0}
        self.replied: set[str] = set()
        self.before_restart: set[str] = set()  # msgIds whose original the first daemon got
        self._seen = 0  # how much of fake.received is folded into ``replied``

    def user(self, i: int) -> str:
        return f"{PREFIX}-u{i}"

    def restarted(self) -> None:
        self.before_restart = set(self.sent)

    def send(self, i: int) -> None:
        """The first frame of a msgId is its original; every later one a redelivery."""
        msg_id = f"{PREFIX}-{i}"
        if msg_id not in self.sent:
            self.sent.add(msg_id)
            out = self.fake.inject({"msg": msg_id, "from": self.user(i), "text": question(i, BASE)})
        else:
            for message in self.fake.received[self._seen :]:
                self.replied.update(message.user_ids)
            self._seen = len(self.fake.received)
            replied = self.user(i) in self.replied
            key = "after_reply" if replied else "before_reply"
            if msg_id in self.before_restart:
                key = "after_restart"
            self.counts[key] += 1
            out = self.fake.redeliver(msg_id)
        self.frame_ids.append(out["frame_message_id"])

    async def play(self, indexes: Iterable[int]) -> None:
        """Send in the given order, pausing every chunk until the daemon acked it all."""
        frames = self.fake.stream.frames
        for n, i in enumerate(indexes, start=1):
            self.send(i)
            if n % CHUNK_FRAMES == 0:
                chunk = self.frame_ids[-CHUNK_FRAMES:]
                await until(lambda c=chunk: all(frames[f].ack_code is not None for f in c), 60)

    def shuffled(self, items: list[int]) -> list[int]:
        items = list(items)
        self.rng.shuffle(items)
        return items


def _spread(rng: random.Random, ids: list[int], total: int) -> list[int]:
    """``total`` picks from ``ids``, each id as evenly as possible, in random order."""
    picks = [ids[n % len(ids)] for n in range(total)]
    rng.shuffle(picks)
    return picks


async def _answered(fake: FakeDingTalk, users: list[str], timeout: float) -> bool:
    return await until(lambda: set(users) <= set(replies_per_user(fake)), timeout, 0.1)


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    distinct, frames = SIZES[size]
    rng = random.Random(SEED)
    extra = frames - distinct
    first, second = list(range(distinct // 2)), list(range(distinct // 2, distinct))
    # Redelivery budget: with the original, after its reply, and after the restart.
    with_first, with_second = extra * 15 // 100, extra * 15 // 100
    reply_first, restart_first = extra * 20 // 100, extra * 25 // 100
    reply_last = extra - with_first - with_second - reply_first - restart_first

    fake = FakeDingTalk(SystemClock(), redelivery_delay_s=REDELIVERY_DELAY_S)
    await fake.start()
    daemon = DaemonProcess(fake, workdir / "storm")
    storm = Storm(fake, rng)
    t0 = time.monotonic()
    try:
        await daemon.start()
        # Before the restart: originals of the first half mixed with their redeliveries.
        await storm.play(storm.shuffled(first + _spread(rng, first, with_first)))
        first_ok = await _answered(fake, [storm.user(i) for i in first], 60)
        await storm.play(_spread(rng, first, reply_first))
        # Every frame acked before the stop, so the frame count below is exact.
        first_idle = await fake.wait_idle(60)
        await daemon.terminate()
        await daemon.start()
        storm.restarted()
        # After it: the second half's originals and redeliveries, mixed with the first's.
        mixed = second + _spread(rng, second, with_second) + _spread(rng, first, restart_first)
        await storm.play(storm.shuffled(mixed))
        second_ok = await _answered(fake, [storm.user(i) for i in second], 60)
        await storm.play(_spread(rng, first + second, reply_last))
        idle = await fake.wait_idle(60)
        store = daemon.store()
        try:
            ids = [f"{PREFIX}-{i}" for i in range(distinct)]
            await until(lambda: unfinished_runs(store, ids) == 0, 60, 0.2)
            await asyncio.sleep(1.0)  # room for a late duplicate reply to show up
            wall_s = time.monotonic() - t0
            counts, runs = store.counts(), store.work.runs_per_event()
            unfinished = unfinished_runs(store, ids)
        finally:
            store.close()
    finally:
        await daemon.stop()
        await fake.stop()

    per_user = replies_per_user(fake)
    not_once = sum(per_user.get(storm.user(i), 0) != 1 for i in range(distinct))
    runs_not_once = sum(runs.get(f"{PREFIX}-{i}", 0) != 1 for i in range(distinct))
    callbacks = [r for r in fake.stream.frames.values() if r.kind == "callback"]
    acked = sum(r.ack_code == 200 for r in callbacks)
    automatic = len(callbacks) - len(storm.frame_ids)
    report: dict[str, Any] = {
        "script": "storm",
        "size": size,
        "distinct_msgids": distinct,
        "frames_injected": len(storm.frame_ids),
        "redeliveries_before_reply": storm.counts["before_reply"],
        "redeliveries_after_reply": storm.counts["after_reply"],
        "redeliveries_after_restart": storm.counts["after_restart"],
        "automatic_redeliveries": automatic,
        "frames_acked": acked,
        "events_stored": counts.events,
        "duplicates_counted": counts.duplicates,
        "duplicates_expected": acked - distinct,
        "replies": len(fake.received),
        "msgids_not_answered_once": not_once,
        "wrong_answers": wrong_answers(fake, PREFIX, BASE),
        "runs_not_once": runs_not_once,
        "unfinished_runs": unfinished,
        "restarts": daemon.starts - 1,
        "wall_s": round(wall_s, 2),
    }
    report["passed"] = bool(
        first_ok
        and second_ok
        and first_idle
        and idle
        and not_once == 0
        and runs_not_once == 0
        and unfinished == 0
        and report["wrong_answers"] == 0
        and len(fake.received) == distinct
        and counts.events == distinct
        and counts.duplicates == acked - distinct
        and len(storm.frame_ids) == frames
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("storm", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
