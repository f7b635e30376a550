"""Replicas: three daemons on one PostgreSQL serve one robot; nothing is lost or doubled.

DingTalk with several Stream connections of one app pushes each frame to one of them at
random, redeliveries included; the fake does the same (``spread``). Three ``dta run``
replicas share one PostgreSQL schema while distinct DMs flow at a steady rate, a storm
redelivers earlier messages (so a redelivery often lands on another replica than the first
delivery), and a random replica is killed with SIGKILL every few seconds and restarted a
moment later. Runs are leased for 3 s here, so a dead replica's runs are taken over by the
others quickly; the attempts it had started become ``uncertain`` and are never resent.

Then a pause: with the platform taking 3 s to answer a send, DMs arrive and one replica is
stopped (SIGSTOP) while it holds run leases and sends in flight. The others take its runs
over when the leases expire and finish them; then it is resumed (SIGCONT). Every write of
a run's records is fenced (it checks, in its own transaction, that its owner still holds
the run), so the resumed replica writes nothing into the runs it lost and sends nothing
for them: no message reaches the platform, and no receipt or attempt is written, after
the resume (no new message arrives meanwhile, and every run had finished before it).

Then several messages per person: each of a number of people sends a few messages a moment
apart, spread over the replicas. A person's runs are serial across replicas and in arrival
order (a thread is claimed only when no earlier message of it is unfinished), so their
replies come in the order they asked; each message is answered once, on its own or together
with a later one of the same person that superseded it.

Pass, once quiet: no message answered twice (counted on the platform); every message has
exactly one decision and one finished run; every message without an ``accepted`` reply
has an ``uncertain`` one (and every message unanswered on the platform has one); no
attempt is left ``started``; no event has two last words (terminal receipts); and the
paused replica held runs when it stopped and did nothing for them once resumed.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from lab.reliability.daemon import (
    DaemonProcess,
    Size,
    answer,
    cli,
    judge_messages,
    nothing_wrong,
    question,
    seal,
    send_dm,
    unfinished_runs,
    until,
)

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
SIZES: dict[str, tuple[int, float]] = {"full": (12, 30.0), "reduced": (3, 8.0)}  # kills, s
# The pause: DMs sent at once, how long the replica stands still, how long it is watched
# once resumed.
PAUSES: dict[str, tuple[int, float, float]] = {"full": (48, 60.0, 15.0), "reduced": (24, 8.0, 6.0)}
PAUSE_SEND_LATENCY_S = 3.0
# Several messages per person: people, messages each, seconds between one's messages.
ORDERS: dict[str, tuple[int, int, float]] = {"full": (30, 5, 0.1), "reduced": (10, 4, 0.1)}
# Sends slow enough that a person's next message often lands on another replica while the
# first is still being answered: its claim of the thread fails, and it must wait its turn.
ORDER_SEND_LATENCY_S = 0.3
ORDER_PREFIX, ORDER_BASE = "order", 800_000
PREFIX, BASE, SEED = "replica", 700_000, 20_261_201
REPLICAS = 3
RATE_PER_S = 15.0  # three daemons, PostgreSQL and the fake share two cores here
REDELIVER_SHARE = 0.5  # for every new message, this many redeliveries of earlier ones
SEND_LATENCY_S = 0.02
CONFIG: dict[str, Any] = {
    # A keepalive that a loaded two-core machine can answer in time (the harness default
    # of 0.5 s is for a lone daemon).
    "stream_ping_interval_s": 2.0,
    "stream_ping_timeout_s": 5.0,
    "run_lease_s": 3.0,
    "recovery_interval_s": 0.5,
    "store_busy_timeout_s": 2.0,
    "open_connection_timeout_s": 2.0,
}


async def _load(
    fake: FakeDingTalk, sent: list[str], stop: asyncio.Event, rng: random.Random
) -> int:
    """Distinct DMs at a steady rate, with redeliveries of earlier ones mixed in."""
    started, redelivered = time.monotonic(), 0
    while not stop.is_set():
        i = len(sent)
        await asyncio.sleep(max(0.0, started + i / RATE_PER_S - time.monotonic()))
        sent.append(send_dm(fake, PREFIX, i, BASE))
        if sent and rng.random() < REDELIVER_SHARE:
            fake.redeliver(rng.choice(sent))
            redelivered += 1
    return redelivered


def _last_words_twice(store: Any) -> int:
    """Events with more than one terminal receipt (a reply, an ask, a silence)."""
    terminal: dict[str, int] = {}
    for receipt in store.actions.receipts():
        if receipt.kind is not None and receipt.kind.value != "ack":
            terminal[receipt.event_id] = terminal.get(receipt.event_id, 0) + 1
    return sum(count > 1 for count in terminal.values())


async def _pause(
    fake: FakeDingTalk, replicas: list[DaemonProcess], sent: list[str], size: Size
) -> dict[str, Any]:
    """One replica stopped while it holds leases and sends, resumed after the takeover."""
    count, paused_s, watch_s = PAUSES[size]
    fake.send_latency_s = PAUSE_SEND_LATENCY_S
    first = len(sent)
    batch = [send_dm(fake, PREFIX, i, BASE) for i in range(first, first + count)]
    sent.extend(batch)
    store = replicas[0].store()
    try:
        # Each replica is handed work; the one to stop is one holding runs (sends in flight).
        await asyncio.sleep(1.0)
        held = {r: store.work.runs_held(f"{socket.gethostname()}:{r.pid}:") for r in replicas}
        victim = max(replicas, key=lambda r: held[r])
        victim.pause()
        holding = held[victim]
        started = time.monotonic()
        taken_over = await until(lambda: unfinished_runs(store, batch) == 0, paused_s + 60, 0.2)
        await asyncio.sleep(max(0.0, paused_s - (time.monotonic() - started)))
        fake.send_latency_s = SEND_LATENCY_S
        on_platform, resumed_at = len(fake.received), time.time()
        written = _written_since(store, resumed_at)
        victim.resume()
        await asyncio.sleep(watch_s)
        report = {
            "paused_replica_held_runs": holding,
            "paused_s": round(time.monotonic() - started - watch_s, 1),
            "taken_over": taken_over,
            "sends_after_resume": len(fake.received) - on_platform,
            "writes_after_resume": _written_since(store, resumed_at) - written,
            "events_with_two_last_words": _last_words_twice(store),
        }
    finally:
        store.close()
    return report


async def _in_order(fake: FakeDingTalk, size: Size) -> tuple[list[str], dict[str, int]]:
    """Each person sends several messages a moment apart, spread over the replicas; what
    each message's index is, by msgId."""
    people, each, gap = ORDERS[size]
    fake.send_latency_s = ORDER_SEND_LATENCY_S
    index: dict[str, int] = {}
    for round_ in range(each):
        for person in range(people):
            i = round_ * people + person
            msg_id = f"{ORDER_PREFIX}-{i}"
            text = question(i, ORDER_BASE)
            fake.inject({"msg": msg_id, "from": f"{ORDER_PREFIX}-p{person}", "text": text})
            index[msg_id] = i
        await asyncio.sleep(gap)
    return list(index), index


def _order_done(fake: FakeDingTalk) -> None:
    fake.send_latency_s = SEND_LATENCY_S


def _judge_order(store: Any, fake: FakeDingTalk, index: dict[str, int]) -> dict[str, Any]:
    """Per person: replies in the order the messages arrived; every message answered once,
    by its own reply or together with a later one of the same person (superseded)."""
    answer_of = {answer(i, ORDER_BASE): msg_id for msg_id, i in index.items()}
    replies: dict[str, list[int]] = {}
    answered: dict[str, int] = {}
    stray = 0
    for message in fake.received:
        for user in message.user_ids:
            if not user.startswith(f"{ORDER_PREFIX}-p"):
                continue
            msg_id = answer_of.get(message.text)
            if msg_id is None or fake.inbound[msg_id]["senderStaffId"] != user:
                stray += 1
                continue
            replies.setdefault(user, []).append(index[msg_id])
            answered[msg_id] = answered.get(msg_id, 0) + 1
    out_of_order = sum(seq != sorted(seq) for seq in replies.values())
    unaccounted = 0
    for msg_id in index:
        if answered.get(msg_id):
            continue
        run = store.events.get_run(msg_id)
        person = fake.inbound[msg_id]["senderStaffId"]
        later = [i for i in replies.get(person, []) if i > index[msg_id]]
        superseded = run is not None and run.state.value == "interrupted" and later
        unaccounted += not superseded
    return {
        "people": len({fake.inbound[m]["senderStaffId"] for m in index}),
        "messages": len(index),
        "replies": sum(answered.values()),
        "people_answered_out_of_order": out_of_order,
        "answered_twice": sum(n > 1 for n in answered.values()),
        "neither_answered_nor_superseded": unaccounted,
        "stray_replies": stray,
    }


def _written_since(store: Any, moment: float) -> int:
    """Receipts and attempts stamped at or after ``moment`` (every replica's clock is this
    machine's)."""
    receipts = [r for r in store.actions.receipts() if r.created_at >= moment]
    attempts = [
        a
        for intent in store.actions.intents()
        for a in store.actions.attempts(intent.intent_id)
        if a.started_at >= moment or (a.finished_at or 0) >= moment
    ]
    return len(receipts) + len(attempts)


async def run(
    size: Size = "full", workdir: Path = Path(".dta/reliability"), url: str = DEFAULT_URL
) -> dict[str, Any]:
    kills_wanted, load_s = SIZES[size]
    rng = random.Random(SEED)
    schema = f"dta_replicas_{uuid.uuid4().hex[:8]}"
    config = {**CONFIG, "store_schema": schema}
    fake = FakeDingTalk(
        SystemClock(),
        redelivery_delay_s=1.0,
        max_redeliveries=60,  # DingTalk keeps redelivering for a while, not five seconds
        send_latency_s=SEND_LATENCY_S,
        spread=True,
    )
    await fake.start()
    replicas = [
        DaemonProcess(fake, workdir / f"replica-{n}", config, store_url=url)
        for n in range(REPLICAS)
    ]
    sent: list[str] = []
    stop = asyncio.Event()
    kills, t0 = 0, time.monotonic()
    try:
        for replica in replicas:
            await replica.start()
        load = asyncio.create_task(_load(fake, sent, stop, rng))
        gap = load_s / (kills_wanted + 1)
        for _ in range(kills_wanted):
            await asyncio.sleep(rng.uniform(0.5 * gap, 1.5 * gap))
            victim = rng.choice(replicas)
            await victim.kill9()
            kills += 1
            await asyncio.sleep(rng.uniform(0.2, 1.0))
            await victim.start()
        await asyncio.sleep(rng.uniform(0.5 * gap, gap))
        stop.set()
        redelivered = await load
        quiet = await fake.wait_idle(60)
        store = replicas[0].store()
        try:
            # A dead replica's runs wait out their lease (3 s) before another takes them.
            quiet = quiet and await until(lambda: unfinished_runs(store, sent) == 0, 60, 0.2)
        finally:
            store.close()
        paused = await _pause(fake, replicas, sent, size)
        ordered, index = await _in_order(fake, size)
        quiet = quiet and await fake.wait_idle(60)
        _order_done(fake)
        store = replicas[0].store()
        try:
            every = [*sent, *ordered]
            quiet = quiet and await until(lambda: unfinished_runs(store, every) == 0, 60, 0.2)
            await asyncio.sleep(1.0)
            figures = judge_messages(store, fake, sent, PREFIX, BASE, (f"{ORDER_PREFIX}-",))
            order = _judge_order(store, fake, index)
            owners = sorted(store.work.runs_per_owner().values(), reverse=True)
        finally:
            store.close()
        connections = len(fake.stream.connections)
        wall_s = time.monotonic() - t0
    finally:
        stop.set()
        for replica in replicas:
            await replica.stop()
        await fake.stop()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    report: dict[str, Any] = {
        "script": "replicas",
        "size": size,
        "replicas": REPLICAS,
        "kills": kills,
        "redeliveries_injected": redelivered,
        **figures,
        "pause": paused,
        "order": order,
        "stream_connections": connections,
        "runs_per_process": owners,  # each start of a replica is a process of its own
        "quiet": quiet,
        "wall_s": round(wall_s, 2),
    }
    report["passed"] = bool(
        quiet
        and kills >= kills_wanted
        and figures["injected"] > 0
        and len(owners) >= REPLICAS  # the platform really spread the work
        and nothing_wrong(figures)
        and paused["taken_over"]
        and paused["paused_replica_held_runs"] > 0
        and paused["sends_after_resume"] == 0
        and paused["writes_after_resume"] == 0
        and paused["events_with_two_last_words"] == 0
        and order["replies"] > 0
        and order["people_answered_out_of_order"] == 0
        and order["answered_twice"] == 0
        and order["neither_answered_nor_superseded"] == 0
        and order["stray_replies"] == 0
    )
    return seal(report, [fake.app_secret])


def main(argv: list[str] | None = None) -> int:
    return cli("replicas", __doc__.splitlines()[0], run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
