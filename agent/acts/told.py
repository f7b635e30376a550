"""What became of an act, in one vocabulary: the same true words on the reply, the approval
card, ``dta approvals``, the console and ``dta trace``.

An act's outcome (``ActOutcome``) is read from its last receipt and its approval, never
guessed: ``accepted`` is "done, by the platform's or the tool's word; nothing read it back",
``uncertain`` "it may have happened; it is read back, never run again", and only ``failed``
— the platform said the write did not happen — is ever told as not done. A person told
"failed" about something that happened asks again, and the act happens twice; a person
told "done" about something that did not believes it.

    outcome = outcome_of(receipt, approval)
    reply_words(outcome, "创建待办「续费域名」")  # 已完成：创建待办「续费域名」，已在钉钉里核对。
    card_words(outcome)                         # 已同意，已完成
    status_words(outcome)                       # done, read back
"""

from __future__ import annotations

from typing import Any

from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActOutcome,
    ApprovalRecord,
    ApprovalStatus,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    VoidReason,
)
from gates.backing import ASKER, Backing

_FROM_APPROVAL = {
    ApprovalStatus.PENDING: ActOutcome.PENDING,
    ApprovalStatus.DENIED: ActOutcome.DENIED,
    ApprovalStatus.EXPIRED: ActOutcome.EXPIRED,
    ApprovalStatus.VOID: ActOutcome.VOID,
}
_FROM_REFUSAL = {
    RefusalReason.APPROVAL_DENIED.value: ActOutcome.DENIED,
    RefusalReason.APPROVAL_EXPIRED.value: ActOutcome.EXPIRED,
    RefusalReason.APPROVAL_VOID.value: ActOutcome.VOID,
}
_FROM_RECEIPT = {
    ReceiptStatus.VERIFIED: ActOutcome.VERIFIED,
    ReceiptStatus.ACCEPTED: ActOutcome.ACCEPTED,
    ReceiptStatus.UNCERTAIN: ActOutcome.UNCERTAIN,
    ReceiptStatus.FAILED: ActOutcome.FAILED,
}


def outcome_of(receipt: Receipt | None, approval: ApprovalRecord | None = None) -> ActOutcome:
    """The act's outcome from its last receipt (an act's or, before it ran, none) and its
    approval: an approval not given decides; an act never sent is ``refused``."""
    if approval is not None and approval.status in _FROM_APPROVAL:
        return _FROM_APPROVAL[approval.status]
    if receipt is None:
        return ActOutcome.PENDING if approval is not None else ActOutcome.REFUSED
    if receipt.status is ReceiptStatus.REFUSED:
        return _FROM_REFUSAL.get(receipt.reason or "", ActOutcome.REFUSED)
    return _FROM_RECEIPT.get(receipt.status, ActOutcome.REFUSED)


def last_act_receipt(receipts: list[Receipt]) -> Receipt | None:
    """The receipt that says what became of an act: its latest (a read-back after an
    uncertain try), leaving out a repeat's ``duplicate_intent`` (it says nothing new)."""
    acts = [
        r
        for r in receipts
        if r.kind is ActionKind.ACT and r.reason != RefusalReason.DUPLICATE_INTENT.value
    ]
    return acts[-1] if acts else None


# Why an act was refused, in the person's words (zh, en); any other code is named as is.
_REFUSALS: dict[str, tuple[str, str]] = {
    "not_authorized": ("这不是你能替别人决定的事", "it is not yours to decide for others"),
    "person_unresolved": ("我不确定你说的是哪位同事", "I could not tell which colleague you mean"),
    "act_budget": ("今天这类操作已到上限", "today's limit for such actions is reached"),
    "tool_not_allowed": ("这个操作没有开启", "this action is not enabled"),
    "action_not_allowed": ("这里不允许这样操作", "this action is not allowed here"),
    "run_budget": ("一次请求里的操作太多", "too many actions in one request"),
    "schema_invalid": ("信息不完整或格式不对", "details are missing or malformed"),
    "stale_generation": ("你后来又发了新消息", "you sent a newer message"),
}
_VOIDS: dict[str, tuple[str, str]] = {
    VoidReason.SUPERSEDED.value: ("你又发起了同一件事的新请求", "you asked again with new details"),
    VoidReason.PROMPT_NOT_DELIVERED.value: (
        "确认请求没能送到你这里",
        "the request for your approval did not reach you",
    ),
}


# How a refusal's detail begins when the object could not be read (not "it is not yours")
COULD_NOT_CHECK = "could not check:"


def refusal_words(reason: str | None, english: bool = False, detail: str | None = None) -> str:
    if detail and detail.startswith(COULD_NOT_CHECK):
        return "钉钉暂时没能让我核对它" if not english else "DingTalk would not let me check it now"
    words = _REFUSALS.get(reason or "")
    if words is None:
        return f"原因：{reason}" if not english else f"reason: {reason}"
    return words[1] if english else words[0]


def void_words(reason: str | None, english: bool = False) -> str:
    words = _VOIDS.get(reason or "")
    if words is None:
        return "已作废" if not english else "void"
    return words[1] if english else words[0]


def reply_words(
    outcome: ActOutcome,
    what: str,
    *,
    reason: str | None = None,
    detail: str | None = None,
    english: bool = False,
    checkable: bool = True,
) -> str:
    """What the asker is told of ``what`` (「创建待办「续费域名」」). ``reason``: the refusal's
    or the void's code; ``detail``: the platform's or tool's own words for a failure;
    ``checkable``: the act can be read back (an MCP tool's cannot: nothing is promised)."""
    if english:
        return _reply_en(outcome, what, reason, detail, checkable)
    uncertain = (
        f"已提交：{what}，但还没能确认结果。我会再核对，不会重复执行，核对后告诉你。"
        if checkable
        else f"已提交：{what}，但结果不明，这个工具的结果我没法核对；不会重复执行，"
        "需要的话请到对方系统里看一下。"
    )
    said = {
        ActOutcome.VERIFIED: f"已完成：{what}，已在钉钉里核对。",
        ActOutcome.ACCEPTED: f"已执行：{what}。对方系统回复已完成，但我没法再核对一遍结果。",
        ActOutcome.UNCERTAIN: uncertain,
        ActOutcome.FAILED: f"没有办成：{what}，没有执行" + _because(detail) + "。",
        ActOutcome.REFUSED: f"没有执行：{what}（{refusal_words(reason, detail=detail)}）。",
        ActOutcome.DENIED: f"好的，已取消，没有执行：{what}。",
        ActOutcome.EXPIRED: f"确认已过期，没有执行：{what}。需要的话请重新发起。",
        ActOutcome.VOID: f"这个确认已作废（{void_words(reason)}），没有执行：{what}。",
        ActOutcome.PENDING: f"还在等你确认：{what}。",
    }
    return said[outcome]


def _because(detail: str | None) -> str:
    return f"（{detail[:120]}）" if detail else ""


def _reply_en(
    outcome: ActOutcome, what: str, reason: str | None, detail: str | None, checkable: bool
) -> str:
    uncertain = (
        f"Submitted: {what}, but the result is not confirmed yet. I will check again"
        " (never run it twice) and tell you."
        if checkable
        else f"Submitted: {what}, but the result is unknown and this tool's result cannot be"
        " checked; it will not be run again."
    )
    said = {
        ActOutcome.VERIFIED: f"Done: {what}, checked in DingTalk.",
        ActOutcome.ACCEPTED: (
            f"Done: {what}. The tool reported success; I cannot check the result myself."
        ),
        ActOutcome.UNCERTAIN: uncertain,
        ActOutcome.FAILED: f"Not done: {what}; it did not happen"
        + (f" ({detail[:120]})" if detail else "")
        + ".",
        ActOutcome.REFUSED: f"Not run: {what} ({refusal_words(reason, True, detail)}).",
        ActOutcome.DENIED: f"OK, cancelled; not run: {what}.",
        ActOutcome.EXPIRED: f"The approval expired; not run: {what}. Ask again if needed.",
        ActOutcome.VOID: f"This approval is void ({void_words(reason, True)}); not run: {what}.",
        ActOutcome.PENDING: f"Still waiting for your approval: {what}.",
    }
    return said[outcome]


def checked_words(outcome: ActOutcome, what: str, english: bool = False) -> str:
    """What the asker is told once a read-back settles an act they were told is not
    confirmed yet."""
    if english:
        if outcome is ActOutcome.VERIFIED:
            return f"Checked: {what} is done."
        return f"Checked: {what} did not happen; it will not be tried again. Ask again if needed."
    if outcome is ActOutcome.VERIFIED:
        return f"核对过了：{what}已经办好。"
    return f"核对过了：{what}没有办成，钉钉里查不到，不会再重复执行；需要的话请重新发起。"


def card_words(outcome: ActOutcome, reason: str | None = None) -> str:
    """The approval card's status line once the decision is carried out."""
    return {
        ActOutcome.VERIFIED: "已同意，已完成",
        ActOutcome.ACCEPTED: "已同意，已执行（未能再核对）",
        ActOutcome.UNCERTAIN: "已同意，已提交，结果核对中",
        ActOutcome.FAILED: "已同意，没有执行成功",
        ActOutcome.REFUSED: f"已同意，未执行（{refusal_words(reason)}）",
        ActOutcome.DENIED: "已拒绝",
        ActOutcome.EXPIRED: "已过期",
        ActOutcome.VOID: f"已作废（{void_words(reason)}）",
        ActOutcome.PENDING: "待确认",
    }[outcome]


_STATUS = {
    ActOutcome.VERIFIED: "done, read back",
    ActOutcome.ACCEPTED: "done by the platform's or tool's word, not read back",
    ActOutcome.UNCERTAIN: "may have happened: being read back, never run again",
    ActOutcome.FAILED: "not done: the platform said it did not happen",
    ActOutcome.REFUSED: "not run: refused",
    ActOutcome.DENIED: "not run: the asker declined",
    ActOutcome.EXPIRED: "not run: the approval expired",
    ActOutcome.VOID: "not run: the approval is void",
    ActOutcome.PENDING: "waiting for the asker's approval",
}


def status_words(outcome: ActOutcome, reason: str | None = None) -> str:
    """One line for operators (``dta approvals``, the console, ``dta trace``)."""
    said = _STATUS[outcome]
    if reason and outcome in (ActOutcome.REFUSED, ActOutcome.VOID):
        said += f" ({reason})"
    return said


def for_model(
    outcome: ActOutcome, receipt: Receipt | None, checkable: bool = True
) -> dict[str, Any]:
    """What the model is told of its write: the outcome, and how it may speak of it."""
    notes = {
        ActOutcome.VERIFIED: "done and read back: you may say it is done",
        ActOutcome.ACCEPTED: "done by the tool's own word, not read back: say it was done"
        " and that the result could not be checked",
        ActOutcome.UNCERTAIN: "it may or may not have happened; it will be read back and never"
        " run again: say it was submitted and is not confirmed yet, never that it failed or"
        " that it is done",
        ActOutcome.FAILED: "the platform said it did not happen: say it was not done",
    }
    if not checkable:
        notes[ActOutcome.UNCERTAIN] = (
            "it may or may not have happened and this tool's result cannot be checked; it"
            " will not be run again: say it was submitted and the result is unknown, never"
            " that it failed, that it is done, or that you will check"
        )
    shown: dict[str, Any] = {"status": outcome.value, "note": notes.get(outcome, "")}
    if receipt is not None:
        evidence = receipt.evidence
        if evidence.object_id and outcome.may_have_happened:
            shown["id"] = evidence.object_id
        if evidence.readback and outcome is ActOutcome.ACCEPTED:
            shown["result"] = evidence.readback
        if outcome in (ActOutcome.UNCERTAIN, ActOutcome.FAILED) and evidence.error:
            shown["error"] = evidence.error
    return shown


_MAY_HAVE_HAPPENED = (ReceiptStatus.VERIFIED, ReceiptStatus.ACCEPTED, ReceiptStatus.UNCERTAIN)


def act_backing(
    intent: ActionIntent, receipt: Receipt, effects: list[str], names: dict[str, str]
) -> Backing | None:
    """What an act's receipt lets be said of it (gates/backing.py): its kinds of effect,
    its people (ids and the names the run knows), its object — as far as its outcome goes.
    A refused, failed or voided act backs nothing."""
    if receipt.status not in _MAY_HAVE_HAPPENED:
        return None
    auth = intent.authorization
    tool = intent.tool or ""
    if auth is None:
        return None
    return Backing(
        "act",
        receipt.status.value,
        frozenset(effects or ["other"]),
        _people(auth, intent.target.user_id, names),
        (auth.object,),
        checkable=not tool.startswith("mcp."),
        label=f"{tool} 「{auth.object}」",
    )


def told_of(intent: ActionIntent, receipt: Receipt, english: bool = False) -> str | None:
    """The asker's words for an act that may have happened (its receipt verified, accepted
    or uncertain): what plain words say of it when nothing else will (None otherwise)."""
    auth = intent.authorization
    if receipt.status not in _MAY_HAVE_HAPPENED or auth is None:
        return None
    what = f"{auth.action.rstrip('.')}「{auth.object}」"
    checkable = not (intent.tool or "").startswith("mcp.")
    return reply_words(outcome_of(receipt), what, english=english, checkable=checkable)


def asked_backing(record: ApprovalRecord, effects: list[str]) -> Backing:
    """An approval prompt that reached the asker: it keeps a promise to do the act once
    approved, and backs no claim that it was done."""
    auth = record.authorization
    people = _people(auth, auth.authorizer, record.names)
    return Backing("asked", "pending", frozenset(effects or ["other"]), people, (auth.object,))


def _people(auth: Any, asker: str, names: dict[str, str]) -> frozenset[str]:
    others = [p for p in auth.audience if p != asker]
    people = set(others) | {names[p] for p in others if p in names}
    if asker in auth.audience or not others:
        people.add(ASKER)
    return frozenset(people)
