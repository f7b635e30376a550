"""The action gate's checks of acts (``kind: act``): a write to the workspace is let through
only when its tool is enabled, the asker may authorize it, the act budgets have room and,
when it waited for approval, that approval still says yes to exactly these arguments.

Each reads the act's ``Authorization`` snapshot from ``ActionFacts``: taken outside the gate
from trusted facts (the event's sender, the tool's declared risk, a read of the object),
never from text. Whether an act that passes must wait for approval is the snapshot's
impact (``Authorization.needs_approval``), which ``gates/action.py`` puts on the verdict.
"""

from __future__ import annotations

from agent.contracts import ApprovalStatus, RefusalReason
from gates.action_case import _Case, _Refused

_APPROVAL_REFUSALS = {
    ApprovalStatus.DENIED: RefusalReason.APPROVAL_DENIED,
    ApprovalStatus.EXPIRED: RefusalReason.APPROVAL_EXPIRED,
    ApprovalStatus.VOID: RefusalReason.APPROVAL_VOID,
}


def act_tool(c: _Case) -> _Refused | None:
    """The tool is enabled for this robot and allowed by the run's skills (and known, so
    its risk could be judged)."""
    tool = c.request.tool or ""
    if tool not in c.policy.tools or c.facts.authorization is None:
        return _Refused(RefusalReason.TOOL_NOT_ALLOWED, f"{tool!r} is not enabled for this robot")
    if c.run.tools is not None and tool not in c.run.tools:
        return _Refused(RefusalReason.TOOL_NOT_ALLOWED, f"{tool!r} is not one this skill may use")
    return None


def authority(c: _Case) -> _Refused | None:
    """The authorizer is the person who asked, and the act is theirs to ask for (e.g. a
    to-do they may complete)."""
    auth = c.facts.authorization
    assert auth is not None  # act_tool refused it otherwise
    if auth.authorizer != c.run.origin.user_id:
        return _Refused(RefusalReason.NOT_AUTHORIZED, "the authorizer is not the asker")
    if c.facts.authority_problem is not None:
        return _Refused(RefusalReason.NOT_AUTHORIZED, c.facts.authority_problem)
    return None


def people(c: _Case) -> _Refused | None:
    """Everyone the act names is someone this run can name from trusted facts: the asker,
    someone @-ed in the message, or a person a directory look-up in this run returned —
    never a string a model made up (「张三建个」)."""
    unresolved = c.facts.unresolved_people
    if not unresolved:
        return None
    shown = "、".join(unresolved[:5])
    return _Refused(
        RefusalReason.PERSON_UNRESOLVED,
        f"{shown}: not the asker, not @-ed here and not found by a directory look-up in this"
        " run; look the person up or ask which colleague is meant",
    )


def act_budget(c: _Case) -> _Refused | None:
    """Acts have their own budgets per conversation and in total, over the last day."""
    facts, policy = c.facts, c.policy
    per_conversation = policy.act_budget_per_conversation_per_day
    if facts.acts_last_day_conversation >= per_conversation:
        return _Refused(
            RefusalReason.ACT_BUDGET,
            f"{facts.acts_last_day_conversation} acts in this conversation today;"
            f" act budget {per_conversation}",
        )
    if facts.acts_last_day >= policy.act_budget_per_day:
        return _Refused(
            RefusalReason.ACT_BUDGET,
            f"{facts.acts_last_day} acts today; act budget {policy.act_budget_per_day}",
        )
    return None


def act_approval(c: _Case) -> _Refused | None:
    """An act carried out after its approval: the approval says yes, to these arguments."""
    approval, auth = c.facts.approval, c.facts.authorization
    if approval is None:
        return None  # not yet asked for: the verdict says whether it must wait
    refused = _APPROVAL_REFUSALS.get(approval.status)
    if refused is not None:
        return _Refused(refused, f"approval {approval.approval_id} is {approval.status.value}")
    if approval.status is not ApprovalStatus.APPROVED:
        return _Refused(RefusalReason.APPROVAL_VOID, "the approval is still pending")
    auth_given = approval.authorization
    fresh_for = auth_given.fresh_until - auth_given.taken_at
    decided = approval.decided_at if approval.decided_at is not None else auth_given.taken_at
    if c.facts.now > decided + fresh_for:
        # approved in time, but carried out much later (the robot was paused, or down):
        # what was approved may no longer be what the asker wants
        return _Refused(
            RefusalReason.APPROVAL_EXPIRED,
            f"approval {approval.approval_id} was given {c.facts.now - decided:.0f} s ago;"
            f" it holds {fresh_for:.0f} s",
        )
    assert auth is not None
    if approval.authorization.arguments_hash != auth.arguments_hash:
        return _Refused(
            RefusalReason.APPROVAL_VOID, "the arguments changed after they were approved"
        )
    return None
