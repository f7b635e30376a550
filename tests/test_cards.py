"""Card mode, wired: the runtime against the fake DingTalk with providers that stream on cue.

The lab cases cover the main ways (a DM, a group, a crash, throttling, a secret, fallbacks);
these pin what a case file cannot script: a provider that stalls or breaks mid-answer, an
ack before the first text, the model's own ack, a create whose answer never came, and a
card left open by a final frame that never got through.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.clock import VirtualClock
from agent.config import Settings
from agent.contracts import ActionKind, CardState, ReceiptStatus, RunState
from agent.runtime import Runtime
from lab.fake import FakeDingTalk, build_callback, callback_frame
from skills.providers.base import ProviderFailed, ProviderReply
from skills.providers.streaming import ReplyText, RequestDone, StreamEvent

START = 1_767_225_600.0


class Cued:
    """Streams what it is told, when it is told; answers ``requests`` at the end."""

    name = "openai"

    def __init__(self, steps: list[tuple[Any, ...]], requests: list[Any], **evidence: Any):
        self.steps, self.requests, self.evidence = steps, requests, evidence
        self.cancelled = False

    async def respond(self, invocation: Any, skills: Sequence[Any]) -> ProviderReply:
        return ProviderReply(self.requests)

    async def respond_streaming(self, invocation: Any, skills: Any, on_event: Any) -> Any:
        try:
            for step in self.steps:
                await self._step(step, on_event)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ProviderReply(self.requests, evidence=self.evidence)

    @staticmethod
    async def _step(step: tuple[Any, ...], on_event: Any) -> None:
        what = step[0]
        if what == "text":
            event: StreamEvent = ReplyText(step[1], step[2], {"kind": "reply", "text": step[2]})
            on_event(event)
        elif what == "done":
            on_event(RequestDone(step[1], step[2]))
        elif what == "sleep":
            await asyncio.sleep(step[1])
        elif what == "fail":
            raise ProviderFailed("unavailable", "the stream broke")


@pytest.fixture
async def fake() -> AsyncIterator[FakeDingTalk]:
    platform = FakeDingTalk(VirtualClock(START), timeout_fault_s=0.3)
    await platform.start()
    try:
        yield platform
    finally:
        await platform.stop()


async def boot(fake: FakeDingTalk, tmp_path: Path, provider: Any, **over: Any) -> Runtime:
    settings = Settings(
        store_path=tmp_path / "dta.db",
        openapi_base_url=fake.base_url,
        webhook_origins=[fake.base_url],
        client_id=fake.app_key,
        client_secret=fake.app_secret,
        robot_code=fake.robot_code,
        identity_lookup=False,
        read_timeout_s=0.2,
        **{
            "reply_mode": "card",
            "card_template_id": "tpl.schema",
            "ack_after_s": 5.0,
            "card_stall_s": 5.0,
            **over,
        },
    )
    runtime = Runtime(settings, clock=fake.clock, provider=provider)
    await runtime.start()
    return runtime


async def say(runtime: Runtime, fake: FakeDingTalk, msg: str = "m1", text: str = "问题") -> None:
    data = build_callback(fake, {"msg": msg, "from": "u1", "text": text}, fake.clock.now())
    runtime.ingest(callback_frame(data, f"f-{msg}", now=fake.clock.now()))
    await runtime.drain()


async def test_a_stalled_answer_is_cut_off_and_the_provider_stopped(fake, tmp_path):
    provider = Cued([("text", 0, "先说一半"), ("sleep", 30)], [])
    runtime = await boot(fake, tmp_path, provider, card_stall_s=0.3)
    started = time.monotonic()
    await say(runtime, fake)
    assert time.monotonic() - started < 5 and provider.cancelled
    (card,) = fake.cards
    assert card.finalized and card.content.startswith("先说一半") and "中断" in card.content
    (receipt,) = runtime.store.receipts()
    assert (receipt.status, receipt.reason) == (ReceiptStatus.FAILED, "card_cut_off")
    run = runtime.store.get_run("m1")
    assert run.state is RunState.FAILED and run.failure.startswith("card_cut_off")
    await runtime.aclose()


async def test_a_provider_that_breaks_mid_answer_leaves_no_card_spinning(fake, tmp_path):
    provider = Cued([("text", 0, "第一步"), ("sleep", 0.1), ("fail",)], [])
    runtime = await boot(fake, tmp_path, provider)
    await say(runtime, fake)
    (card,) = fake.cards
    assert card.finalized and card.content.startswith("第一步")
    (receipt,) = runtime.store.receipts()
    assert receipt.status is ReceiptStatus.FAILED and receipt.evidence.frames >= 1
    assert "unavailable" in runtime.store.get_run("m1").failure
    assert runtime.store.cards()[0].state is CardState.FINALIZED
    await runtime.aclose()


async def test_a_slow_first_word_gets_the_ack_first_then_the_card(fake, tmp_path):
    answer = {"kind": "reply", "text": "答案来了"}
    provider = Cued([("sleep", 0.3), ("text", 0, "答案来了")], [answer])
    runtime = await boot(fake, tmp_path, provider, ack_after_s=0.1)
    await say(runtime, fake)
    assert [m.channel for m in fake.received] == ["session_webhook", "card"]
    assert fake.received[0].msgtype == "text" and fake.cards[0].content == "答案来了"
    kinds = [(r.kind, r.status) for r in runtime.store.receipts()]
    assert kinds == [
        (ActionKind.ACK, ReceiptStatus.ACCEPTED),
        (ActionKind.REPLY, ReceiptStatus.ACCEPTED),
    ]
    await runtime.aclose()


async def test_the_models_own_ack_goes_first_and_only_once(fake, tmp_path):
    ack, reply = {"kind": "ack", "text": "稍等"}, {"kind": "reply", "text": "好了"}
    steps = [("done", 0, ack), ("sleep", 0.05), ("text", 1, "好了"), ("done", 1, reply)]
    runtime = await boot(fake, tmp_path, Cued(steps, [ack, reply]))
    await say(runtime, fake)
    assert [m.text for m in fake.received] == ["稍等", "好了"]
    statuses = [(r.kind, r.status) for r in runtime.store.receipts()]
    assert statuses == [
        (ActionKind.ACK, ReceiptStatus.ACCEPTED),
        (ActionKind.REPLY, ReceiptStatus.ACCEPTED),
    ]
    assert runtime.store.get_run("m1").state is RunState.DONE
    await runtime.aclose()


async def test_an_answer_repaired_into_something_else_ends_its_card_cut_off(fake, tmp_path):
    silence = {"kind": "silence", "reason": "nothing to say"}
    runtime = await boot(fake, tmp_path, Cued([("text", 0, "开头")], [silence], repaired=True))
    await say(runtime, fake)
    assert fake.cards[0].finalized and "中断" in fake.cards[0].content
    card, refused = runtime.store.receipts()
    assert card.reason == "card_cut_off" and refused.reason == "run_terminal"
    assert runtime.store.get_run("m1").state is RunState.FAILED
    await runtime.aclose()


async def test_a_create_whose_answer_never_came_is_not_created_again(fake, tmp_path):
    fake.arm_fault({"card_create": {"timeout": True}})
    answer = {"kind": "reply", "text": "好"}
    runtime = await boot(fake, tmp_path, Cued([("text", 0, "好")], [answer]))
    await say(runtime, fake)
    assert fake.cards == []  # DingTalk kept nothing, and dta never created it twice
    # the timed-out create is the only one (an answered second create would be logged)
    assert fake.faults == []
    assert not [r for r in fake.request_log if r["path"].endswith("createAndDeliver")]
    (receipt,) = runtime.store.receipts()
    assert receipt.status is ReceiptStatus.FAILED
    assert runtime.store.cards()[0].state is CardState.ABANDONED
    await runtime.aclose()


async def test_a_card_whose_end_never_got_through_is_closed_by_the_sweep(fake, tmp_path):
    fake.arm_fault({"card_stream": {"qps_limit": True, "times": 1000}})
    fake.arm_fault({"card_update": {"qps_limit": True, "times": 1000}})
    answer = {"kind": "reply", "text": "最终答案"}
    runtime = await boot(fake, tmp_path, Cued([("text", 0, "最终答案")], [answer]))
    await say(runtime, fake)
    (receipt,) = runtime.store.receipts()
    assert receipt.status is ReceiptStatus.FAILED and receipt.evidence.retries > 2
    assert receipt.reason == "card_final_late"
    assert not fake.cards[0].finalized
    assert runtime.store.get_run("m1").state is RunState.FAILED
    fake.faults.clear()
    assert await runtime.sweep_cards() == 0  # touched too recently
    fake.clock.advance_to(fake.clock.now() + 10)
    assert await runtime.sweep_cards() == 1
    assert fake.cards[0].finalized and fake.cards[0].content == "最终答案"
    assert runtime.store.cards()[0].state is CardState.FINALIZED
    # What the person finally saw is on record: the whole answer, delivered late.
    first, later = runtime.store.receipts()
    assert (first.status, later.status) == (ReceiptStatus.FAILED, ReceiptStatus.ACCEPTED)
    assert later.reason == "card_final_late" and later.intent_id == first.intent_id
    assert runtime.store.get_run("m1").state is RunState.DONE
    assert await runtime.sweep_cards() == 0  # closed for good: no third receipt
    await runtime.aclose()


async def test_frames_of_one_card_never_overlap(fake, tmp_path):
    fake.card_latency_s = 0.02
    steps = [step for n in range(1, 30) for step in (("text", 0, "字" * n), ("sleep", 0.003))]
    answer = {"kind": "reply", "text": "字" * 29}
    runtime = await boot(fake, tmp_path, Cued(steps, [answer]), card_frame_interval_ms=0)
    await say(runtime, fake)
    refused = [
        r for r in fake.request_log if r["path"].startswith("/v1.0/card") and r["status"] != 200
    ]
    assert refused == [] and fake.cards[0].content == "字" * 29
    assert 1 < len(fake.cards[0].frames) < 30  # newer text merged into fewer frames
    await runtime.aclose()


async def test_markdown_mode_sends_replies_as_markdown(fake, tmp_path):
    runtime = await boot(fake, tmp_path, None, reply_mode="markdown", card_template_id=None)
    await say(runtime, fake, text="3 + 4 等于几")
    (message,) = fake.received
    assert message.msgtype == "markdown" and "7" in message.text and fake.cards == []
    await runtime.aclose()


def test_a_long_answer_is_cut_into_parts_at_a_boundary_each_under_the_block():
    from agent.cards.broker import card_parts

    text = "\n\n".join(f"第{n}段：" + "内容" * 40 for n in range(1, 60))
    parts = card_parts(text, 2500)
    assert len(parts) >= 2 and all(len(p) <= 2500 for p in parts)
    assert all(p.startswith("第") for p in parts), "each part begins at a paragraph"
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")
    assert card_parts("短", 2500) == ["短"]
    unbroken = "字" * 6000  # no boundary at all: cut at the block
    assert [len(p) for p in card_parts(unbroken, 2500)] == [2500, 2500, 1000]


def test_each_part_has_a_key_of_its_own():
    from agent.cards.broker import part_intent
    from tests.test_card_store import _intent

    intent = _intent("m1", "run-1")
    assert part_intent(intent, 1) is intent
    second = part_intent(intent, 2)
    assert second.idempotency_key == "m1:terminal#2" and second.intent_id != intent.intent_id
