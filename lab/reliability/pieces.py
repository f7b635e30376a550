"""Pieces: long answers with pictures, the daemon killed -9 while they go out; every line
and picture reaches the person once, or they are told in one line.

The ``pieces`` fault of ``dta lab reliability backlog`` (its fourth phase). DMs whose answers
are several chunks long (``max_reply_chars`` 400: four messages each), half of them with a
chart after the words, come from the lab's fake model behind the ``openai`` provider; the
platform takes a moment over every send, and the daemon (``dta run``) is killed -9 at
random moments while the answers go, then started again on the same store, until every
run has ended. Judged from the platform's record:

- every chunk (each carries its own marker 【p<i>-<k>】) and every chart arrived exactly once
  (``pieces_once``), never twice (``pieces_twice``);
- a piece that never arrived — a kill took its send before the platform had it, which is
  never resent blindly — is owned up to in one line to that person (``pieces_lost_told``:
  「…可能缺了一段」 for words, 「图片「…」没能发出」 for a chart); ``pieces_lost_untold`` must be 0.

Before the pieces of an answer were stored together, a kill between two of them lost the
rest of the answer for good (the run was marked failed "partial reply").
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from lab.fake import FakeDingTalk
from lab.models.fake_model import FakeModel
from lab.reliability.daemon import DaemonProcess, fake_model_config, unfinished_runs, until

CHUNKS = 4
CHUNK_CHARS = 400
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAECAIAAAA8r+mnAAAAEUlEQVR4nGPQqDiBFTFQTwIAttwtAU1JPVgAAAAA"
    "SUVORK5CYII="
)
SEND_LATENCY_S = 0.3
KILL_EVERY_S = (0.6, 1.8)
DOWN_S = (0.1, 0.4)
MAY_BE_MISSING = "可能缺了一段"


def marker(i: int, k: int) -> str:
    return f"【p{i}-{k}】"


def _text(i: int) -> str:
    """Four chunks' worth of words, each chunk opening with its own marker."""
    filler = "这一段是长回答里的内容，" * 28  # about 330 characters
    return "\n".join(f"{marker(i, k)}{filler[: CHUNK_CHARS - 40]}" for k in range(1, CHUNKS + 1))


def chart(i: int) -> str:
    return f"chart-{i}.png"


def _script(prefix: str, count: int) -> dict[str, list[dict[str, Any]]]:
    """Each DM's answer, three times over (a run a kill cut before it answered is asked
    again); keys are msgIds padded so none is inside another."""
    script = {}
    for i in range(count):
        reply: dict[str, Any] = {"kind": "reply", "text": _text(i)}
        if i % 2 == 0:
            reply["attachments"] = [{"name": chart(i), "data_base64": PNG}]
        script[f"{prefix}-{i:04d}"] = [{"json": reply, "delay_s": 0.05}] * 3
    return script


def judge(fake: FakeDingTalk, prefix: str, count: int) -> dict[str, Any]:
    """Each expected piece: once, twice or more, or missing (told or not)."""
    mine: dict[str, list[Any]] = {}
    for message in fake.received:
        for user in message.user_ids:
            mine.setdefault(user, []).append(message)
    once = twice = told = untold = 0
    for i in range(count):
        said = mine.get(f"{prefix}-u{i}", [])
        texts = [m.text for m in said]
        lines = [(marker(i, k), MAY_BE_MISSING, "text") for k in range(1, CHUNKS + 1)]
        if i % 2 == 0:
            lines.append((chart(i), f"「{chart(i)}」没能发出", "image"))
        for needle, owned, kind in lines:
            if kind == "image":
                seen = sum(m.msgtype == "image" and needle in m.text for m in said)
            else:
                seen = sum(needle in t for t in texts)
            if seen == 1:
                once += 1
            elif seen > 1:
                twice += 1
            elif any(owned in t for t in texts):
                told += 1
            else:
                untold += 1
    return {
        "pieces_expected": count * CHUNKS + (count + 1) // 2,
        "pieces_once": once,
        "pieces_twice": twice,
        "pieces_lost_told": told,
        "pieces_lost_untold": untold,
    }


def cut_by_a_kill(fake: FakeDingTalk, prefix: str, kills: list[float]) -> int:
    """Answers whose pieces reached the platform on both sides of a kill."""
    spans: dict[str, list[float]] = {}
    for message in fake.received:
        for user in message.user_ids:
            if user.startswith(f"{prefix}-u"):
                spans.setdefault(user, []).append(message.mono)
    return sum(any(min(times) < kill < max(times) for kill in kills) for times in spans.values())


async def _kill_while_going(
    daemon: DaemonProcess, rng: random.Random, done: asyncio.Event, kills: list[float]
) -> None:
    while not done.is_set():
        await asyncio.sleep(rng.uniform(*KILL_EVERY_S))
        if done.is_set():
            return
        await daemon.kill9()
        kills.append(time.monotonic())
        await asyncio.sleep(rng.uniform(*DOWN_S))
        await daemon.start()


async def pieces_phase(
    fake: FakeDingTalk, workdir: Path, count: int, rng: random.Random, config: dict[str, Any]
) -> dict[str, Any]:
    fake.send_latency_s = SEND_LATENCY_S
    prefix = "piece"
    model = FakeModel(_script(prefix, count))
    await model.start()
    settings = {
        **config,
        **fake_model_config(model.base_url),
        "max_reply_chars": CHUNK_CHARS,
        "ack_after_s": 600,  # no "稍等": only the answer's own pieces are counted
    }
    daemon = DaemonProcess(fake, workdir / "pieces", settings)
    await daemon.start()
    kills: list[float] = []
    done = asyncio.Event()
    t0 = time.monotonic()
    try:
        sent = []
        for i in range(count):
            msg_id = f"{prefix}-{i:04d}"
            fake.inject({"msg": msg_id, "from": f"{prefix}-u{i}", "text": f"第{i}份长报告发我"})
            sent.append(msg_id)
            await asyncio.sleep(0.05)
        killer = asyncio.create_task(_kill_while_going(daemon, rng, done, kills))

        def finished() -> bool:
            store = daemon.store()
            try:
                return unfinished_runs(store, sent) == 0
            finally:
                store.close()

        quiet = await until(finished, 60 + count * 2, 0.3)
        done.set()
        await killer
        if not daemon.running:
            await daemon.start()
        quiet = quiet and await until(finished, 30, 0.3) and await fake.wait_idle(30)
        await asyncio.sleep(1.0)  # room for a late duplicate to show up
    finally:
        done.set()
        await daemon.stop()
        await model.stop()
        fake.send_latency_s = 0.0
    figures = judge(fake, prefix, count)
    report = {
        **figures,
        "answers": count,
        "kills": len(kills),
        "answers_cut_by_a_kill": cut_by_a_kill(fake, prefix, kills),
        "quiet": quiet,
        "wall_s": round(time.monotonic() - t0, 2),
    }
    report["passed"] = bool(
        quiet
        and report["answers_cut_by_a_kill"] > 0  # the fault struck where it matters
        and figures["pieces_twice"] == 0
        and figures["pieces_lost_untold"] == 0
    )
    return report
