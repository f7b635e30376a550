"""``dta approvals``: the pending and decided approvals of acts, with their snapshots.

dta approvals list [--status pending]      one line each, newest last: the act, the people
                                           by name, when it was asked and what became of
                                           the act (``done, read back``…)
dta approvals show apv_…                   the authorization snapshot, the arguments as a
                                           person reads them, the clicks, the act's receipts
                                           (read-backs included), each with its outcome

What became of an act is said in the one vocabulary (agent/acts/told.py); people by the
names the directory gave when the approval was opened; times in the team's zone
(``timezone`` in the configuration).
"""

from __future__ import annotations

from typing import TextIO

from agent.acts.shown import person_names, readable
from agent.cli.trace import DEFAULT_TIMEZONE, when
from agent.cli.trace_acts import ApprovalAct, approval_act, named, prompt_receipts, receipt_words
from agent.contracts import ApprovalRecord, Receipt
from storage import Store


def _when(at: float | None, timezone: str) -> str:
    return when(at, timezone) or "-"


def line(record: ApprovalRecord, act: ApprovalAct, timezone: str = DEFAULT_TIMEZONE) -> str:
    auth = record.authorization
    names = record.names
    by = f" by {named(record.decided_by, names)}" if record.decided_by else ""
    return (
        f"{record.approval_id}  {record.status.value:<8} {record.tool}  "
        f"「{auth.object}」 for {person_names(auth.audience, names, english=True)}"
        f"  asked by {named(auth.authorizer, names)} {_when(record.created_at, timezone)}"
        f" in {record.conversation_id} (msg {record.event_id}){by}  → {act.words}"
    )


def list_approvals(
    store: Store, status: str | None, out: TextIO, timezone: str = DEFAULT_TIMEZONE
) -> int:
    shown = [r for r in store.approvals.all() if status is None or r.status.value == status]
    for record in shown:
        print(line(record, approval_act(store, record), timezone), file=out)
    if not shown:
        print("no approvals" + (f" with status {status}" if status else ""), file=out)
    return 0


def _receipt(receipt: Receipt) -> str:
    evidence = receipt.evidence
    what = (
        receipt.reason or evidence.readback or evidence.detail or evidence.errmsg or evidence.error
    )
    return f"{receipt.status.value} → {receipt_words(receipt)}" + (f" · {what}" if what else "")


def show_approval(
    store: Store, approval_id: str, out: TextIO, timezone: str = DEFAULT_TIMEZONE
) -> int:
    record = store.approvals.get_approval(approval_id)
    if record is None:
        print(f"dta: no approval {approval_id}", file=out)
        return 1
    auth = record.authorization
    act = approval_act(store, record)
    names = record.names
    print(line(record, act, timezone), file=out)
    arguments = readable(
        record.tool, record.arguments, names, timezone, record.english, auth.object
    )
    colon = ": " if record.english else "："
    rows = [
        ("action", auth.action),
        ("object", auth.object),
        ("audience", person_names(auth.audience, names, english=True)),
        ("impact", f"{auth.impact}; {'reversible' if auth.reversible else 'irreversible'}"),
        *(("argument", f"{label}{colon}{value}") for label, value in arguments),
        ("names", ", ".join(f"{i} {n}" for i, n in names.items()) or "-"),
        ("outcome", f"{act.outcome.value}: {act.words}"),
        ("arguments hash", auth.arguments_hash[:16]),
        ("code", record.code),
        ("card", record.out_track_id or "- (text code)"),
        ("asked", f"{_when(record.created_at, timezone)} ({record.asked_with or '-'})"),
        ("expires", _when(record.expires_at, timezone)),
        ("decided", f"{_when(record.decided_at, timezone)} {record.detail or ''}".strip()),
    ]
    for name, value in rows:
        print(f"  {name:<15} {value}", file=out)
    for click in store.approvals.clicks(record.approval_id):
        who = named(click["user_id"], names)
        print(f"  click           {who} {click['action']} → {click['outcome']}", file=out)
    for receipt in prompt_receipts(store, record):
        reason = f" ({receipt.reason})" if receipt.reason else ""
        channels = " → ".join(c.value for c in receipt.evidence.channels_tried)
        via = f" via {channels}" if channels else ""
        print(f"  prompt          {receipt.status.value}{reason}{via}", file=out)
    for receipt in act.receipts:
        print(f"  receipt         act {_receipt(receipt)}", file=out)
    return 0
