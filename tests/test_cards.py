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
from agent.contracts import ActionKind, AttemptOutcome, CardState, ReceiptStatus, RunState
from agent.crashpoints import Crash, CrashPoints
from agent.runtime import Runtime
from lab.fake import FakeDingTalk, build_callback, callback_frame
from lab.fake.calls import call_counts
from lab.fixtures.attachments import csv, entry, png
from lab.models.labelled import labelled
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
        elif what == "emit":
            on_event(step[1])
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


async def boot(
    fake: FakeDingTalk,
    tmp_path: Path,
    provider: Any,
    crash: CrashPoints | None = None,
    **over: Any,
) -> Runtime:
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
    runtime = Runtime(settings, clock=fake.clock, provider=provider, crash=crash)
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
    (receipt,) = runtime.store.actions.receipts()
    assert (receipt.status, receipt.reason) == (ReceiptStatus.FAILED, "card_cut_off")
    run = runtime.store.events.get_run("m1")
    assert run.state is RunState.FAILED and run.failure.startswith("card_cut_off")
    await runtime.aclose()


async def test_a_provider_that_breaks_mid_answer_leaves_no_card_spinning(fake, tmp_path):
    provider = Cued([("text", 0, "第一步"), ("sleep", 0.1), ("fail",)], [])
    runtime = await boot(fake, tmp_path, provider)
    await say(runtime, fake)
    (card,) = fake.cards
    assert card.finalized and card.content.startswith("第一步")
    (receipt,) = runtime.store.actions.receipts()
    assert receipt.status is ReceiptStatus.FAILED and receipt.evidence.frames >= 1
    assert "unavailable" in runtime.store.events.get_run("m1").failure
    assert runtime.store.cards.all()[0].state is CardState.FINALIZED
    await runtime.aclose()


async def test_a_slow_first_word_gets_the_ack_first_then_the_card(fake, tmp_path):
    answer = {"kind": "reply", "text": "答案来了"}
    provider = Cued([("sleep", 0.3), ("text", 0, "答案来了")], [answer])
    runtime = await boot(fake, tmp_path, provider, ack_after_s=0.1)
    await say(runtime, fake)
    assert [m.channel for m in fake.received] == ["session_webhook", "card"]
    assert fake.received[0].msgtype == "text" and fake.cards[0].content == labelled("答案来了")
    kinds = [(r.kind, r.status) for r in runtime.store.actions.receipts()]
    assert kinds == [
        (ActionKind.ACK, ReceiptStatus.ACCEPTED),
        (ActionKind.REPLY, ReceiptStatus.ACCEPTED),
    ]
    await runtime.aclose()


async def test_the_models_own_ack_goes_first_and_only_once(fake, tmp_path):
    ack, reply = {"kind": "ack", "text": "稍等"}, {"kind": "reply", "text": "答案是 42"}
    steps = [("done", 0, ack), ("sleep", 0.05), ("text", 1, "答案是 42"), ("done", 1, reply)]
    runtime = await boot(fake, tmp_path, Cued(steps, [ack, reply]))
    await say(runtime, fake)
    assert [m.text for m in fake.received] == ["稍等", labelled("答案是 42")]
    statuses = [(r.kind, r.status) for r in runtime.store.actions.receipts()]
    assert statuses == [
        (ActionKind.ACK, ReceiptStatus.ACCEPTED),
        (ActionKind.REPLY, ReceiptStatus.ACCEPTED),
    ]
    assert runtime.store.events.get_run("m1").state is RunState.DONE
    await runtime.aclose()


async def test_an_answer_repaired_into_something_else_ends_its_card_cut_off(fake, tmp_path):
    silence = {"kind": "silence", "reason": "nothing to say"}
    runtime = await boot(fake, tmp_path, Cued([("text", 0, "开头")], [silence], repaired=True))
    await say(runtime, fake)
    assert fake.cards[0].finalized and "中断" in fake.cards[0].content
    card, refused = runtime.store.actions.receipts()
    assert card.reason == "card_cut_off" and refused.reason == "run_terminal"
    assert runtime.store.events.get_run("m1").state is RunState.FAILED
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
    (receipt,) = runtime.store.actions.receipts()
    assert receipt.status is ReceiptStatus.FAILED
    assert runtime.store.cards.all()[0].state is CardState.ABANDONED
    await runtime.aclose()


async def test_a_card_whose_end_never_got_through_is_closed_by_the_sweep(fake, tmp_path):
    fake.arm_fault({"card_stream": {"qps_limit": True, "times": 1000}})
    fake.arm_fault({"card_update": {"qps_limit": True, "times": 1000}})
    answer = {"kind": "reply", "text": "最终答案"}
    runtime = await boot(fake, tmp_path, Cued([("text", 0, "最终答案")], [answer]))
    await say(runtime, fake)
    (receipt,) = runtime.store.actions.receipts()
    assert receipt.status is ReceiptStatus.FAILED and receipt.evidence.retries > 2
    assert receipt.reason == "card_final_late"
    assert not fake.cards[0].finalized
    assert runtime.store.events.get_run("m1").state is RunState.FAILED
    fake.faults.clear()
    assert await runtime.sweep_cards() == 0  # touched too recently
    fake.clock.advance_to(fake.clock.now() + 10)
    assert await runtime.sweep_cards() == 1
    assert fake.cards[0].finalized and fake.cards[0].content == labelled("最终答案")
    assert runtime.store.cards.all()[0].state is CardState.FINALIZED
    # What the person finally saw is on record: the whole answer, delivered late.
    first, later = runtime.store.actions.receipts()
    assert (first.status, later.status) == (ReceiptStatus.FAILED, ReceiptStatus.ACCEPTED)
    assert later.reason == "card_final_late" and later.intent_id == first.intent_id
    assert runtime.store.events.get_run("m1").state is RunState.DONE
    assert await runtime.sweep_cards() == 0  # closed for good: no third receipt
    await runtime.aclose()


async def test_no_card_call_is_recorded_as_sent_while_it_waits_for_its_slot(fake, tmp_path):
    answer = {"kind": "reply", "text": "答案"}
    runtime = await boot(fake, tmp_path, Cued([("text", 0, "答案")], [answer]))
    pacer = runtime.cards.cards.pacer
    waits: list[list[AttemptOutcome]] = []
    take = pacer.slot

    async def slot() -> None:  # what the store says while each call waits for its slot
        cards = runtime.store.cards.all()
        waits.append(
            [a.outcome for c in cards for a in runtime.store.actions.attempts(c.intent_id)]
        )
        await take()

    pacer.slot = slot
    await say(runtime, fake)
    assert len(waits) >= 3 and not [w for w in waits if AttemptOutcome.STARTED in w]
    assert fake.cards[0].content == labelled("答案") and fake.cards[0].finalized
    await runtime.aclose()


async def _blank_card(fake: FakeDingTalk, tmp_path: Path) -> None:
    """A streamed card created, then the runtime dies while its first frame waits for its
    slot: the card exists and shows nothing."""
    crash = CrashPoints()
    crash.arm("card_call_waits")
    streamed = Cued([("text", 0, "答案")], [{"kind": "reply", "text": "答案"}])
    first = await boot(fake, tmp_path, streamed, crash, card_frames_per_second=1)
    with pytest.raises(Crash):
        await say(first, fake)
    await first.aclose()
    assert fake.cards[0].content == "" and not fake.cards[0].finalized


async def test_a_blank_card_carries_the_honest_failure_when_the_model_is_down(fake, tmp_path):
    await _blank_card(fake, tmp_path)
    again = await boot(fake, tmp_path, Cued([("fail",)], []), card_frames_per_second=1)
    await again.drain_store()
    (card,) = fake.cards  # never a second card, and no text beside it
    assert card.finalized and "连不上" in card.content and len(fake.received) == 1
    (receipt,) = again.store.actions.receipts()
    assert receipt.status is ReceiptStatus.ACCEPTED and receipt.evidence.out_track_id
    assert again.store.events.get_run("m1").state is RunState.FAILED
    await again.aclose()


async def test_a_blank_card_whose_run_ends_without_answering_is_closed_by_the_sweep(fake, tmp_path):
    await _blank_card(fake, tmp_path)
    answer = Cued([("text", 0, "答案")], [{"kind": "reply", "text": "答案"}])
    again = await boot(fake, tmp_path, answer, card_frames_per_second=1, paused=True)
    await again.drain_store()
    assert again.store.events.get_run("m1").state is RunState.SILENT  # the operator paused it
    assert again.store.cards.all()[0].state is CardState.STREAMING  # left for an answer
    fake.clock.advance_to(fake.clock.now() + 10)
    assert await again.sweep_cards() == 1
    (card,) = fake.cards
    assert card.finalized and "中断" in card.content
    await again.aclose()


async def test_frames_of_one_card_never_overlap(fake, tmp_path):
    fake.card_latency_s = 0.02
    steps = [step for n in range(1, 30) for step in (("text", 0, "字" * n), ("sleep", 0.003))]
    answer = {"kind": "reply", "text": "字" * 29}
    runtime = await boot(fake, tmp_path, Cued(steps, [answer]), card_frame_interval_ms=0)
    await say(runtime, fake)
    refused = [
        r for r in fake.request_log if r["path"].startswith("/v1.0/card") and r["status"] != 200
    ]
    assert refused == [] and fake.cards[0].content == labelled("字" * 29)
    assert 1 < len(fake.cards[0].frames) < 30  # newer text merged into fewer frames
    await runtime.aclose()


async def test_a_chart_the_gate_saw_at_the_start_goes_once_after_the_card(fake, tmp_path):
    """Attachments written before the text are in the head the card is approved on; they
    still go once, after the card, on the slot's own keys."""
    chart = entry("chart.png", png())
    answer = {"kind": "reply", "attachments": [chart], "text": "图表如下"}
    head = ReplyText(0, "图表如下", answer)
    runtime = await boot(fake, tmp_path, Cued([("emit", head), ("done", 0, answer)], [answer]))
    await say(runtime, fake)
    assert [m.channel for m in fake.received] == ["card", "openapi_oto"]
    assert (
        fake.received[1].msgtype == "image" and call_counts(fake.request_log)["media_upload"] == 1
    )
    keys = [i.idempotency_key for i in runtime.store.actions.intents("m1")]
    assert keys == ["m1:terminal", "m1:terminal#file1"]
    assert runtime.store.events.get_run("m1").state is RunState.DONE
    await runtime.aclose()


async def test_the_write_budget_keeps_the_chart_not_the_card(fake, tmp_path):
    answer = {"kind": "reply", "text": "图表如下", "attachments": [entry("chart.png", png())]}
    provider = Cued([("text", 0, "图表如下"), ("done", 0, answer)], [answer])
    runtime = await boot(fake, tmp_path, provider, write_budget_per_conversation_per_minute=1)
    await say(runtime, fake)
    assert [m.channel for m in fake.received] == ["card"]
    card, chart = runtime.store.actions.receipts()
    assert card.status is ReceiptStatus.ACCEPTED
    assert (chart.status, chart.reason) == (ReceiptStatus.REFUSED, "write_budget")
    assert runtime.store.events.get_run("m1").state is RunState.DONE
    await runtime.aclose()


class Mended(Cued):
    """Streams an answer whose chart DingTalk cannot take; its repair round sends a PNG."""

    async def respond(self, invocation: Any, skills: Sequence[Any]) -> ProviderReply:
        assert invocation.repair is not None
        assert invocation.repair.reason == "attachment_unsupported"
        chart = entry("chart.png", png())
        return ProviderReply(
            [{"kind": "reply", "text": "这是本季度的图表。", "attachments": [chart]}]
        )


async def test_a_chart_dingtalk_cannot_take_is_repaired_and_the_repair_sends_its_own(
    fake, tmp_path
):
    bad = {"kind": "reply", "text": "表格如下", "attachments": [entry("rows.png", csv())]}
    provider = Mended([("text", 0, "表格如下"), ("done", 0, bad)], [bad])
    runtime = await boot(fake, tmp_path, provider)
    await say(runtime, fake)
    assert fake.cards[0].content == "这是本季度的图表。"
    assert [m.msgtype for m in fake.received][-1] == "image"
    assert call_counts(fake.request_log)["media_upload"] == 1
    reasons = [(r.status, r.reason) for r in runtime.store.actions.receipts()]
    assert reasons[0] == (ReceiptStatus.REFUSED, "attachment_unsupported")
    assert reasons[1:] == [(ReceiptStatus.ACCEPTED, None)] * 2
    assert runtime.store.events.get_run("m1").state is RunState.DONE
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
