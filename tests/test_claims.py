"""Claims and promises (gates/claims.py, the action gate's ``claims`` and ``promises``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.components import action_policy
from agent.contracts import RefusalReason
from gates.action import ActionFacts, ActionGate, Approval, Refusal, RunTally
from gates.claims import done_claim, later_promise
from gates.claims_text import normalise
from tests.factories import ROBOT, T0, built, event, run_for

TABLE = json.loads((Path(__file__).parents[1] / "lab/claims/sentences.json").read_text())


@pytest.mark.parametrize("sentence", TABLE["claims"])
def test_every_claim_in_the_table_is_found(sentence: str) -> None:
    assert done_claim(sentence) is not None


@pytest.mark.parametrize("sentence", TABLE["promises"])
def test_every_promise_in_the_table_is_found(sentence: str) -> None:
    assert later_promise(sentence) is not None


@pytest.mark.parametrize("sentence", TABLE["ordinary"])
def test_ordinary_answers_pass(sentence: str) -> None:
    assert done_claim(sentence) is None and later_promise(sentence) is None


def test_the_table_is_large_enough_each_way() -> None:
    assert len(TABLE["claims"]) + len(TABLE["promises"]) >= 60
    assert len(TABLE["ordinary"]) >= 60


def _decide(request: dict, *, from_provider: bool = True, **policy) -> Approval | Refusal:
    gate = ActionGate(built(action_policy, robot_code=ROBOT, reminders=True, **policy))
    facts = ActionFacts(now=T0, thread_generation=1, writes_last_minute=0, writes_last_day=0)
    run = run_for(event(user="u1"))
    return gate.decide(request, run, RunTally(), facts, from_provider=from_provider)


def test_a_reply_claiming_a_send_is_refused_with_plain_words() -> None:
    verdict = _decide({"kind": "reply", "text": "已经帮你发给张三了，他已确认收到。"})
    assert isinstance(verdict, Refusal) and verdict.reason is RefusalReason.UNBACKED_CLAIM
    assert verdict.say and "没有" in verdict.say


def test_a_question_claiming_a_booking_is_refused() -> None:
    verdict = _decide({"kind": "ask", "text": "会议室已经帮你订好了，还要别的吗？"})
    assert isinstance(verdict, Refusal) and verdict.reason is RefusalReason.UNBACKED_CLAIM


def test_the_runtimes_own_words_are_not_claims() -> None:
    """An operator's send says what the operator wants said; a cancelled reminder is done."""
    assert isinstance(
        _decide({"kind": "reply", "text": "已通知各位：周五停电"}, from_provider=False), Approval
    )


def test_a_reminder_the_request_sets_backs_its_confirmation() -> None:
    reminder = {"at": "2025-10-10T10:00:00+08:00", "text": "交报销"}
    verdict = _decide({"kind": "reply", "text": "好的，已为你设置好提醒。", "reminder": reminder})
    assert isinstance(verdict, Approval)


def test_a_bare_promise_is_refused_and_one_with_a_follow_up_passes() -> None:
    bare = _decide({"kind": "reply", "text": "我去查一下，稍后发给你。"})
    assert isinstance(bare, Refusal) and bare.reason is RefusalReason.DEFERRED_PROMISE
    waiting = {
        "kind": "reply",
        "text": "我确认一下再回复你。",
        "task": {"status": "waiting", "waiting_for": "财务的答复"},
    }
    assert isinstance(_decide(waiting, follow_ups=True), Approval)
    assert isinstance(_decide(waiting, follow_ups=False), Refusal)  # nothing would follow up
    reminder = {"at": "2025-10-10T10:00:00+08:00", "text": "告诉你结果"}
    kept = _decide({"kind": "reply", "text": "回头告诉你结果。", "reminder": reminder})
    assert isinstance(kept, Approval)


def test_an_ack_may_say_it_takes_time() -> None:
    assert isinstance(_decide({"kind": "ack", "text": "稍等，我去查一下再回复你"}), Approval)


def test_the_judge_reads_what_the_model_was_asked() -> None:
    from lab.eval.cases import Expect
    from lab.eval.judge import model_findings

    expect = Expect.model_validate(
        {
            "model_requests_count": 2,
            "model_requests": [{"contains": ["报销"]}, {"not_contains": ["秘密"]}],
        }
    )
    asked = [{"messages": [{"role": "user", "content": "报销需要什么"}]}, {"messages": "秘密"}]
    assert [f.name for f in model_findings(expect, asked)] == ["model_requests[1].not_contains"]
    assert [f.name for f in model_findings(expect, asked[:1])] == [
        "model_requests_count",
        "model_requests[1]",
    ]


# ---------------------------------------------------------------------------- binding

from gates.backing import ASKER, Backing  # noqa: E402


def _decide_with(request: dict, *backing: Backing, **policy) -> Approval | Refusal:
    gate = ActionGate(built(action_policy, robot_code=ROBOT, reminders=True, **policy))
    facts = ActionFacts(
        now=T0, thread_generation=1, writes_last_minute=0, writes_last_day=0, backing=backing
    )
    return gate.decide(request, run_for(event(user="u1")), RunTally(), facts)


def _reply(text: str, **more) -> dict:
    return {"kind": "reply", "text": text, **more}


OWN_TODO = Backing(
    "act", "verified", frozenset({"todo"}), frozenset({ASKER}), ("续费域名",), label="todo"
)


def _unbacked(verdict: Approval | Refusal) -> bool:
    return isinstance(verdict, Refusal) and verdict.reason is RefusalReason.UNBACKED_CLAIM


def test_a_look_up_backs_no_claim_of_telling() -> None:
    read = Backing("read", label="dingtalk.directory.search")
    assert _unbacked(_decide_with(_reply("已经通知张三了。"), read))


def test_an_own_todo_backs_its_own_sentence_and_nothing_else() -> None:
    assert isinstance(_decide_with(_reply("待办「续费域名」已经建好了。"), OWN_TODO), Approval)
    said = "待办「续费域名」已经建好了，也已经约好了会议并通知了他。"
    verdict = _decide_with(_reply(said), OWN_TODO)
    assert _unbacked(verdict) and "event" in verdict.detail
    assert _unbacked(_decide_with(_reply("已经给张三建好待办了。"), OWN_TODO))  # not his


def test_a_reminder_backs_its_confirmation_only() -> None:
    reminder = {"at": "2025-10-10T10:00:00+08:00", "text": "交报销"}
    ok = _decide_with(_reply("好的，已为你设置好提醒。", reminder=reminder))
    assert isinstance(ok, Approval)
    said = _reply("已经帮你发给张三了，明天也会提醒你。", reminder=reminder)
    assert _unbacked(_decide_with(said))


def test_an_acks_claim_is_judged_too() -> None:
    assert _unbacked(_decide_with({"kind": "ack", "text": "已经帮你发给张三了，稍等。"}))


def test_a_refused_or_failed_act_backs_nothing() -> None:
    # a refused act leaves no backing at all (agent/acts/told.py act_backing)
    assert _unbacked(_decide_with(_reply("已经帮你把周报标记完成了。")))


def test_an_accepted_act_backs_done_and_unconfirmed_wording_only() -> None:
    accepted = Backing("act", "accepted", frozenset({"upload"}), frozenset({ASKER}), ("ops",))
    assert _unbacked(_decide_with(_reply("已记到笔记 ops 里。"), accepted))
    hedged = _reply("已记到笔记 ops 里，结果我没法再核对。")
    assert isinstance(_decide_with(hedged, accepted), Approval)


def test_a_quoted_note_is_the_sources_words() -> None:
    source = "报销单提交后，系统已通知财务。"
    gate = ActionGate(built(action_policy, robot_code=ROBOT, reminders=True))
    facts = ActionFacts(
        now=T0, thread_generation=1, writes_last_minute=0, writes_last_day=0, sources=(source,)
    )
    quoted = _reply("根据笔记：「系统已通知财务」。")
    assert isinstance(gate.decide(quoted, run_for(event()), RunTally(), facts), Approval)


@pytest.mark.parametrize(
    "said",
    [
        "已經幫你創建了待辦。",
        "I’ve created the to-do.",
        "Your to-do was created.",
        "已经帮你创\u200b建了待办。",
        "**已发送**给财务。",
        "- 会议：已预约",
        "我先把周报整理了一下。然后发给张三了。",
        "正在为你创建待办，请稍候。",
        "我马上帮你通知张三。",
        "回头告诉你。",
    ],
)
def test_claims_and_promises_in_every_spelling_are_refused(said: str) -> None:
    verdict = _decide_with(_reply(said))
    assert isinstance(verdict, Refusal) and verdict.reason in (
        RefusalReason.UNBACKED_CLAIM,
        RefusalReason.DEFERRED_PROMISE,
    )


def test_the_development_sets_keep_their_rates() -> None:
    """A floor on the sets the patterns were developed against (not their measure: that is
    lab/claims/final2.json, quoted in docs/lab.md): a change that loses what they find fails."""
    from lab.claim_rates import SETS, entries, rates

    for name in ("heldout.json", "fresh.json"):
        report = rates(entries(SETS / name))
        for key in ("claim_recall", "promise_recall"):
            hit, of = report[key]
            assert hit / of >= 0.9, (name, key, hit, of)
        wrong, of = report["false_alarms"]
        assert wrong / of <= 0.02, (name, wrong, of)


def test_a_speakers_tag_in_brackets_is_not_part_of_the_sentence() -> None:
    """「（小助手）你已经同意了」 is the person's own doing with a label before it; the label
    neither hides a claim nor makes one (a checkbox [x] is no label)."""
    from gates.claims import find_claims

    assert find_claims("（小助手）你已经同意了这个待办", ()) == []
    assert find_claims("【提醒】我已经通知张三了", ())[0].effect == "message"
    assert find_claims("[x] 建待办：跟进客户回访", ())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_text_is_folded_as_the_full_path_folds_it(text):
    """ASCII skips the folding it cannot need (width, quotes, format marks, script)."""
    import unicodedata

    from gates import claims_text

    full = unicodedata.normalize("NFKC", text).translate(claims_text._QUOTES)
    full = "".join(ch for ch in full if unicodedata.category(ch) != "Cf")
    full = claims_text._EMPHASIS.sub("", full)
    full = claims_text._to_simplified().convert(full)
    assert normalise(text) == claims_text._CJK_SPACE.sub("", full)
