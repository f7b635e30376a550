"""The action gate's act checks: a write runs only with its tool enabled, the asker's
authority, room in the act budgets and, after an approval, that approval's yes to exactly
these arguments; an act touching others passes only to wait for approval."""

import pytest

from agent.acts.authority import authorize
from agent.components import action_policy
from agent.contracts import (
    ActionKind,
    ApprovalRecord,
    ApprovalStatus,
    RefusalReason,
)
from agent.tools.builtin import BUILTIN
from gates.action import ActionFacts, ActionGate, Approval, Refusal, RunTally
from tests.factories import ROBOT, T0, built, event, run_for
from tests.test_action_gate import ACT_PATH

TOOLS = ("dingtalk.todo.create", "dingtalk.todo.complete", "dingtalk.calendar.create_event")
MINE = {"kind": "act", "tool": "dingtalk.todo.create", "arguments": {"subject": "周报"}}
THEIRS = {
    "kind": "act",
    "tool": "dingtalk.todo.create",
    "arguments": {"subject": "周报", "executors": ["u2"]},
}


def auth_for(raw, run):
    return authorize(BUILTIN[raw["tool"]], raw["arguments"], run.origin, T0, 3600)


def approval(raw, run, status, arguments=None):
    auth = auth_for({**raw, "arguments": arguments or raw["arguments"]}, run)
    return ApprovalRecord(
        approval_id="apv_1",
        event_id=run.event_id,
        run_id=run.run_id,
        conversation_id=run.origin.conversation_id,
        tool=raw["tool"],
        arguments=arguments or raw["arguments"],
        authorization=auth,
        status=status,
        code="4F2A",
        created_at=T0,
        expires_at=T0 + 3600,
    )


def decide(raw=MINE, run=None, tools=TOOLS, **fact_changes):
    run = run or run_for(event())
    gate = ActionGate(built(action_policy, robot_code=ROBOT, tools=list(tools)))
    facts = {
        "now": T0,
        "thread_generation": 1,
        "writes_last_minute": 0,
        "writes_last_day": 0,
        "authorization": auth_for(raw, run) if raw["tool"] in BUILTIN else None,
    }
    facts.update(fact_changes)
    return gate.decide(raw, run, RunTally(), ActionFacts(**facts))


ACT_REFUSING = [
    ("tool", RefusalReason.TOOL_NOT_ALLOWED, {"tools": ("dingtalk.todo.list",)}),
    ("authority", RefusalReason.NOT_AUTHORIZED, {"authority_problem": "not on their list"}),
    ("people", RefusalReason.PERSON_UNRESOLVED, {"unresolved_people": ("张三建个",)}),
    ("act_budget", RefusalReason.ACT_BUDGET, {"acts_last_day_conversation": 20}),
    ("approval", RefusalReason.APPROVAL_DENIED, {"approval": ApprovalStatus.DENIED}),
    ("approval", RefusalReason.APPROVAL_EXPIRED, {"approval": ApprovalStatus.EXPIRED}),
    ("approval", RefusalReason.APPROVAL_VOID, {"approval": ApprovalStatus.VOID}),
]


@pytest.mark.parametrize(
    ("check", "reason", "case"), ACT_REFUSING, ids=[r.value for _, r, _ in ACT_REFUSING]
)
def test_each_act_check_refuses_alone(check, reason, case):
    run = run_for(event())
    changes = dict(case)
    if "approval" in changes:
        changes["approval"] = approval(THEIRS, run, changes["approval"])
    result = decide(THEIRS, run, **changes)
    assert isinstance(result, Refusal), result
    assert result.reason is reason
    assert result.kind is ActionKind.ACT and not result.terminal
    assert result.checked == ACT_PATH[: ACT_PATH.index(check) + 1]


def test_the_askers_own_todo_runs_at_once_and_one_for_a_colleague_waits():
    mine = decide(MINE)
    assert isinstance(mine, Approval) and not mine.waits_for_approval
    (intent,) = mine.intents
    assert intent.tool == "dingtalk.todo.create" and intent.authorization.impact == "own"
    assert intent.idempotency_key.startswith("m1:act:")
    theirs = decide(THEIRS)
    assert isinstance(theirs, Approval) and theirs.waits_for_approval
    assert theirs.intents[0].authorization.audience == ["u2"]


def test_an_approved_act_runs_and_changed_arguments_void_the_approval():
    run = run_for(event())
    yes = approval(THEIRS, run, ApprovalStatus.APPROVED)
    result = decide(THEIRS, run, approval=yes)
    assert isinstance(result, Approval) and not result.waits_for_approval
    other = {**THEIRS, "arguments": {"subject": "周报", "executors": ["u3"]}}
    changed = decide(other, run, approval=yes)
    assert isinstance(changed, Refusal) and changed.reason is RefusalReason.APPROVAL_VOID


def test_the_authorizer_is_the_asker_whatever_the_arguments_say():
    run = run_for(event(user="u7"))
    result = decide(THEIRS, run)
    assert result.intents[0].authorization.authorizer == "u7"


def test_an_act_never_carries_words_and_a_provider_cannot_send_a_confirm():
    bad = decide({**MINE, "text": "done"})
    assert isinstance(bad, Refusal) and bad.reason is RefusalReason.SCHEMA_INVALID
    run = run_for(event())
    confirm = {"kind": "confirm", "text": "确认？", "approval_id": "apv_1"}
    gate = ActionGate(built(action_policy, robot_code=ROBOT, tools=list(TOOLS)))
    facts = ActionFacts(now=T0, thread_generation=1, writes_last_minute=0, writes_last_day=0)
    refused = gate.decide(confirm, run, RunTally(), facts)
    assert isinstance(refused, Refusal) and refused.reason is RefusalReason.ACTION_NOT_ALLOWED
    hosted = gate.decide(confirm, run, RunTally(), facts, from_provider=False)
    assert isinstance(hosted, Approval)
    assert hosted.intents[0].idempotency_key == "m1:confirm:apv_1"


def test_every_builtin_write_declares_its_idempotency_and_read_back():
    from agent.acts.executor import ActExecutor

    writes = [spec for spec in BUILTIN.values() if spec.effect == "write"]

    class Broker:
        clock = None

    executor = ActExecutor(None, None, Broker(), None)  # only its tables are read here
    for spec in writes:
        assert spec.idempotency != "none" and spec.readback, spec.name
        assert spec.label and executor.executes(spec.name)
    reads = [spec for spec in BUILTIN.values() if spec.effect == "read"]
    assert all(spec.idempotency == "none" and spec.readback is None for spec in reads)


def test_an_act_cannot_hide_attendees_behind_executors():
    run = run_for(event(user="u1"))
    arguments = {
        "summary": "周会",
        "start": "2026-01-02T10:00:00+08:00",
        "end": "2026-01-02T11:00:00+08:00",
        "executors": ["u1"],
        "attendees": ["u2", "u3"],
    }
    spec = BUILTIN["dingtalk.calendar.create_event"]
    auth = authorize(spec, arguments, run.origin, T0, 600)
    assert auth.audience == ["u1", "u2", "u3"] and auth.needs_approval
