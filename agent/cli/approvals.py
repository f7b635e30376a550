"""``dta approvals``: the pending and decided approvals of acts, with their snapshots.

dta approvals list [--status pending]      one line each, newest last
dta approvals show apv_…                   the authorization snapshot, the clicks, the
                                           act's receipts (read-backs included)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TextIO

from agent.contracts import ApprovalRecord
from storage import Store


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def line(record: ApprovalRecord) -> str:
    auth = record.authorization
    by = f" by {record.decided_by}" if record.decided_by else ""
    return (
        f"{record.approval_id}  {record.status.value:<8} {record.tool}  "
        f"「{auth.object}」 for {','.join(auth.audience)}  asked by {auth.authorizer}"
        f" in {record.conversation_id} (msg {record.event_id}){by}"
    )


def list_approvals(store: Store, status: str | None, out: TextIO) -> int:
    shown = [r for r in store.approvals() if status is None or r.status.value == status]
    for record in shown:
        print(line(record), file=out)
    if not shown:
        print("no approvals" + (f" with status {status}" if status else ""), file=out)
    return 0


def show_approval(store: Store, approval_id: str, out: TextIO) -> int:
    record = store.get_approval(approval_id)
    if record is None:
        print(f"dta: no approval {approval_id}", file=out)
        return 1
    auth = record.authorization
    print(line(record), file=out)
    rows = [
        ("action", auth.action),
        ("object", auth.object),
        ("audience", ", ".join(auth.audience)),
        ("impact", f"{auth.impact}; {'reversible' if auth.reversible else 'irreversible'}"),
        ("arguments", str(record.arguments)),
        ("arguments hash", auth.arguments_hash[:16]),
        ("code", record.code),
        ("card", record.out_track_id or "- (text code)"),
        ("asked", _when(record.created_at)),
        ("expires", _when(record.expires_at)),
        ("decided", f"{_when(record.decided_at)} {record.detail or ''}".strip()),
    ]
    for name, value in rows:
        print(f"  {name:<15} {value}", file=out)
    for click in store.clicks(record.approval_id):
        print(
            f"  click           {click['user_id']} {click['action']} → {click['outcome']}", file=out
        )
    for receipt in store.receipts(record.event_id):
        if receipt.kind is not None and receipt.kind.value in ("act", "confirm"):
            what = receipt.reason or receipt.evidence.readback or receipt.evidence.detail or ""
            print(f"  receipt         {receipt.kind.value} {receipt.status.value} {what}", file=out)
    return 0
