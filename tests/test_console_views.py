"""The console's threads page, from the store: a person's conversation first, the robot's
own events under their own heading, and an act shown as an act rather than as words."""

from __future__ import annotations

from agent.cli.console.views import Selection, is_own, message_view, overview
from agent.cli.trace import Cause, Trace
from agent.dingtalk.callback import callback_to_event
from agent.proactive.heartbeat import BEAT_CONVERSATION
from storage import Store
from tests.factories import T0, callback, event


def test_the_page_opens_on_a_persons_conversation_and_keeps_own_events_apart(tmp_path):
    store = Store(tmp_path / "dta.db")
    try:
        store.events.add_event(event(msg_id="m1", user="u1"), "{}")
        beat = callback(msg_id="beat:1", user="dta-heartbeat", created_at=T0 + 60)
        beat.update(conversationId=BEAT_CONVERSATION)
        store.events.add_event(
            callback_to_event(beat, received_at=T0 + 60, frame_message_id="f2"), "{}"
        )
        page = overview(store, Selection())
    finally:
        store.close()
    assert [c["id"] for c in page["own"]] == [BEAT_CONVERSATION]  # the newest, yet apart
    assert [c["id"] for c in page["conversations"]] == ["cid-dm-u1"]
    assert page["current"] == "cid-dm-u1"
    assert is_own(BEAT_CONVERSATION) and not is_own("cid-dm-u1")


def test_an_act_is_labelled_as_an_act_and_words_stay_words():
    act = {"kind": "act", "form": "act", "text": "创建待办「季度报告」 → verified", "attempts": []}
    words = {"kind": "reply", "form": "", "text": "好的", "attempts": []}
    view = message_view(Trace("m1", Cause.ANSWERED, "", "", intents=[act, words]))
    assert [(r["form"], r["text"]) for r in view["replies"]] == [
        ("act", "创建待办「季度报告」 → verified"),
        ("", "好的"),
    ]


def test_a_runs_tokens_and_cost_are_shown_with_its_message(tmp_path):
    from storage.usage import ModelUsage

    run = {"state": "done", "usage": {"total_tokens": 4173}, "model_cost": 0.0021}
    view = message_view(Trace("m1", Cause.ANSWERED, "", "", run=run))
    assert (view["tokens"], view["cost"]) == (4173, 0.0021)
    assert message_view(Trace("m2", Cause.ANSWERED, "", ""))["tokens"] is None  # rules
    store = Store(tmp_path / "dta.db")
    try:
        assert store.usage.cost_of_run("r1") is None
        store.usage.add_model_usage(
            ModelUsage(
                run_id="r1",
                actor_id="u1",
                conversation_id="cid",
                model="qwen-plus",
                at=T0,
                prompt_tokens=100,
                completion_tokens=20,
                cost=0.0021,
            )
        )
        assert store.usage.cost_of_run("r1") == ("qwen-plus", 120, 0.0021)
    finally:
        store.close()
