"""Approvals of acts that wait: asked for, decided once, expired, voided.

An act whose impact reaches beyond the asker's own reversible things (``Authorization``)
is not run: an ``ApprovalRecord`` is stored, pending, and the asker is shown what decides
the risk (a card with approve / deny buttons, or a text code where no card template is
configured). The record is the truth, not any process's memory:

- ``decide``: only the bound authorizer's yes or no counts, and only the first one
  (compare-and-set on the row, on any replica); anyone else is refused and recorded.
- ``expire_due``: a pending approval past ``approval_timeout_s`` is ``expired`` (a denial),
  found at every recovery pass and drain, no heartbeat needed.
- ``open`` voids what the same person still had pending for the same tool and the same
  object (a to-do's subject, an event's summary) in the same conversation, with other
  arguments: the parameters changed, so the old yes would bind the wrong thing. Another
  object is another act, and both wait.

Every decision is carried out by a run of the runtime's own event
(``ApprovalRecord.settle_event_id``, stored once), so a crash after the click loses nothing:
the event waits in the store like any message (agent/acts/settle.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from agent.acts.identity import same_object
from agent.acts.shown import lines, local_time, person_names, readable
from agent.acts.told import void_words
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    Actor,
    ApprovalRecord,
    ApprovalStatus,
    Authorization,
    Conversation,
    Event,
    Robot,
    Run,
    Scheduled,
    VoidReason,
    sha256_text,
)
from agent.dingtalk.card_callback import APPROVE, DENY
from storage import Store

log = logging.getLogger("dta.approvals")

ONLY_THE_ASKER = "只有发起人可以确认"
# 「确认 4F2A」「拒绝 4F2A」 (also "approve 4F2A" / "deny 4F2A"), alone in the message
_CODE_REPLY = re.compile(
    r"^\s*(确认|同意|批准|approve|yes|拒绝|取消|deny|no)\s*[「“\"]?([0-9A-Fa-f]{4})[」”\"]?\s*[。.!！]?\s*$",
    re.IGNORECASE,
)
_YES_WORDS = ("确认", "同意", "批准", "approve", "yes")


@dataclass(frozen=True)
class Decision:
    """What one click or code reply came to: ``decided`` when it made the decision;
    ``said`` is what the clicker is told (on the card, or in words)."""

    outcome: str  # approved | denied | not_authorizer | already_<status> | unknown
    record: ApprovalRecord | None
    said: str

    @property
    def decided(self) -> bool:
        return self.outcome in (ApprovalStatus.APPROVED.value, ApprovalStatus.DENIED.value)


def code_reply(text: str) -> tuple[str, str] | None:
    """(``approve`` or ``deny``, the code) when the text is a code reply, else None."""
    match = _CODE_REPLY.match(text or "")
    if match is None:
        return None
    word, code = match.group(1).lower(), match.group(2).upper()
    return (APPROVE if word in _YES_WORDS else DENY), code


def settle_event(record: ApprovalRecord, run: Run, now: float) -> Event:
    """The runtime's own event that carries out ``record``'s decision, in the conversation
    it was asked in, for its authorizer."""
    origin = run.origin
    return Event(
        event_id=record.settle_event_id,
        conversation=Conversation(id=origin.conversation_id, type=origin.conversation_type),
        actor=Actor(user_id=origin.user_id, nick=origin.nick, has_staff_id=origin.has_staff_id),
        robot=Robot(code=origin.robot_code),
        # the asking message's webhook while it lives: in a group the outcome @s the asker
        session_webhook=origin.session_webhook,
        msgtype="scheduled",
        text=f"approval {record.approval_id} {record.status.value}",
        created_at=now,
        received_at=now,
        scheduled=Scheduled(kind="approval", approval_id=record.approval_id),
    )


class ApprovalDesk:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        timeout_s: float,
        cards: bool,
        timezone: str = "Asia/Shanghai",
    ) -> None:
        self.store = store
        self.clock = clock
        self.timeout_s = timeout_s
        self.cards = cards  # an approval card template is configured: buttons, not codes
        self.timezone = timezone  # how times and the expiry are said

    def on(self, store: Store) -> ApprovalDesk:
        return ApprovalDesk(store, self.clock, self.timeout_s, self.cards, self.timezone)

    def open(
        self,
        run: Run,
        intent: ActionIntent,
        english: bool = False,
        names: dict[str, str] | None = None,
    ) -> tuple[ApprovalRecord, list[ApprovalRecord]]:
        """The pending approval for ``intent`` (its id derived from the act's key, so a
        re-executed run finds its own), and the earlier ones it voids: the same person's
        pending approvals, from earlier messages, of the same tool and object (however
        worded) with other arguments — their yes would bind what they no longer ask for."""
        auth = intent.authorization
        assert auth is not None and intent.tool is not None
        now = self.clock.now()
        approval_id = "apv_" + sha256_text(intent.idempotency_key)[:20]
        voided = []
        for old in self.store.approvals.pending_approvals(
            auth.conversation_id, auth.authorizer, intent.tool
        ):
            if old.approval_id == approval_id or not _supersedes(old, run.event_id, auth):
                continue
            void = old.model_copy(
                update={
                    "status": ApprovalStatus.VOID,
                    "decided_at": now,
                    "detail": f"superseded by {approval_id}: the parameters changed",
                    "void_reason": VoidReason.SUPERSEDED,
                }
            )
            if self.store.approvals.decide_approval(void):
                voided.append(void)
        record = ApprovalRecord(
            approval_id=approval_id,
            event_id=run.event_id,
            run_id=run.run_id,
            conversation_id=auth.conversation_id,
            tool=intent.tool,
            arguments=intent.arguments or {},
            authorization=auth,
            code=sha256_text(approval_id)[:4].upper(),
            created_at=now,
            expires_at=now + self.timeout_s,
            act_key=intent.idempotency_key,
            english=english,
            asked_with="card" if self.cards else "text",
            names=dict(names or {}),
        )
        if not self.store.approvals.add_approval(record):
            stored = self.store.approvals.get_approval(approval_id)
            record = stored if stored is not None else record
        return record, voided

    def decide(self, record: ApprovalRecord | None, by: str, choice: str) -> Decision:
        """The first decision by the authorizer stands; anything else changes nothing."""
        if record is None:
            return Decision("unknown", None, "这个确认已不存在")
        if by != record.authorization.authorizer:
            log.info("approval click by someone else", extra={"approval": record.approval_id})
            return Decision("not_authorizer", record, ONLY_THE_ASKER)
        now = self.clock.now()
        if record.status.is_open and now >= record.expires_at:
            self.expire(record)
            record = self.store.approvals.get_approval(record.approval_id) or record
        if not record.status.is_open:
            return Decision(f"already_{record.status.value}", record, _already(record))
        status = ApprovalStatus.APPROVED if choice == APPROVE else ApprovalStatus.DENIED
        decided = record.model_copy(update={"status": status, "decided_by": by, "decided_at": now})
        if not self.store.approvals.decide_approval(decided):
            current = self.store.approvals.get_approval(record.approval_id) or record
            return Decision(f"already_{current.status.value}", current, _already(current))
        said = "已同意，正在执行" if status is ApprovalStatus.APPROVED else "已拒绝，不会执行"
        return Decision(status.value, decided, said)

    def void(self, record: ApprovalRecord, why: str, reason: VoidReason) -> bool:
        """Void a pending approval nobody could decide (its prompt never arrived)."""
        void = record.model_copy(
            update={
                "status": ApprovalStatus.VOID,
                "decided_at": self.clock.now(),
                "detail": why,
                "void_reason": reason,
            }
        )
        return self.store.approvals.decide_approval(void)

    def expire(self, record: ApprovalRecord) -> ApprovalRecord | None:
        """Expire one pending approval (None when it was decided first)."""
        expired = record.model_copy(
            update={
                "status": ApprovalStatus.EXPIRED,
                "decided_at": self.clock.now(),
                "detail": f"nobody decided within {self.timeout_s:g} s",
            }
        )
        return expired if self.store.approvals.decide_approval(expired) else None

    def expire_due(self) -> list[ApprovalRecord]:
        """Every pending approval past its time, expired now."""
        expired = []
        for record in self.store.approvals.due_approvals(self.clock.now()):
            done = self.expire(record)
            if done is not None:
                expired.append(done)
        return expired

    def prompt(self, record: ApprovalRecord, in_group: bool, cards: bool | None = None) -> str:
        """What the asker is shown: the action, what it is about and whom it touches, by
        name and in their words, whether it can be undone, how to decide and until when.
        ``cards``: asked on a card (default: when a template is configured)."""
        auth, english = record.authorization, record.english
        on_card = self.cards if cards is None else cards
        pairs = readable(
            record.tool, record.arguments, record.names, self.timezone, english, auth.object
        )
        until = local_time(record.expires_at, self.timezone, english)
        if english:
            head = [f"Needs your approval: {auth.action}", lines(pairs, True)]
            head.append(f"Affects: {person_names(auth.audience, record.names, True)}")
            head.append("Can be undone" if auth.reversible else "Cannot be undone")
            if on_card:
                head.append("Press Approve or Decline on the card.")
            else:
                at = "@me " if in_group else ""
                head.append(
                    f"Reply 「{at}approve {record.code}」 to go ahead, "
                    f"「{at}deny {record.code}」 to cancel."
                )
            head.append(f"Expires {until} unless approved.")
            return "\n".join(head)
        head = [f"需要你确认：{auth.action}", lines(pairs)]
        head.append(f"涉及：{person_names(auth.audience, record.names)}")
        head.append("可以撤销" if auth.reversible else "不可撤销")
        if on_card:
            head.append("请点卡片上的「同意」或「拒绝」。")
        else:
            at = "@我 " if in_group else ""
            head.append(
                f"同意请回复「{at}确认 {record.code}」，不同意回复「{at}拒绝 {record.code}」。"
            )
        head.append(f"{until} 前不确认就过期，不会执行。")
        return "\n".join(head)

    def code_line(self, record: ApprovalRecord, in_group: bool) -> str:
        """One line for an asker whose prompt may not have reached them (its send is in
        doubt, never sent again): how to decide in words, whatever the prompt was."""
        until = local_time(record.expires_at, self.timezone, record.english)
        if record.english:
            at = "@me " if in_group else ""
            return (
                f"If you did not get the approval request for {record.authorization.action}: "
                f"reply 「{at}approve {record.code}」 to go ahead or 「{at}deny {record.code}」 "
                f"to cancel, before {until}."
            )
        at = "@我 " if in_group else ""
        return (
            f"如果没有收到「{record.authorization.action}」的确认提示：同意请回复「{at}确认 "
            f"{record.code}」，不同意回复「{at}拒绝 {record.code}」，{until} 前有效。"
        )


def _supersedes(old: ApprovalRecord, event_id: str, new: Authorization) -> bool:
    """A later message asking for the same object again corrects it (its people may have
    changed: 「改成派给王五」); within one message two acts on one subject are two acts
    (「给张三和王五各建个待办」)."""
    return old.event_id != event_id and same_object(old.authorization.object, new.object)


def status_words(record: ApprovalRecord | None) -> str:
    """What a card or a reply says of an approval's state."""
    if record is None:
        return "这个确认已不存在"
    if record.status.is_open:
        return "待确认"
    return _already(record)


def _already(record: ApprovalRecord) -> str:
    words = {
        ApprovalStatus.APPROVED: "已同意",
        ApprovalStatus.DENIED: "已拒绝",
        ApprovalStatus.EXPIRED: "已过期",
        ApprovalStatus.VOID: f"已作废（{void_words(record.void_reason)}）",
    }
    return f"这个确认{words.get(record.status, record.status.value)}，无需再点"
