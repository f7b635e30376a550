"""Approvals of acts and the clicks on their cards (``approvals``, ``approval_clicks``).

approvals = store.approvals
approvals.add_approval(record)              # pending, before its prompt goes out
approvals.decide_approval(record)           # True for the first decision only
approvals.approval_by_track("apv_1")        # the approval a card click names
approvals.add_click("frame-9", "apv_1", "u2", "approve", "not_authorizer", now)  # False: seen
approvals.due_approvals(now)                # pending ones past their expiry

A decision is a compare-and-set on ``status``: the first one stands, on any replica.
"""

from __future__ import annotations

from agent.contracts import (
    ActionIntent,
    ApprovalRecord,
    ApprovalStatus,
    Receipt,
    Run,
    RunState,
)
from storage.base import Family
from storage.rows import insert_receipt

_COLUMNS = "approval_json"


class ApprovalRecords(Family):
    def add_approval(self, record: ApprovalRecord) -> bool:
        """Store a new approval; False when one with its id is already stored (a re-executed
        run proposing the same act again finds its own)."""
        with self._tx(run=record.run_id) as conn:
            cursor = conn.execute(
                "INSERT INTO approvals (approval_id, event_id, conversation_id, authorizer,"
                " tool, status, code, out_track_id, created_at, expires_at, approval_json,"
                " act_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (approval_id) DO NOTHING",
                (
                    record.approval_id,
                    record.event_id,
                    record.conversation_id,
                    record.authorization.authorizer,
                    record.tool,
                    record.status.value,
                    record.code,
                    record.out_track_id,
                    record.created_at,
                    record.expires_at,
                    record.to_json(),
                    record.act_key,
                ),
            )
            return bool(cursor.rowcount)

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        return self._approval("approval_id = ?", (approval_id,))

    def approval_by_act_key(self, act_key: str) -> ApprovalRecord | None:
        """The approval an act ran under (its intent's idempotency key is the approval's)."""
        return self._approval("act_key = ?", (act_key,))

    def approval_by_track(self, out_track_id: str) -> ApprovalRecord | None:
        return self._approval("out_track_id = ?", (out_track_id,))

    def approval_by_code(
        self, conversation_id: str, code: str, authorizer: str | None = None
    ) -> ApprovalRecord | None:
        """The approval in the conversation with this text code: the person's own first (a
        pending one before a decided one), else anyone's latest (16 bits can collide)."""
        if authorizer is not None:
            own = self._approval(
                "conversation_id = ? AND code = ? AND authorizer = ?"
                " ORDER BY (CASE WHEN status = 'pending' THEN 0 ELSE 1 END), created_at DESC",
                (conversation_id, code, authorizer),
            )
            if own is not None:
                return own
        return self._approval(
            "conversation_id = ? AND code = ? ORDER BY created_at DESC", (conversation_id, code)
        )

    def _approval(self, where: str, params: tuple[object, ...]) -> ApprovalRecord | None:
        rows = self._dicts(f"SELECT {_COLUMNS} FROM approvals WHERE {where} LIMIT 1", params)
        return ApprovalRecord.model_validate_json(rows[0][_COLUMNS]) if rows else None

    def all(self, event_id: str | None = None, limit: int = 200) -> list[ApprovalRecord]:
        """In creation order: one message's, or the latest ``limit`` of all."""
        if event_id is not None:
            sql = f"SELECT {_COLUMNS} FROM approvals WHERE event_id = ? ORDER BY created_at"
            rows = self._dicts(sql, (event_id,))
        else:
            sql = f"SELECT {_COLUMNS} FROM approvals ORDER BY created_at DESC LIMIT ?"
            rows = list(reversed(self._dicts(sql, (limit,))))
        return [ApprovalRecord.model_validate_json(r[_COLUMNS]) for r in rows]

    def pending_approvals(
        self, conversation_id: str, authorizer: str, tool: str
    ) -> list[ApprovalRecord]:
        """What this person still has pending for this tool in this conversation (a new
        request for the same object voids them: its parameters changed)."""
        rows = self._dicts(
            f"SELECT {_COLUMNS} FROM approvals WHERE conversation_id = ? AND status = ?"
            " AND authorizer = ? AND tool = ? ORDER BY created_at",
            (conversation_id, ApprovalStatus.PENDING.value, authorizer, tool),
        )
        return [ApprovalRecord.model_validate_json(r[_COLUMNS]) for r in rows]

    def due_approvals(self, now: float, limit: int = 100) -> list[ApprovalRecord]:
        """Pending approvals whose time ran out by ``now`` (the recovery pass expires them)."""
        rows = self._dicts(
            f"SELECT {_COLUMNS} FROM approvals WHERE status = ? AND expires_at <= ?"
            " ORDER BY expires_at LIMIT ?",
            (ApprovalStatus.PENDING.value, now, limit),
        )
        return [ApprovalRecord.model_validate_json(r[_COLUMNS]) for r in rows]

    def unsettled_approvals(self, limit: int = 100) -> list[ApprovalRecord]:
        """Decided approvals no run carries out yet and whose event (``approval:<id>``) was
        never stored (a crash fell between the decision and the event, or a request voided
        them): the recovery pass stores it."""
        rows = self._dicts(
            f"SELECT a.{_COLUMNS} FROM approvals a WHERE a.status IN (?, ?, ?, ?)"
            " AND a.settled_by IS NULL AND NOT EXISTS (SELECT 1 FROM events e"
            " WHERE e.event_id = 'approval:' || a.approval_id) ORDER BY a.created_at LIMIT ?",
            (
                ApprovalStatus.APPROVED.value,
                ApprovalStatus.DENIED.value,
                ApprovalStatus.EXPIRED.value,
                ApprovalStatus.VOID.value,
                limit,
            ),
        )
        return [ApprovalRecord.model_validate_json(r[_COLUMNS]) for r in rows]

    def claim_settlement(self, approval_id: str, event_id: str) -> bool:
        """The run of ``event_id`` carries the decision out; False when another run's event
        claimed it first (a code reply and a click's event cannot both)."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE approvals SET settled_by = ? WHERE approval_id = ?"
                " AND (settled_by IS NULL OR settled_by = ?)",
                (event_id, approval_id, event_id),
            )
            return bool(cursor.rowcount)

    def decide_approval(self, record: ApprovalRecord) -> bool:
        """Move a pending approval to ``record``'s status (with who and when); False when
        it was no longer pending: someone else's decision came first."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE approvals SET status = ?, approval_json = ?"
                " WHERE approval_id = ? AND status = ?",
                (
                    record.status.value,
                    record.to_json(),
                    record.approval_id,
                    ApprovalStatus.PENDING.value,
                ),
            )
            return bool(cursor.rowcount)

    def set_approval_track(self, approval_id: str, out_track_id: str) -> None:
        """The approval card's handle, stored before the card is created."""
        record = self.get_approval(approval_id)
        if record is None:
            return
        record = record.model_copy(update={"out_track_id": out_track_id})
        with self._tx() as conn:
            conn.execute(
                "UPDATE approvals SET out_track_id = ?, approval_json = ? WHERE approval_id = ?",
                (out_track_id, record.to_json(), approval_id),
            )

    def set_approval_asked(
        self, approval_id: str, *, out_track_id: str | None, asked_with: str, detail: str
    ) -> None:
        """How the asker was asked after all (a refused card: in words, with no card to
        click), kept on the approval."""
        record = self.get_approval(approval_id)
        if record is None:
            return
        record = record.model_copy(
            update={"out_track_id": out_track_id, "asked_with": asked_with, "detail": detail}
        )
        with self._tx() as conn:
            # only while it is pending: a decision that came first keeps its record whole
            conn.execute(
                "UPDATE approvals SET out_track_id = ?, approval_json = ?"
                " WHERE approval_id = ? AND status = ?",
                (out_track_id, record.to_json(), approval_id, ApprovalStatus.PENDING.value),
            )

    def close_waiting_run(self, event_id: str, state: RunState, at: float) -> bool:
        """End the run that waited for an approval (compare-and-set on ``waiting``, so any
        replica may, whoever ran it)."""
        run = self._dicts("SELECT run_json FROM runs WHERE event_id = ?", (event_id,))
        if not run:
            return False
        ended = Run.model_validate_json(run[0]["run_json"]).model_copy(
            update={"state": state, "updated_at": at}
        )
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE runs SET state = ?, updated_at = ?, run_json = ?"
                " WHERE event_id = ? AND state = ?",
                (state.value, at, ended.to_json(), event_id, RunState.WAITING.value),
            )
            return bool(cursor.rowcount)

    def add_click(
        self,
        frame_id: str,
        approval_id: str | None,
        user_id: str,
        action: str,
        outcome: str,
        at: float,
    ) -> bool:
        """Record one click by its frame id; False when that frame was already recorded (a
        redelivered callback: answered as before, decided nothing new)."""
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO approval_clicks (frame_id, approval_id, user_id, action, outcome,"
                " at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (frame_id) DO NOTHING",
                (frame_id, approval_id, user_id, action, outcome, at),
            )
            return bool(cursor.rowcount)

    def click(self, frame_id: str) -> dict[str, object] | None:
        rows = self._dicts("SELECT * FROM approval_clicks WHERE frame_id = ?", (frame_id,))
        return rows[0] if rows else None

    def clicks(self, approval_id: str) -> list[dict[str, object]]:
        return self._dicts(
            "SELECT * FROM approval_clicks WHERE approval_id = ? ORDER BY at", (approval_id,)
        )

    def due_readbacks(self, now: float, limit: int = 50) -> list[tuple[ActionIntent, float]]:
        """Acts owed a read-back by ``now`` — their latest receipt ``uncertain``, or
        ``accepted`` with nothing read back yet — with when the doubt began (the first such
        receipt). An MCP tool's act cannot be read back: it is never queued."""
        rows = self._dicts(
            "SELECT i.intent_json, (SELECT MIN(r.created_at) FROM receipts r"
            " WHERE r.intent_id = i.intent_id AND r.status IN ('uncertain', 'accepted')) AS since"
            " FROM intents i LEFT JOIN act_readbacks q ON q.intent_id = i.intent_id"
            " WHERE i.kind = 'act' AND i.intent_json NOT LIKE '%\"tool\":\"mcp.%'"
            " AND (q.next_at IS NULL OR q.next_at <= ?) AND ("
            "SELECT r.status FROM receipts r WHERE r.intent_id = i.intent_id"
            " ORDER BY r.rowid DESC LIMIT 1) IN ('uncertain', 'accepted')"
            " ORDER BY i.created_at LIMIT ?",
            (now, limit),
        )
        return [
            (ActionIntent.model_validate_json(r["intent_json"]), float(r["since"] or now))
            for r in rows
        ]

    def uncertain_acts(self) -> list[ActionIntent]:
        """Every act still owed a read-back, whenever its next try is (reports, tests)."""
        return [intent for intent, _ in self.due_readbacks(1e300, limit=10_000)]

    def readback_later(self, intent_id: str, since: float, next_at: float, error: str) -> int:
        """A read-back that settled nothing: try again at ``next_at``; how many tries so far."""
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO act_readbacks (intent_id, since, tries, next_at, last_error)"
                " VALUES (?, ?, 1, ?, ?) ON CONFLICT (intent_id) DO UPDATE SET"
                " tries = act_readbacks.tries + 1, next_at = excluded.next_at,"
                " last_error = excluded.last_error",
                (intent_id, since, next_at, error[:300]),
            )
        return int(
            self._scalar("SELECT tries FROM act_readbacks WHERE intent_id = ?", (intent_id,)) or 0
        )

    def readback_tries(self, intent_id: str) -> int:
        return int(
            self._scalar("SELECT tries FROM act_readbacks WHERE intent_id = ?", (intent_id,)) or 0
        )

    def recent_acts(
        self, conversation_id: str, authorizer: str, since: float, event_id: str = ""
    ) -> tuple[list[ActionIntent], list[ApprovalRecord]]:
        """This person's acts in this conversation since ``since`` (and all of one event's):
        those carried out (or tried) and those asked for approval — where a new request may
        be the same act."""
        intents = [
            ActionIntent.model_validate_json(r["intent_json"])
            for r in self._dicts(
                "SELECT intent_json FROM intents WHERE kind = 'act' AND conversation_id = ?"
                " AND (created_at >= ? OR event_id = ?) ORDER BY created_at",
                (conversation_id, since, event_id),
            )
        ]
        mine = [
            i for i in intents if i.authorization and i.authorization.authorizer == authorizer
        ]
        approvals = [
            ApprovalRecord.model_validate_json(r[_COLUMNS])
            for r in self._dicts(
                f"SELECT {_COLUMNS} FROM approvals WHERE conversation_id = ? AND authorizer = ?"
                " AND (created_at >= ? OR event_id = ?) ORDER BY created_at",
                (conversation_id, authorizer, since, event_id),
            )
        ]
        return mine, approvals

    def add_readback(self, receipt: Receipt, after: str | None = None) -> bool:
        """A read-back's receipt for an act: what was read, recorded by any replica (it
        changes nothing at DingTalk, so it needs no hold on the run). ``after``: the receipt
        it settles; when another read-back settled it first (the last receipt is no longer
        that one), nothing is written and False says so."""
        with self._tx() as conn:
            if after is not None:
                last = conn.execute(
                    "SELECT receipt_id FROM receipts WHERE intent_id = ?"
                    " ORDER BY rowid DESC LIMIT 1",
                    (receipt.intent_id,),
                ).fetchone()
                if last is not None and last[0] != after:
                    return False
            insert_receipt(conn, receipt)
        return True

    def acts_since(self, since: float, conversation_id: str | None = None) -> int:
        """Acts stored since ``since``: in one conversation, or in total (act budgets)."""
        if conversation_id is None:
            sql, params = (
                "SELECT COUNT(*) FROM intents WHERE kind = ? AND created_at >= ?",
                (
                    "act",
                    since,
                ),
            )
        else:
            sql = (
                "SELECT COUNT(*) FROM intents WHERE kind = ? AND conversation_id = ?"
                " AND created_at >= ?"
            )
            params = ("act", conversation_id, since)
        return int(self._scalar(sql, params) or 0)
