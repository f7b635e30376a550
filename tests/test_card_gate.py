"""A card is approved like a reply; its frames and its final answer pass the content checks."""

from __future__ import annotations

import pytest

from agent.config import ConfigError, Settings, validate_settings
from agent.contracts import RefusalReason
from gates.action import Approval, Refusal, RunTally
from gates.frames import final_check, frame_refusal, shown_text, unsafe_tail
from tests.factories import T0, event, run_for
from tests.test_action_gate import facts, gate

LONG = "段落。" * 2000  # 6000 characters: two messages as text, too long for one card


def test_a_card_is_one_intent_that_costs_one_write_however_long():
    text = "好" * 3000
    verdict = gate().decide(
        {"kind": "reply", "text": text},
        run_for(event()),
        RunTally(),
        facts(writes_last_minute=19),
        form="card",
    )
    assert isinstance(verdict, Approval)
    (intent,) = verdict.intents
    assert intent.content is not None and intent.content.msgtype == "card"
    assert intent.idempotency_key == "m1:terminal"


def test_a_card_holds_one_message_of_text():
    run = run_for(event())
    as_text = gate().decide({"kind": "reply", "text": LONG}, run, RunTally(), facts())
    as_card = gate().decide({"kind": "reply", "text": LONG}, run, RunTally(), facts(), form="card")
    assert isinstance(as_text, Approval) and len(as_text.intents) == 2
    assert isinstance(as_card, Refusal) and as_card.reason is RefusalReason.CONTENT_TOO_LARGE


def test_markdown_mode_turns_a_text_reply_into_markdown_and_leaves_other_kinds_alone():
    run = run_for(event())
    reply = gate().decide(
        {"kind": "reply", "text": "好"}, run, RunTally(), facts(), form="markdown"
    )
    ask = gate().decide({"kind": "ask", "text": "哪天？"}, run, RunTally(), facts(), form="card")
    assert isinstance(reply, Approval) and reply.intents[0].content.msgtype == "markdown"
    assert isinstance(ask, Approval) and ask.intents[0].content.msgtype == "text"


def test_frames_are_held_to_the_content_checks():
    g, run = gate(secrets=("s3cr3t-value",)), run_for(event())
    assert frame_refusal(g, "一半的答案", run) is None
    assert frame_refusal(g, "   ", run) is None
    leak = frame_refusal(g, "密钥是 s3cr3t-value", run)
    assert leak is not None and leak.reason is RefusalReason.SECRET_IN_CONTENT
    hook = frame_refusal(g, "https://oapi.dingtalk.com/robot/sendBySession?session=abc", run)
    assert hook is not None and hook.reason is RefusalReason.SECRET_IN_CONTENT
    long = frame_refusal(g, LONG, run)
    assert long is not None and long.reason is RefusalReason.CONTENT_TOO_LARGE


def test_the_final_answer_is_checked_whole():
    g, run = gate(), run_for(event())
    passed = final_check(g, {"kind": "reply", "text": "好", "title": "t"}, run, T0)
    assert passed.refusal is None and passed.reminder_due is None
    target = final_check(g, {"kind": "reply", "text": "好", "target": "u9"}, run, T0).refusal
    assert target is not None and target.reason is RefusalReason.SCHEMA_INVALID


def test_a_card_is_held_to_what_a_text_reply_is_held_to():
    """@ everyone in a frame or the answer, a reminder for someone else, reminders that no
    heartbeat delivers: refused as they are for text, with the same plain words."""
    run = run_for(event())
    assert frame_refusal(gate(), "好的 @所有人 明天开会", run).reason is RefusalReason.AT_ALL
    later = {"at": "2025-10-10T10:00:00+08:00", "text": "交报销"}  # the day after T0
    answer = {"kind": "reply", "text": "好的，明天提醒你", "reminder": later}
    off = final_check(gate(), answer, run, T0).refusal
    assert off is not None and off.reason is RefusalReason.REMINDER_NOT_ALLOWED
    assert off.say is not None and "还没开启" in off.say
    on = gate(reminders=True)
    set_ = final_check(on, answer, run, T0)
    assert set_.refusal is None and set_.reminder_due is not None and set_.reminder_due > T0
    theirs = {**answer, "reminder": {**later, "user_id": "u2"}}
    other = final_check(on, theirs, run, T0).refusal
    assert other is not None and other.reason is RefusalReason.REMINDER_NOT_ALLOWED


@pytest.mark.parametrize(
    ("text", "held"),
    [("密钥是 s3c", 3), ("密钥是 s", 1), ("done.", 0), ("s3cr3t-valu", 11), ("x s3cr3t-", 7)],
)
def test_the_start_of_a_secret_waits_for_the_next_text(text: str, held: int):
    assert unsafe_tail(text, ["s3cr3t-value", ""]) == held


MEDIA = "@lADPDe7s2ySi18PNA6XNBXg"
PIXEL = "![](https://tracker.example/p.gif?u=1)"


def _frames(whole: str) -> list[str]:
    """Every text a stream of ``whole`` could report, a character more each time."""
    return [whole[:end] for end in range(1, len(whole) + 1)]


def test_a_media_id_streamed_in_pieces_is_held_back_until_it_is_whole():
    g, run = gate(secrets=("s3cr3t-value",)), run_for(event())
    whole = f"报销流程见下图：![流程图]({MEDIA}) 按图提交即可。"
    image = whole.index("![")
    for text in _frames(whole):
        assert frame_refusal(g, text, run) is None, text
        shown = shown_text(g, text)
        if len(text) <= whole.index(")"):
            assert shown == text[:image], text  # never a part of the image
        else:
            assert shown == text
    assert final_check(g, {"kind": "reply", "text": whole}, run, T0).refusal is None


def test_a_tracking_pixel_streamed_in_pieces_is_refused_before_it_shows():
    """No frame shows any of it; the one that ends its address is refused foreign_image,
    naming the host (never the query), as the finished answer is."""
    g, run = gate(), run_for(event())
    whole = f"报销流程：先提交报销单。{PIXEL} 按图提交即可。"
    refused = None
    for text in _frames(whole):
        refused = frame_refusal(g, text, run)
        if refused is not None:
            break
        assert "![" not in shown_text(g, text) and "tracker" not in shown_text(g, text)
    assert refused is not None and refused.reason is RefusalReason.FOREIGN_IMAGE
    assert text == whole[: whole.index(PIXEL) + len(PIXEL)]  # the frame that ends it
    assert "tracker.example" in refused.detail and "u=1" not in refused.detail
    final = final_check(g, {"kind": "reply", "text": whole}, run, T0).refusal
    assert final is not None and final.reason is RefusalReason.FOREIGN_IMAGE


@pytest.mark.parametrize(
    "text",
    [
        "见图 ![](https://tracker.example/p.gif 还在写",  # an address a space ended
        "见图 <img src='https://tracker.example/p.gif' ",  # a tag not closed yet
        "见图 ![](//tracker.example/p.gif)" + "![](@l",  # an image before the held one
    ],
)
def test_an_image_that_has_ended_is_judged_while_more_is_written(text: str):
    refused = frame_refusal(gate(), text, run_for(event()))
    assert refused is not None and refused.reason is RefusalReason.FOREIGN_IMAGE


def test_an_image_the_answer_ends_inside_is_judged_with_the_finished_answer():
    g, run = gate(), run_for(event())
    text = "见图 ![](https://tracker.example/p.gif?u=1"  # a parenthesis never closed
    assert frame_refusal(g, text, run) is None and shown_text(g, text) == "见图 "
    refused = final_check(g, {"kind": "reply", "text": text}, run, T0).refusal
    assert refused is not None and refused.reason is RefusalReason.FOREIGN_IMAGE


def test_what_a_frame_holds_back_is_the_longer_of_a_secret_and_an_image():
    assert unsafe_tail("见图 ![](@lA", []) == len("![](@lA")
    assert unsafe_tail("见图 ![](@lA", ["@lA-secret"]) == len("![](@lA")
    assert unsafe_tail("见图 ![](@", ["](@lA-secret"]) == len("![](@")
    assert unsafe_tail("见图 s3c", ["s3cr3t"]) == 3
    assert unsafe_tail(f"见图 ![]({MEDIA}) 好", ["s3cr3t"]) == 0
    g, run = gate(), run_for(event())
    assert frame_refusal(g, "![](@l", run) is None  # all of it held: nothing shown to judge


def test_card_mode_needs_a_template_and_the_openapi():
    with pytest.raises(ConfigError, match="card_template_id"):
        validate_settings({"reply_mode": "card"}, "test")
    with pytest.raises(ConfigError, match="client_id"):
        validate_settings({"reply_mode": "card", "card_template_id": "t"}, "test")
    settings = Settings(reply_mode="card", card_template_id="t", client_id="a", client_secret="b")
    assert settings.card_content_key == "content" and settings.card_frames_per_second < 20


def test_a_cards_attachments_are_numbered_apart_from_its_later_parts():
    """A long card takes ``#2``, ``#3`` … for its later parts: its files never share them."""
    from lab.fixtures.attachments import entry, png

    raw = {"kind": "reply", "text": "图表", "attachments": [entry("a.png", png())] * 2}
    verdict = gate().decide(raw, run_for(event()), RunTally(), facts(), form="card")
    assert isinstance(verdict, Approval)
    keys = [i.idempotency_key for i in verdict.intents]
    assert keys == ["m1:terminal", "m1:terminal#file1", "m1:terminal#file2"]


def test_a_streamed_cards_attachments_are_decided_after_its_words():
    """Its files, known only with the finished answer: their own intents (the card's words
    are not among them), counted against the write budget beside the card's one write."""
    from gates.frames import card_attachments
    from lab.fixtures.attachments import csv, entry, png

    run = run_for(event())
    raw = {"kind": "reply", "text": "图表", "attachments": [entry("a.png", png())]}
    verdict = card_attachments(gate(), raw, run, facts(writes_last_minute=1))
    assert isinstance(verdict, Approval)
    (intent,) = verdict.intents
    assert intent.idempotency_key == "m1:terminal#file1" and intent.content.msgtype == "image"
    assert verdict.payload(intent) == png()
    over = card_attachments(gate(), raw, run, facts(writes_last_minute=20))
    assert isinstance(over, Refusal) and over.reason is RefusalReason.WRITE_BUDGET
    bad = {**raw, "attachments": [entry("rows.png", csv())]}
    assert final_check(gate(), bad, run, T0).refusal.reason is RefusalReason.ATTACHMENT_UNSUPPORTED
