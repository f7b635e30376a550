"""One approvals run: the fake, the fake model and the daemons started, the load and the
faults driven by the harness, the result judged and reported (``run``)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.approvals.faults import (
    FAKE_TIMEOUT_S,
    TARGETED,
    TARGETED_UP_S,
    UP_S,
    chosen_faults,
)
from lab.reliability.approvals.harness import Harness, WatchedModel
from lab.reliability.approvals.judging import judge, must_be_zero
from lab.reliability.approvals.parameters import (
    CODES_EXPIRE_S,
    EXPIRE_S,
    PG_URL,
    SEED,
    SIZES,
    daemon_config,
    fake_users,
)
from lab.reliability.approvals.people import Clicker, Replier
from lab.reliability.approvals.reads import all_quiet
from lab.reliability.daemon import DaemonProcess, Size, seal, until


def _build() -> dict[str, Any]:
    """The commit the run is on, and the runtime's files changed since (uncommitted)."""
    root = Path(__file__).resolve().parents[3]

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.decode(errors="replace").rstrip()

    changed = git("status", "--porcelain", "--", "agent", "gates", "storage", "skills")
    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "runtime_uncommitted": [line[3:] for line in changed.splitlines()],
    }


def _keep_record(fake: FakeDingTalk, path: Path) -> None:
    """The fake's record of a failed run: every message, card and to-do it holds."""
    record = {
        "received": [
            {
                k: m.to_dict()[k]
                for k in ("seq", "msgtype", "conversation_id", "user_ids", "at_user_ids", "text")
            }
            | {"time": m.time}
            for m in fake.received
        ],
        "cards": [
            {"out_track_id": c.out_track_id, "data": c.data, "user_ids": c.user_ids}
            for c in fake.cards
        ],
        "todos": fake.workspace_view().get("todos", []),
        "faults_seen": fake.faults_seen,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")


async def run(
    size: Size = "full",
    workdir: Path = Path(".dta/reliability"),
    faults: Iterable[str] | None = None,
    codes: bool = False,
) -> dict[str, Any]:
    shape = SIZES[size]
    chosen = chosen_faults(faults)
    replicas = shape.replicas
    rng = random.Random(SEED)
    schema = f"dta_approvals_{uuid.uuid4().hex[:8]}" if replicas > 1 else None
    fake = FakeDingTalk(
        SystemClock(),
        timeout_fault_s=FAKE_TIMEOUT_S,
        redelivery_delay_s=1.0,
        max_redeliveries=60,
        users=fake_users(),
        spread=replicas > 1,
    )
    model = WatchedModel(reword="reword" in chosen)
    await fake.start()
    model_url = await model.start()
    config = daemon_config(model_url, replicas, schema, codes)
    url = PG_URL if replicas > 1 else None
    daemons = [
        DaemonProcess(fake, workdir / f"approvals-{n}", config, store_url=url)
        for n in range(replicas)
    ]
    clicker = Replier(fake, rng, "paused" in chosen) if codes else Clicker(fake, rng)
    harness = Harness(fake, daemons, clicker, rng, chosen, model, codes)
    if isinstance(clicker, Replier):
        clicker.daemons, clicker.flowing = daemons, harness.flowing
    stop = asyncio.Event()
    build = _build()
    t0 = time.monotonic()
    failed = True  # until judged: a run cut short keeps its schema
    if "keep_every_create" in chosen:
        fake.arm_fault({"todo_create": {"dedupe": False}})  # a mode: the whole run
    try:
        for daemon in daemons:
            await daemon.start()
        watching = asyncio.create_task(clicker.watch(stop))
        load = asyncio.create_task(harness.load(shape))
        pauses = 0
        for action in harness.actions(shape):
            # a targeted kill waits for what it strikes; the others come at random
            await asyncio.sleep(rng.uniform(*(TARGETED_UP_S if action in TARGETED else UP_S)))
            await harness.act(action, pauses)
            pauses += action == "pause"
        await load
        # the last cards get their clicks or replies (or expire)
        await asyncio.sleep(CODES_EXPIRE_S if codes else EXPIRE_S)
        stop.set()
        await watching
        await asyncio.gather(*clicker.tasks)
        quiet = await fake.wait_idle(60)
        store = daemons[0].store()
        try:
            messages = [*harness.sent, *(clicker.keys if codes else [])]
            quiet = quiet and await until(lambda: all_quiet(store, messages), 120, 0.3)
            await asyncio.sleep(1.0)
            figures = judge(store, fake, harness.sent, clicker, codes)
        finally:
            store.close()
        wall_s = time.monotonic() - t0
        failed = not quiet or any(figures[key] for key in must_be_zero(codes))
        if failed:  # what the platform holds, for reading beside the store
            _keep_record(fake, workdir / "fake-record.json")
    finally:
        stop.set()
        for daemon in daemons:
            await daemon.stop()
        await model.stop()
        await fake.stop()
        if schema is not None and not failed:  # a failed run's schema is kept to be read
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    kills_wanted = shape.kills + sum(
        n
        for name, n in (
            ("kill_after_click", shape.click_kills),
            ("kill_during_create", shape.create_kills),
            ("reword", shape.proposal_kills),
        )
        if name in chosen
    )
    kills = sum(harness.kills.values())
    report: dict[str, Any] = {
        "script": "approvals",
        "size": size,
        "decided_by": "text code" if codes else "card",
        "approval_timeout_s": config["approval_timeout_s"],
        "replicas": replicas,
        "store": "postgresql" if replicas > 1 else "sqlite",
        **build,
        "faults": list(chosen),
        "kills": kills,
        "kills_by_kind": dict(sorted(harness.kills.items())),
        "pauses": len(harness.paused_windows),
        "paused_s": round(harness.paused_s, 1),
        "creates_reworded_by_model": model.reworded,
        **harness.fault_figures(),
        **figures,
        "targeted_kills_struck": harness.struck_runs,
        "notes": harness.notes,
        **({"kept_schema": schema} if schema is not None and failed else {}),
        "quiet": quiet,
        "wall_s": round(wall_s, 2),
    }
    report["passed"] = bool(
        quiet and kills >= kills_wanted and all(figures[key] == 0 for key in must_be_zero(codes))
    )
    return seal(report, [fake.app_secret])
