"""Claims and promises (gates/claims.py, the action gate's ``claims`` and ``promises``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.components import action_policy
from agent.contracts import RefusalReason
from gates.action import ActionFacts, ActionGate, Approval, Refusal, RunTally
from gates.claims import done_claim, later_promise
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
    from lab.cases import Expect
    from lab.judge import model_findings

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
