"""The approvals run judged, once quiet, from the platform's record and the store: each
request's to-dos, who decided, what the asker and the card were told, every click or reply
recorded; the figures that must be zero."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from agent.acts.clicks import WAITS_FOR_RESUME
from agent.cli.trace_acts import approval_act
from agent.contracts import ActOutcome, ApprovalRecord, ApprovalStatus, VoidReason
from lab.fake import FakeDingTalk
from lab.reliability.approvals.parameters import STRANGER, request_of
from lab.reliability.approvals.people import Clicker, Replier
from lab.reliability.approvals.reads import settlement_events, silenced_by_pause
from lab.reliability.daemon import unfinished_runs

# What an asker is told (agent/acts/told.py): done, done once checked, and what is untrue
# of an act that happened.
DONE_WORDS = ("已完成", "已执行")
CHECKED_DONE = re.compile(r"核对过了：.*已经办好")
NOT_DONE_WORDS = ("没有办成", "未能完成", "failed", "Not done")
# The approval card's last status line, by what became of its act (told.card_words).
CARD_WORDS = {
    "done": ("已完成", "已执行"),
    "denied": ("已拒绝",),
    "expired": ("已过期",),
    "late": ("已过期",),
    "void": ("已作废",),
}
EXPECTED_WORDS = {"denied": ("已取消",), "expired": ("过期",), "late": ("过期",), "void": ("作废",)}


def _category(record: ApprovalRecord, outcome: ActOutcome) -> str:
    """What became of one approval's act, for judging."""
    if outcome.may_have_happened:
        return "done"
    if record.status is ApprovalStatus.APPROVED:
        return "late" if outcome is ActOutcome.EXPIRED else f"approved_{outcome.value}"
    return outcome.value  # denied, expired, void, pending


def _says_done(text: str) -> bool:
    return any(w in text for w in DONE_WORDS) or CHECKED_DONE.search(text) is not None


def _told(
    messages: list[Any], live: list[tuple[ApprovalRecord, str]], done: bool
) -> tuple[list[str], bool, bool]:
    """An asker's messages, whether one of them is untrue (an act that happened called not
    done; one that did not, done), and whether each decided approval's outcome was told
    after its decision: done (or submitted, then checked done), cancelled, expired, void."""
    texts = [m.text for m in messages]
    if done:
        lied = any(any(w in t for w in NOT_DONE_WORDS) for t in texts)
    else:
        lied = any(_says_done(t) for t in texts)
    told = True
    for record, category in live:
        since = (record.decided_at or record.expires_at) - 1.0
        said = [m.text for m in messages if m.time >= since]
        if category == "done":
            told = told and any(_says_done(t) for t in said)
        elif category in EXPECTED_WORDS:
            told = told and any(w in t for t in said for w in EXPECTED_WORDS[category])
        else:
            told = told and category == "pending"  # counted as pending_left
    return texts, lied, told


def _live(records: list[tuple[ApprovalRecord, str]]) -> list[tuple[ApprovalRecord, str]]:
    """A request's approvals less those a re-asked act's new one superseded (the asker is
    asked again instead; nothing is told of them)."""
    return [
        (r, c)
        for r, c in records
        if not (r.status is ApprovalStatus.VOID and r.void_reason == VoidReason.SUPERSEDED)
    ]


def _outcome(categories: set[str]) -> str:
    for first in ("done", "late", "denied", "expired", "void", "pending"):
        if first in categories:
            return first
    return sorted(categories)[0]


class Verdicts:
    """The per-request figures: its to-dos, who decided, what the asker and the card said."""

    def __init__(self, fake: FakeDingTalk) -> None:
        self.counts: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.examples: dict[str, list[Any]] = {}
        self.cards = {card.out_track_id: card for card in fake.cards}
        self.said_to: dict[str, list[Any]] = {}
        for message in fake.received:
            if message.msgtype == "card":  # a card's text is its status line, judged apart
                continue
            # one-to-one: its user; in a group (codes): whom it @s, else the group's asker
            people = message.user_ids or message.at_user_ids
            if not people and message.conversation_type == "group":
                found = re.fullmatch(r"apv-g(\d+)", message.conversation_id or "")
                people = [f"apv-u{found.group(1)}"] if found else []
            for user in people:
                self.said_to.setdefault(user, []).append(message)

    def count(self, key: str, example: Any = None) -> None:
        self.counts[key] += 1
        shown = self.examples.setdefault(key, [])
        if example is not None and len(shown) < 5:
            shown.append(example)

    def judge(self, msg: str, records: list[tuple[ApprovalRecord, str]], made: int) -> None:
        live = _live(records)
        categories = {c for _, c in live} or {"void"}
        self.outcomes[_outcome(categories)] += 1
        # approved in time: exactly one to-do (counted by the request's id in the subject)
        approved = any(r.status is ApprovalStatus.APPROVED and c != "late" for r, c in records)
        if any(c == "late" for _, c in records):
            self.count("approved_carried_out_too_late")
        if approved and made > 1:
            self.count("approved_created_twice", f"{msg}: {made} to-dos")
        if approved and made == 0:
            self.count("approved_not_created", msg)
        if not approved and made:
            self.count("created_without_approval", f"{msg}: {sorted(categories)}")
        for record, _ in records:
            decided = record.status in (ApprovalStatus.APPROVED, ApprovalStatus.DENIED)
            if decided and record.decided_by != record.authorization.authorizer:
                self.count("decided_by_someone_else", record.approval_id)
        # what the asker was told, from the platform's record
        asker = f"apv-u{msg.rsplit('-', 1)[1]}"
        texts, lied, told = _told(self.said_to.get(asker, []), live, "done" in categories)
        example = {"msg": msg, "told": texts, "outcomes": sorted(categories)}
        if lied:
            self.count("askers_told_untrue", example)
        if not told:
            self.count("askers_not_told", example)
        for record, category in live:
            card = self.cards.get(record.out_track_id or "")
            status = card.data.get("status", "") if card is not None else ""
            if card is not None and not any(w in status for w in CARD_WORDS.get(category, ())):
                self.count("cards_showing_another_outcome", f"{msg}:{category}:{status}")


_CODE_ASKED = re.compile(r"同意请回复「(@我 )?确认 [0-9A-F]{4}」")


def _never_asked(
    fake: FakeDingTalk, per_request: dict[str, list[tuple[ApprovalRecord, str]]]
) -> list[str]:
    """Requests with an approval that did not end void whose asker saw no way to decide:
    no approval card of theirs and no line with its code (a prompt cut before it left
    reached nobody; the re-driven run owes them the code)."""
    carded = {str(card.data.get("msg_id")) for card in fake.cards if card.data.get("msg_id")}
    coded = set()
    for message in fake.received:
        if message.msgtype != "card" and _CODE_ASKED.search(message.text or ""):
            found = request_of(message.text or "")
            people = [*message.user_ids, *message.at_user_ids, message.conversation_id or ""]
            for where in people:
                number = re.fullmatch(r"apv-[ug](\d+)", where)
                if number:
                    found = found or f"apv-{number.group(1)}"
            if found:
                coded.add(found)
    never = []
    for msg, records in per_request.items():
        live = [r for r, _ in _live(records) if r.status is not ApprovalStatus.VOID]
        if live and msg not in carded | coded:
            never.append(msg)
    return never


def _clicks(store: Any, fake: FakeDingTalk, clicker: Clicker) -> dict[str, Any]:
    """Every click delivered recorded; which a paused daemon took (its answer on the card
    says it waits for the resume)."""
    keys = set(clicker.keys)
    frames = [f for f in fake.stream.frames.values() if f.msg_id in keys]
    recorded = {f.msg_id for f in frames if store.approvals.click(f.frame_id) is not None}
    while_paused = sum(
        WAITS_FOR_RESUME in json.dumps(f.ack_data, ensure_ascii=False)
        for f in frames
        if f.ack_data is not None
    )
    return {
        "clicks_delivered": len(clicker.keys),
        "requests_asked_on_two_cards": sum(n > 1 for n in clicker.cards_per_msg.values()),
        "clicks_while_paused": while_paused,
        "wrong_person_clicks": clicker.wrong,
        "clicks_not_recorded": len(keys - recorded),
    }


def _replies(store: Any, fake: FakeDingTalk, replier: Replier) -> dict[str, Any]:
    """Every reply recorded against its approval, as a click is (by its msgId), but those a
    pause silenced and a stranger's in their own chat (no approval of theirs there); which a
    pause silenced; what became of the requests whose asker replied again after it."""
    silenced = {key for key in replier.keys if silenced_by_pause(store, key)}
    recorded = {key for key in replier.keys if store.approvals.click(key) is not None}
    expected = set(replier.keys) - silenced - replier.stranger_elsewhere
    stranger = [
        store.approvals.click(key)
        for key, msg in zip(replier.keys, replier.msgs, strict=True)
        if key not in replier.stranger_elsewhere and fake.inbound[key]["senderStaffId"] == STRANGER
    ]
    return {
        "prompts_in_words": replier.prompts,
        "requests_asked_in_groups": sum(
            fake.inbound[m].get("conversationType") == "2" for m in replier.planned
        ),
        "replies_delivered": len(replier.keys),
        "requests_asked_twice": sum(n > 1 for n in replier.cards_per_msg.values()),
        "wrong_person_replies": replier.wrong,
        "wrong_person_replies_in_group": len(stranger),
        "wrong_person_replies_answered": sum(
            row is not None and row["outcome"] == "not_authorizer" for row in stranger
        ),
        "replies_sent_twice": replier.twice,
        "replies_redelivered": replier.redelivered,
        "replies_silenced_by_pause": len(silenced),
        "replies_sent_again_after_pause": len(replier.again),
        "replies_not_recorded": len(expected - recorded),
        "stranger_replies_recorded_elsewhere": len(replier.stranger_elsewhere & recorded),
        "cards_sent": len(fake.cards),
    }


def _missing_examples(store: Any, missing: list[str]) -> list[dict[str, Any]]:
    examples = []
    for msg in missing[:5]:
        run = store.events.get_run(msg)
        said = [
            f"{r.kind.value if r.kind else '-'}:{r.status.value}:{r.reason}"
            for r in store.actions.receipts(msg)
        ]
        examples.append(
            {
                "msg": msg,
                "run": run.state.value if run else None,
                "receipts": said,
                "failure": run.failure if run else None,
            }
        )
    return examples


def judge(
    store: Any, fake: FakeDingTalk, sent: list[str], clicker: Clicker, codes: bool = False
) -> dict[str, Any]:
    approvals = store.approvals.all(limit=100_000)
    todos = fake.workspace_view().get("todos", [])
    todos_of = Counter(request_of(str(t.get("subject"))) for t in todos)
    by_status = Counter(a.status.value for a in approvals)
    per_request: dict[str, list[tuple[ApprovalRecord, str]]] = {}
    for record in approvals:
        outcome = approval_act(store, record).outcome
        per_request.setdefault(record.event_id, []).append((record, _category(record, outcome)))
    verdicts = Verdicts(fake)
    missing, silenced = [], 0
    for msg in sent:
        if msg in per_request:
            verdicts.judge(msg, per_request[msg], todos_of.get(msg, 0))
        elif silenced_by_pause(store, msg):
            silenced += 1
        else:
            missing.append(msg)
    stray = sum(n for request, n in todos_of.items() if request is None or request not in sent)
    intended = clicker.planned
    denied_but_approved = sum(
        any(r.status is ApprovalStatus.APPROVED for r, _ in per_request.get(m, []))
        for m, choice in intended.items()
        if choice == "deny"
    )
    undecided_but_not_expired = sum(
        any(r.status is not ApprovalStatus.EXPIRED for r, _ in _live(per_request.get(m, [])))
        for m, choice in intended.items()
        if choice is None
    )
    late = []  # the asker's click found the approval expired: seconds after it was asked
    for record in approvals:
        for row in store.approvals.clicks(record.approval_id):
            if row["outcome"] == "already_expired" and row["user_id"] != STRANGER:
                late.append(round(float(row["at"]) - record.created_at, 1))
    settlements = settlement_events(store)
    messages = [*sent, *(clicker.keys if codes else [])]  # with codes a reply is a message
    runs = store.work.runs_per_event()
    if codes:
        assert isinstance(clicker, Replier)
        decisions = _replies(store, fake, clicker)
        again = Counter(
            _outcome({c for _, c in _live(per_request.get(m, []))} or {"void"})
            for m in clicker.again
        )
        decisions["after_reply_again"] = dict(sorted(again.items()))
    else:
        decisions = _clicks(store, fake, clicker)
    uncertain = {r.intent_id for r in store.actions.receipts() if r.status.value == "uncertain"}
    never_asked = _never_asked(fake, per_request)
    counts = verdicts.counts
    return {
        "requests": len(sent),
        "approvals": len(approvals),
        "approvals_by_status": dict(sorted(by_status.items())),
        "requests_by_outcome": dict(sorted(verdicts.outcomes.items())),
        "todos_created": len(todos),
        "todos_reworded": sum(str(t.get("subject", "")).startswith("尽快") for t in todos),
        **decisions,
        "decisions_after_expiry": len(late),
        "decision_after_expiry_s_min": min(late) if late else None,
        "approved_carried_out_too_late": counts["approved_carried_out_too_late"],
        "acts_uncertain_at_first": len(uncertain - {None}),
        "askers_told_checked": sum(CHECKED_DONE.search(m.text) is not None for m in fake.received),
        "silenced_by_pause": silenced,
        "approved_created_twice": counts["approved_created_twice"],
        "approved_not_created": counts["approved_not_created"],
        "created_without_approval": counts["created_without_approval"] + stray,
        "decided_by_someone_else": counts["decided_by_someone_else"],
        "denied_but_approved": denied_but_approved,
        "undecided_but_not_expired": undecided_but_not_expired,
        "askers_told_untrue": counts["askers_told_untrue"],
        "askers_not_told": counts["askers_not_told"],
        "cards_showing_another_outcome": counts["cards_showing_another_outcome"],
        "requests_never_asked": len(never_asked),
        "pending_left": by_status.get("pending", 0),
        "uncertain_acts_left": len(store.approvals.uncertain_acts()),
        "requests_without_approval": len(missing),
        "settlement_events": len(settlements),
        "runs_not_once": sum(runs.get(m, 0) != 1 for m in [*messages, *settlements]),
        "unfinished_runs": unfinished_runs(store, [*messages, *settlements]),
        "examples": {
            **{k: v for k, v in verdicts.examples.items() if v},
            **({"requests_without_approval": _missing_examples(store, missing)} if missing else {}),
            **(
                {"requests_never_asked": _missing_examples(store, never_asked)}
                if never_asked
                else {}
            ),
        },
    }


MUST_BE_ZERO = (
    "clicks_not_recorded",
    "approved_created_twice",
    "approved_not_created",
    "created_without_approval",
    "decided_by_someone_else",
    "denied_but_approved",
    "undecided_but_not_expired",
    "askers_told_untrue",
    "askers_not_told",
    "cards_showing_another_outcome",
    "requests_never_asked",
    "pending_left",
    "uncertain_acts_left",
    "requests_without_approval",
    "runs_not_once",
    "unfinished_runs",
)
# With text codes (--codes): replies in place of clicks, and no card at all.
_IN_WORDS = {
    "clicks_not_recorded": "replies_not_recorded",
    "cards_showing_another_outcome": "cards_sent",
}
CODES_MUST_BE_ZERO = (
    *(_IN_WORDS.get(key, key) for key in MUST_BE_ZERO),
    "stranger_replies_recorded_elsewhere",
)


def must_be_zero(codes: bool) -> tuple[str, ...]:
    return CODES_MUST_BE_ZERO if codes else MUST_BE_ZERO
