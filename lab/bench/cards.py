"""``dta lab bench`` (``--only cards``): what an AI card costs and gains against a plain reply.

The same questions, one at a time, go through the whole runtime against the fake DingTalk
and the fake model, which writes each answer in small pieces at a steady pace (as a model
streams tokens). Once in text mode — the person sees nothing until the complete answer
arrives — and once in card mode with the default pacing: the person sees the first words
in the card's first frame. The model takes as long either way: unstreamed, it answers after
the time the stream would have taken. Reported: time to the plain reply; time to the card
appearing (created, still empty), to its first frame and to its final frame; and frames per
card (each one a metered card API call).
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from agent.config import Settings
from agent.runtime import Runtime
from lab.fake import FakeDingTalk, build_callback, callback_frame
from lab.models.fake_model import FakeModel

ANSWER = (
    "报销分三步：第一，在 OA 的费用报销里新建单据，按类别填写金额并上传发票照片；"
    "第二，提交后由直属主管审批，金额超过五千元还需要部门负责人复核；"
    "第三，财务在审批通过后的三个工作日内核对票据并打款到工资卡。"
    "如果发票抬头或税号有误，单据会被退回，修改后重新提交即可。"
)
CHUNK_CHARS = 8
CHUNK_DELAY_S = 0.03  # about 270 characters a second, a brisk model


@dataclass(frozen=True)
class CardBench:
    questions: int
    answer_chars: int
    plain_reply_p50_ms: float
    card_shown_p50_ms: float
    card_first_frame_p50_ms: float
    card_final_p50_ms: float
    frames_per_card: float
    first_frame_over_plain: float


def _p50(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def _script(mode: str, questions: int) -> dict[str, list[dict[str, Any]]]:
    answer = {"kind": "reply", "text": ANSWER}
    pieces = math.ceil(len(json.dumps(answer, ensure_ascii=False)) / CHUNK_CHARS)
    entry: dict[str, Any] = {"json": answer}
    if mode == "card":
        entry |= {"chunk_chars": CHUNK_CHARS, "chunk_delay_s": CHUNK_DELAY_S}
    else:  # the same writing time, answered whole at the end
        entry["delay_s"] = pieces * CHUNK_DELAY_S
    return {f"q{n}": [dict(entry)] for n in range(questions)}


async def _run(mode: str, questions: int, workdir: Path) -> dict[str, list[float]]:
    """Seconds from each question to: the card shown, its first text, the final text."""
    seen: dict[str, list[float]] = {"shown": [], "first": [], "final": [], "frames": []}
    async with FakeDingTalk(SystemClock()) as fake, FakeModel(_script(mode, questions)) as model:
        settings = Settings(
            store_path=workdir / f"{mode}.db",
            openapi_base_url=fake.base_url,
            webhook_origins=[fake.base_url],
            client_id=fake.app_key,
            client_secret=fake.app_secret,
            robot_code=fake.robot_code,
            identity_lookup=False,
            provider="openai",
            openai_base_url=model.base_url,
            openai_model="bench",
            reply_mode="card" if mode == "card" else "text",
            card_template_id="bench-card.schema" if mode == "card" else None,
            health_port=0,
        )
        runtime = Runtime(settings, clock=fake.clock)
        await runtime.start()
        try:
            for n in range(questions):
                send = {"msg": f"q{n}", "from": f"u{n}", "text": "报销怎么走？"}
                data = build_callback(fake, send, fake.clock.now())
                asked = time.time()
                runtime.ingest(callback_frame(data, f"f{n}", now=asked), asked)
                await runtime.drain()
                if mode == "card":
                    card = fake.cards[-1]
                    seen["shown"].append(card.created_at - asked)
                    seen["first"].append(card.frames[0]["at"] - asked)
                    seen["final"].append(card.frames[-1]["at"] - asked)
                    seen["frames"].append(len(card.frames))
                else:
                    seen["final"].append(fake.received[-1].time - asked)
        finally:
            await runtime.aclose()
    return seen


async def bench_cards(quick: bool) -> CardBench:
    questions = 8 if quick else 30
    with tempfile.TemporaryDirectory(prefix="dta-bench-cards-") as tmp:
        plain = (await _run("text", questions, Path(tmp)))["final"]
        card = await _run("card", questions, Path(tmp))
    return CardBench(
        questions=questions,
        answer_chars=len(ANSWER),
        plain_reply_p50_ms=_p50(plain),
        card_shown_p50_ms=_p50(card["shown"]),
        card_first_frame_p50_ms=_p50(card["first"]),
        card_final_p50_ms=_p50(card["final"]),
        frames_per_card=round(statistics.mean(card["frames"]), 1),
        first_frame_over_plain=round(
            statistics.median(card["first"]) / statistics.median(plain), 2
        ),
    )


def run_bench_cards(quick: bool) -> CardBench:
    return asyncio.run(bench_cards(quick))
