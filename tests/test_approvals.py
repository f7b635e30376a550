"""Approvals in the store (both backends): the first decision stands, only the authorizer
decides, expiry and void are decisions too, and a redelivered click decides nothing new."""

import json

import pytest

from agent.acts.approvals import ONLY_THE_ASKER, ApprovalDesk, code_reply
from agent.acts.authority import authorize
from agent.acts.clicks import ClickDesk
from agent.clock import VirtualClock
from agent.contracts import ActionIntent, ActionKind, ApprovalStatus, CardClick
from agent.dingtalk.card_callback import parse_click
from agent.tools.builtin import BUILTIN
from tests.factories import T0, event, run_for

ARGS = {"subject": "整理发票", "executors": ["u2"]}


def intent(run, arguments=ARGS, tool="dingtalk.todo.create"):
    auth = authorize(BUILTIN[tool], arguments, run.origin, T0, 600)
    return ActionIntent(
        intent_id=f"int_{auth.arguments_hash[:6]}",
        run_id=run.run_id,
        event_id=run.event_id,
        kind=ActionKind.ACT,
        idempotency_key=f"{run.event_id}:act:{auth.arguments_hash[:24]}",
        target=run.origin,
        tool=tool,
        arguments=arguments,
        authorization=auth,
        gate_checks=[],
        created_at=T0,
    )


@pytest.fixture
def desk(store):
    return ApprovalDesk(store, VirtualClock(T0), timeout_s=600, cards=True)


def click(frame, user, action="approve", track=None):
    return CardClick(
        frame_id=frame, out_track_id=track, user_id=user, action=action, received_at=T0
    )


def test_only_the_authorizer_decides_and_the_first_decision_stands(store, desk):
    run = run_for(event(user="u1"))
    record, voided = desk.open(run, intent(run))
    assert record.status is ApprovalStatus.PENDING and voided == []
    assert desk.decide(record, "u3", "approve").outcome == "not_authorizer"
    first = desk.decide(record, "u1", "deny")
    assert first.decided and first.record.status is ApprovalStatus.DENIED
    again = desk.decide(record, "u1", "approve")  # a stale copy: the row says denied
    assert not again.decided and again.outcome == "already_denied"
    assert store.approvals.get_approval(record.approval_id).decided_by == "u1"


def test_the_same_act_asked_again_finds_its_own_approval(store, desk):
    run = run_for(event(user="u1"))
    first, _ = desk.open(run, intent(run))
    second, voided = desk.open(run, intent(run))
    assert second.approval_id == first.approval_id and voided == []
    assert len(store.approvals.all(run.event_id)) == 1


def test_changed_arguments_void_what_was_pending(store, desk):
    run = run_for(event(user="u1"))
    old, _ = desk.open(run, intent(run))
    # the same message asking for the same subject for two people: two acts, both wait
    both, voided = desk.open(run, intent(run, {**ARGS, "executors": ["u4"]}))
    assert voided == [] and store.approvals.get_approval(old.approval_id).status.is_open
    # a later message asking again with other arguments corrects it: the old one is void
    later = run_for(event(user="u1", msg_id="m2")).model_copy(update={"run_id": "run_2"})
    new, voided = desk.open(later, intent(later, {**ARGS, "executors": ["u3"]}))
    assert sorted(v.approval_id for v in voided) == sorted([old.approval_id, both.approval_id])
    assert store.approvals.get_approval(old.approval_id).status is ApprovalStatus.VOID
    assert desk.decide(store.approvals.get_approval(old.approval_id), "u1", "approve").outcome == (
        "already_void"
    )
    assert new.status is ApprovalStatus.PENDING


def test_expiry_is_a_decision_found_without_a_heartbeat(store):
    clock = VirtualClock(T0)
    desk = ApprovalDesk(store, clock, timeout_s=600, cards=True)
    run = run_for(event(user="u1"))
    record, _ = desk.open(run, intent(run))
    assert desk.expire_due() == []
    clock.advance_to(T0 + 601)
    (expired,) = desk.expire_due()
    assert expired.status is ApprovalStatus.EXPIRED
    assert desk.decide(record, "u1", "approve").outcome == "already_expired"
    assert [r.approval_id for r in store.approvals.unsettled_approvals()] == [record.approval_id]
    assert store.approvals.claim_settlement(record.approval_id, "approval:x")
    assert not store.approvals.claim_settlement(record.approval_id, "m9")  # one run carries it out
    assert store.approvals.unsettled_approvals() == []


def test_a_redelivered_click_decides_nothing_new_and_a_strangers_is_private(store, desk):
    run = run_for(event(user="u1"))
    record, _ = desk.open(run, intent(run))
    store.approvals.set_approval_track(record.approval_id, record.approval_id)
    clicks = ClickDesk(store, desk)
    stranger = clicks.receive(click("f1", "u3", track=record.approval_id))
    assert stranger.response["userPrivateData"]["cardParamMap"]["status"] == ONLY_THE_ASKER
    assert stranger.event is None
    yes = clicks.receive(click("f2", "u1", track=record.approval_id))
    assert yes.response["cardData"]["cardParamMap"]["status"].startswith("已同意")
    again = clicks.receive(click("f2", "u1", "deny", track=record.approval_id))
    # the presser alone hears it again: a late redelivery never rewrites the shared card
    private = again.response["userPrivateData"]["cardParamMap"]["status"]
    assert again.event is None and "已同意" in private and "cardData" not in again.response
    later = clicks.receive(click("f3", "u1", "deny", track=record.approval_id))
    assert "cardData" not in later.response and later.event is None  # a second press
    assert store.approvals.get_approval(record.approval_id).status is ApprovalStatus.APPROVED
    outcomes = [c["outcome"] for c in store.approvals.clicks(record.approval_id)]
    assert outcomes == ["not_authorizer", "approved", "already_approved"]


def test_card_callbacks_are_read_in_both_shapes():
    content = json.dumps({"cardPrivateData": {"actionIds": ["x"], "params": {"action": "accept"}}})
    data = {"outTrackId": "apv_1", "userId": "u1", "content": content}
    assert parse_click(data, "f1", T0).action == "approve"
    value = json.dumps({"cardPrivateData": {"actionIds": ["deny"]}})
    assert parse_click({"outTrackId": "apv_1", "userId": "u1", "value": value}, "f", T0).action == (
        "deny"
    )
    with pytest.raises(ValueError, match="outTrackId"):
        parse_click({"userId": "u1"}, "f", T0)


def test_code_replies_are_recognised_alone_and_nothing_else():
    assert code_reply("确认 4F2A") == ("approve", "4F2A")
    assert code_reply(" 拒绝「4f2a」 ") == ("deny", "4F2A")
    assert code_reply("approve 4F2A") == ("approve", "4F2A")
    assert code_reply("我确认 4F2A 没问题吧") is None
    assert code_reply("确认一下") is None


def test_another_object_is_another_act_and_both_wait(store, desk):
    run = run_for(event(user="u1"))
    first, _ = desk.open(run, intent(run))
    second, voided = desk.open(run, intent(run, {"subject": "订机票", "executors": ["u2"]}))
    assert voided == [] and second.approval_id != first.approval_id
    assert store.approvals.get_approval(first.approval_id).status is ApprovalStatus.PENDING


def test_an_asker_whose_prompt_is_in_doubt_gets_the_code_in_one_line(store, desk):
    """The line a re-driven run sends when a prompt's send was cut: the code, in the asker's
    form (@我 in a group), and the expiry."""
    run = run_for(event(msg_id="m1", sender_id="u1"))
    record, _ = desk.open(run, intent(run), english=False)
    line = desk.code_line(record, in_group=True)
    assert f"同意请回复「@我 确认 {record.code}」" in line and f"拒绝 {record.code}" in line
    assert "创建待办" in line and "前有效" in line
    english = desk.code_line(record.model_copy(update={"english": True}), in_group=False)
    assert f"reply 「approve {record.code}」" in english


def test_the_approvals_probe_counts_a_request_nobody_was_asked_about(store, desk):
    from types import SimpleNamespace

    from lab.reliability.approvals.judging import _never_asked

    run = run_for(event(msg_id="apv-3", sender_id="apv-u3"))
    record, _ = desk.open(run, intent(run), english=False)
    per_request = {"apv-3": [(record, "expired")]}
    nothing = SimpleNamespace(cards=[], received=[])
    assert _never_asked(nothing, per_request) == ["apv-3"]
    line = SimpleNamespace(
        msgtype="text",
        text=desk.code_line(record, in_group=False),
        user_ids=["apv-u3"],
        at_user_ids=[],
        conversation_id="cid",
    )
    assert _never_asked(SimpleNamespace(cards=[], received=[line]), per_request) == []
    card = SimpleNamespace(data={"msg_id": "apv-3"})
    assert _never_asked(SimpleNamespace(cards=[card], received=[]), per_request) == []
