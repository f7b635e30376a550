"""Jobs: recurring jobs over a virtual week on two replicas of one robot, with kills.

Fifty jobs (``[[jobs]]``, each its own owner) with schedules from every three hours to
weekly run on two runtimes that share one PostgreSQL schema, each beating every slot of
the heartbeat on one virtual clock, in a random order (so either may find a slot first).
Now and then a replica is killed: a crash armed right after DingTalk took a message
(``after_send``: the worst moment, the message out and no receipt yet), or its runtime
thrown away between beats; it starts again on the same store. A provider of the run's own
answers each slot with the job's current "batch", which changes every second slot, so about
half the slots have nothing new.

Pass, once quiet: every slot of every job that came due (counted independently from the
cron schedules) has exactly one record and one event, was dispatched, and its run ended;
it was delivered once (the platform holds its message) or silenced ``nothing_new`` — and
silent only when its words are the job's last delivered ones; no message reached the
platform twice or before its slot's time; nothing is left running.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from cronsim import CronSim

from agent.clock import VirtualClock
from agent.config import Settings
from agent.config.parts import JobEntry
from agent.contracts import EnrichedInvocation
from agent.crashpoints import Crash, CrashPoints
from agent.runtime import Runtime
from lab.fake import FakeDingTalk
from lab.reliability.daemon import Size, cli, seal
from skills.providers.base import ProviderReply

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
EPOCH = 1_767_225_600.0  # Thu 2026-01-01 08:00 in Shanghai
TZ = ZoneInfo("Asia/Shanghai")
INTERVAL_S = 600.0  # the heartbeat
SIZES: dict[str, tuple[int, float]] = {"full": (50, 7 * 86_400.0), "reduced": (10, 2 * 86_400.0)}
KILL_SHARE = 0.04  # of beats, each kills one replica (half by a crash after a send)
SEED = 20_261_207
REPLICAS = 2


def schedules(count: int, rng: random.Random) -> list[str]:
    """A mix: every three hours, daily, weekdays, weekly — at random minutes and hours."""
    made = []
    for i in range(count):
        minute, hour = rng.randrange(0, 60, 5), rng.randrange(0, 24)
        kind = i % 5
        if kind == 0:
            made.append(f"{minute} */3 * * *")
        elif kind in (1, 2):
            made.append(f"{minute} {hour} * * *")
        elif kind == 3:
            made.append(f"{minute} {hour} * * 1-5")
        else:
            made.append(f"{minute} {hour} * * {rng.randrange(0, 7)}")
    return made


class BatchProvider:
    """Answers a job's slot with the job's batch: the same words for two slots in a row."""

    name = "jobs-chaos"

    def __init__(self, schedules: dict[str, str], start: float) -> None:
        self.schedules = schedules
        self.start = start

    async def respond(self, invocation: EnrichedInvocation, skills: Sequence[Any]) -> ProviderReply:
        scheduled = invocation.event.scheduled
        assert scheduled is not None and scheduled.job_id and scheduled.due_at
        index = slot_index(self.schedules[scheduled.job_id], self.start, scheduled.due_at)
        return ProviderReply([{"kind": "reply", "text": words_of(scheduled.job_id, index)}])


def words_of(job_id: str, index: int) -> str:
    return f"{job_id} 第 {index // 2} 批"


def due_slots(schedule: str, after: float, until: float) -> list[float]:
    """The schedule's slots in (after, until], from cron alone (not dta's own planning)."""
    slots = []
    for moment in CronSim(schedule, datetime.fromtimestamp(after, TZ)):
        if moment.timestamp() > until:
            break
        if moment.timestamp() > after:
            slots.append(moment.timestamp())
    return slots


def slot_index(schedule: str, start: float, slot: float) -> int:
    return len(due_slots(schedule, start, slot)) - 1


def _settings(fake: FakeDingTalk, schema: str, entries: list[JobEntry], url: str) -> Settings:
    return Settings(
        store_url=url,
        store_schema=schema,
        openapi_base_url=fake.base_url,
        webhook_origins=[fake.base_url],
        client_id=fake.app_key,
        client_secret=fake.app_secret,
        robot_code=fake.robot_code,
        heartbeat_interval_s=INTERVAL_S,
        jobs=entries,
        send_gap_s=0,
        run_lease_s=60,
        ai_label="off",
        read_timeout_s=5.0,
    )


class Replicas:
    """The two runtimes, each killed and started again on the same store."""

    def __init__(self, settings: Settings, clock: VirtualClock, provider: BatchProvider) -> None:
        self.settings, self.clock, self.provider = settings, clock, provider
        self.runtimes: list[Runtime] = []
        self.crashes: list[CrashPoints] = []
        self.kills = Counter[str]()

    async def start(self) -> None:
        for _ in range(REPLICAS):
            self.crashes.append(CrashPoints())
            self.runtimes.append(await self._boot(self.crashes[-1]))

    async def _boot(self, crash: CrashPoints) -> Runtime:
        runtime = Runtime(self.settings, clock=self.clock, crash=crash, provider=self.provider)
        assert runtime.heartbeat is not None
        runtime.heartbeat.anchor = EPOCH
        await runtime.start()
        return runtime

    async def restart(self, i: int, why: str) -> None:
        self.kills[why] += 1
        await self.runtimes[i].aclose()
        self.crashes[i] = CrashPoints()
        self.runtimes[i] = await self._boot(self.crashes[i])

    async def beat(self, rng: random.Random) -> None:
        order = list(range(REPLICAS))
        rng.shuffle(order)
        for i in order:
            assert self.runtimes[i].heartbeat is not None
            self.runtimes[i].heartbeat.beat()
        if rng.random() < KILL_SHARE:
            victim = rng.randrange(REPLICAS)
            if rng.random() < 0.5:
                self.crashes[victim].arm("after_send")
            else:
                await self.restart(victim, "thrown away between beats")
        await self.drain()

    async def drain(self) -> None:
        for _ in range(10):
            crashed = False
            for i in range(REPLICAS):
                try:
                    await self.runtimes[i].drain_store()
                except Crash:
                    await self.restart(i, "crash after a send")
                    crashed = True
            if not crashed:
                return

    async def close(self) -> None:
        for runtime in self.runtimes:
            await runtime.aclose()


def judge(store: Any, fake: FakeDingTalk, jobs: dict[str, str], start: float, end: float) -> dict:
    """The figures, each of which must be zero but ``slots`` and the deliveries."""
    figures = Counter[str]()
    received = Counter(m.text for m in fake.received)
    first_seen = {}
    for message in fake.received:
        first_seen.setdefault(message.text, message.time)
    for job_id, schedule in jobs.items():
        records = {r.due_at: r for r in store.jobs.runs(job_id, 10_000)}
        last_words = None
        for index, slot in enumerate(due_slots(schedule, start, end)):
            figures["slots"] += 1
            record = records.pop(slot, None)
            if record is None or record.outcome != "dispatched" or record.event_id is None:
                figures["slot_not_dispatched"] += 1
                continue
            run = store.events.get_run(record.event_id)
            if run is None or not run.state.is_finished:
                figures["run_unfinished"] += 1
                continue
            words = words_of(job_id, index)
            silent = [r.reason for r in store.actions.receipts(record.event_id) if r.reason]
            if "nothing_new" in silent:
                figures["silent_nothing_new"] += 1
                if words != last_words:
                    figures["silent_with_news"] += 1
                continue
            if received[words] < 1:
                figures["slot_lost"] += 1
                continue
            figures["delivered"] += 1
            if first_seen[words] < slot:
                figures["delivered_early"] += 1
            last_words = words
        figures["slot_recorded_twice_or_unknown"] += len(records)
    figures["message_twice"] = sum(1 for count in received.values() if count > 1)
    return dict(figures)


MUST_BE_ZERO = (
    "slot_not_dispatched",
    "run_unfinished",
    "silent_with_news",
    "slot_lost",
    "delivered_early",
    "slot_recorded_twice_or_unknown",
    "message_twice",
)


async def run(size: Size, workdir: Path, url: str = DEFAULT_URL) -> dict[str, Any]:
    count, span = SIZES[size]
    rng = random.Random(SEED)
    clock = VirtualClock(EPOCH)
    fake = FakeDingTalk(clock)
    await fake.start()
    schema = f"reliability_jobs_{uuid.uuid4().hex[:10]}"
    made = schedules(count, rng)
    entries = [
        JobEntry(name=f"j{i:02d}", schedule=s, owner=f"owner{i:02d}", instruction=f"汇总 {i}")
        for i, s in enumerate(made)
    ]
    jobs = {f"cfg_j{i:02d}": s for i, s in enumerate(made)}
    replicas = Replicas(_settings(fake, schema, entries, url), clock, BatchProvider(jobs, EPOCH))
    try:
        await replicas.start()
        beats = 0
        moment = EPOCH
        while moment + INTERVAL_S <= EPOCH + span:
            moment += INTERVAL_S
            clock.advance_to(moment)
            await replicas.beat(rng)
            beats += 1
        await replicas.drain()
        figures = judge(replicas.runtimes[0].store, fake, jobs, EPOCH, EPOCH + span)
    finally:
        await replicas.close()
        await fake.stop()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    report = {
        "script": "jobs",
        "size": size,
        "jobs": count,
        "virtual_days": span / 86_400,
        "replicas": REPLICAS,
        "beats": beats,
        "kills": dict(replicas.kills),
        "figures": figures,
        "passed": all(figures.get(key, 0) == 0 for key in MUST_BE_ZERO) and figures["slots"] > 0,
    }
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("jobs", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
