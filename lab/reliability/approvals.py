"""Approvals: acts that wait for a click survive kill -9, wrong clickers and expiry.

A steady load of requests that need approval (each asker wants a to-do for a colleague:
``dingtalk.todo.create`` with another executor, so it waits for the asker's click on an
approval card) flows into the daemon, which runs the ``openai`` provider against the lab's
fake model. Clicks arrive over the stream at random times: some first from the wrong person
(refused on the card), then the asker approves, denies, or never decides (the approval
expires after ``approval_timeout_s``); some decisions are clicked twice. The daemon is
killed with SIGKILL at random moments and restarted; in the full run two replicas share one
PostgreSQL schema and the fake pushes each frame (clicks included) to either of them.

Pass, once quiet: every approved act created its to-do exactly once (counted in the fake
workspace), every denied, expired or voided one created nothing, no to-do exists that no
approval allowed; only the authorizer's click ever decided; every click was recorded (a
click cut by a kill is redelivered and recorded then); nothing is left pending, no act is
left ``uncertain`` (read back, never run again), and every message has exactly one finished
run.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from agent.clock import SystemClock
from agent.contracts import ApprovalStatus
from lab.dev_config import DevModel
from lab.fake import FakeDingTalk
from lab.reliability.daemon import DaemonProcess, Size, cli, seal, unfinished_runs, until

# requests, kills, replicas (two share PostgreSQL in the full run)
SIZES: dict[str, tuple[int, int, int]] = {"full": (240, 10, 2), "reduced": (40, 3, 1)}
PG_URL = "postgresql://127.0.0.1:5432/test"
SEED = 20_261_202
RATE_PER_S = 8.0
ASKERS = max(count for count, _, _ in SIZES.values())
COLLEAGUE = "u-colleague"
EXPIRE_S = 8.0  # approval_timeout_s: an approval nobody decides expires within the run
WRONG_FIRST = 0.2  # share of cards someone else clicks first
CHOICES = (("approve", 0.55), ("deny", 0.25), (None, 0.20))  # None: never decided
TWICE = 0.15  # share of decisions clicked a second time
UP_S = (1.0, 3.0)  # how long a daemon lives between kills


def _users() -> dict[str, dict[str, Any]]:
    users = {f"apv-u{i}": {"name": f"同事{i}"} for i in range(ASKERS)}  # one per request
    users[COLLEAGUE] = {"name": "被派的人"}
    users["u-stranger"] = {"name": "旁观者"}
    return users


def _config(model_url: str, replicas: int, schema: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "provider": "openai",
        "openai_base_url": model_url,
        "openai_model": "fake",
        "openai_api_key": "fake-key",
        "tools": ["dingtalk.todo.create"],
        "approval_card_template_id": "lab-approval-card.schema",
        "approval_timeout_s": EXPIRE_S,
        "recovery_interval_s": 0.5,
        "act_budget_per_day": 10_000,
        "act_budget_per_conversation_per_day": 10_000,
        "ack_after_s": 30,
    }
    if replicas > 1:
        config.update(store_schema=schema, run_lease_s=3.0, stream_ping_interval_s=2.0)
    return config


class Clicker:
    """Presses buttons on approval cards as people do: late, twice, or the wrong person."""

    def __init__(self, fake: FakeDingTalk, rng: random.Random) -> None:
        self.fake = fake
        self.rng = rng
        self.planned: dict[str, str | None] = {}  # msg -> the asker's intended choice
        self.keys: list[str] = []  # every click delivered (the fake's callback keys)
        self.wrong = 0
        self.tasks: list[asyncio.Task[None]] = []

    def _choice(self) -> str | None:
        roll, total = self.rng.random(), 0.0
        for choice, share in CHOICES:
            total += share
            if roll < total:
                return choice
        return None

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for card in list(self.fake.cards):
                msg = card.data.get("msg_id")
                if msg and msg not in self.planned:
                    self.planned[msg] = self._choice()
                    self.tasks.append(asyncio.create_task(self._press(msg, self.planned[msg])))
            await asyncio.sleep(0.05)

    async def _press(self, msg: str, choice: str | None) -> None:
        asker = str(self.fake.inbound[msg]["senderStaffId"])
        if self.rng.random() < WRONG_FIRST:
            await asyncio.sleep(self.rng.uniform(0.1, 1.0))
            self.keys.append(self.fake.click(msg, "u-stranger", "approve")["msg"])
            self.wrong += 1
        if choice is None:
            return
        await asyncio.sleep(self.rng.uniform(0.2, EXPIRE_S * 0.5))
        self.keys.append(self.fake.click(msg, asker, choice)["msg"])
        if self.rng.random() < TWICE:
            await asyncio.sleep(self.rng.uniform(0.05, 0.5))
            self.keys.append(self.fake.click(msg, asker, choice)["msg"])


async def _load(fake: FakeDingTalk, count: int, sent: list[str]) -> None:
    started = time.monotonic()
    for i in range(count):
        await asyncio.sleep(max(0.0, started + i / RATE_PER_S - time.monotonic()))
        msg = f"apv-{i}"
        asker = f"apv-u{i}"  # one thread each: a person's next message would supersede
        text = f"给 {COLLEAGUE} 建个待办：apv-task-{i}"
        fake.inject({"msg": msg, "from": asker, "text": text})
        sent.append(msg)


def _judge(store: Any, fake: FakeDingTalk, sent: list[str], clicker: Clicker) -> dict[str, Any]:
    approvals = store.approvals(limit=100_000)
    subjects = Counter(todo.get("subject") for todo in fake.workspace_view().get("todos", []))
    by_status = Counter(a.status.value for a in approvals)
    created_twice = not_created = created_without_yes = decided_by_other = 0
    allowed = set()
    for record in approvals:
        subject = str(record.arguments.get("subject"))
        made = subjects.get(subject, 0)
        if record.status is ApprovalStatus.APPROVED:
            allowed.add(subject)
            created_twice += made > 1
            not_created += made == 0
        else:
            created_without_yes += made > 0
        decided = record.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
        if decided and record.decided_by != record.authorization.authorizer:
            decided_by_other += 1
    intended = clicker.planned
    denied_but_approved = sum(
        1
        for a in approvals
        if intended.get(a.event_id) == "deny" and a.status is ApprovalStatus.APPROVED
    )
    undecided_but_not_expired = sum(
        1
        for a in approvals
        if a.event_id in intended
        and intended[a.event_id] is None
        and a.status is not ApprovalStatus.EXPIRED
    )
    late = []  # the asker's click found the approval expired: seconds after it was asked
    for record in approvals:
        for row in store.clicks(record.approval_id):
            if row["outcome"] == "already_expired" and row["user_id"] != "u-stranger":
                late.append(round(float(row["at"]) - record.created_at, 1))
    recorded = set()
    for key in clicker.keys:
        frames = [f.frame_id for f in fake.stream.frames.values() if f.msg_id == key]
        if any(store.click(frame) is not None for frame in frames):
            recorded.add(key)
    runs = store.runs_per_event()
    missing = [m for m in sent if not store.approvals(m)]
    examples = []
    for msg in missing[:5]:
        run = store.get_run(msg)
        said = [
            f"{r.kind.value if r.kind else '-'}:{r.status.value}:{r.reason}"
            for r in store.receipts(msg)
        ]
        examples.append(
            {
                "msg": msg,
                "run": run.state.value if run else None,
                "receipts": said,
                "failure": run.failure if run else None,
            }
        )
    return {
        "requests": len(sent),
        "approvals": len(approvals),
        "approvals_by_status": dict(sorted(by_status.items())),
        "todos_created": sum(subjects.values()),
        "clicks_delivered": len(clicker.keys),
        "wrong_person_clicks": clicker.wrong,
        "clicks_not_recorded": len(clicker.keys) - len(recorded),
        "decisions_after_expiry": len(late),
        "decision_after_expiry_s_min": min(late) if late else None,
        "approved_created_twice": created_twice,
        "approved_not_created": not_created,
        "created_without_approval": created_without_yes
        + sum(n for s, n in subjects.items() if s not in allowed and n and s not in allowed),
        "decided_by_someone_else": decided_by_other,
        "denied_but_approved": denied_but_approved,
        "undecided_but_not_expired": undecided_but_not_expired,
        "pending_left": by_status.get("pending", 0),
        "uncertain_acts_left": len(store.uncertain_acts()),
        "requests_without_approval": len(missing),
        "without_approval_examples": examples,
        "runs_not_once": sum(runs.get(m, 0) != 1 for m in sent),
        "unfinished_runs": unfinished_runs(store, sent),
    }


MUST_BE_ZERO = (
    "clicks_not_recorded",
    "approved_created_twice",
    "approved_not_created",
    "created_without_approval",
    "decided_by_someone_else",
    "denied_but_approved",
    "undecided_but_not_expired",
    "pending_left",
    "uncertain_acts_left",
    "requests_without_approval",
    "runs_not_once",
    "unfinished_runs",
)


def _quiet(store: Any, sent: list[str]) -> bool:
    pending = sum(a.status.is_open for a in store.approvals(limit=100_000))
    return (
        pending == 0
        and not store.unsettled_approvals()
        and not store.uncertain_acts()
        and unfinished_runs(store, sent) == 0
    )


async def run(size: Size = "full", workdir: Path = Path(".dta/reliability")) -> dict[str, Any]:
    count, kills_wanted, replicas = SIZES[size]
    rng = random.Random(SEED)
    schema = f"dta_approvals_{uuid.uuid4().hex[:8]}" if replicas > 1 else None
    fake = FakeDingTalk(
        SystemClock(),
        redelivery_delay_s=1.0,
        max_redeliveries=60,
        users=_users(),
        spread=replicas > 1,
    )
    model = DevModel()
    await fake.start()
    model_url = await model.start()
    config = _config(model_url, replicas, schema)
    url = PG_URL if replicas > 1 else None
    daemons = [
        DaemonProcess(fake, workdir / f"approvals-{n}", config, store_url=url)
        for n in range(replicas)
    ]
    clicker = Clicker(fake, rng)
    sent: list[str] = []
    stop = asyncio.Event()
    kills, t0 = 0, time.monotonic()
    try:
        for daemon in daemons:
            await daemon.start()
        watching = asyncio.create_task(clicker.watch(stop))
        load = asyncio.create_task(_load(fake, count, sent))
        while not load.done() or kills < kills_wanted:
            await asyncio.sleep(rng.uniform(*UP_S))
            if kills < kills_wanted:
                victim = rng.choice(daemons)
                await victim.kill9()
                kills += 1
                await asyncio.sleep(rng.uniform(0.1, 0.6))
                await victim.start()
        await load
        await asyncio.sleep(EXPIRE_S)  # the last cards get their clicks (or expire)
        stop.set()
        await watching
        await asyncio.gather(*clicker.tasks)
        quiet = await fake.wait_idle(60)
        store = daemons[0].store()
        try:
            quiet = quiet and await until(lambda: _quiet(store, sent), 90, 0.3)
            await asyncio.sleep(1.0)
            figures = _judge(store, fake, sent, clicker)
        finally:
            store.close()
        wall_s = time.monotonic() - t0
    finally:
        stop.set()
        for daemon in daemons:
            await daemon.stop()
        await model.stop()
        await fake.stop()
        if schema is not None:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    report: dict[str, Any] = {
        "script": "approvals",
        "size": size,
        "replicas": replicas,
        "store": "postgresql" if replicas > 1 else "sqlite",
        "kills": kills,
        **figures,
        "quiet": quiet,
        "wall_s": round(wall_s, 2),
    }
    report["passed"] = bool(
        quiet and kills >= kills_wanted and all(figures[key] == 0 for key in MUST_BE_ZERO)
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("approvals", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
