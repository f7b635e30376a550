"""Acts: writes to the DingTalk workspace, the authority behind each, and its approval.

An act's ``Authorization`` is a snapshot of trusted facts taken when the act is proposed —
who authorizes it (the asker, from the event), the action, the object, who it touches, the
hash of the final arguments, its impact and until when it is fresh — never anything a
model or a message said. An act whose impact reaches beyond the asker's own reversible
things waits for an ``ApprovalRecord``, a row in the store: it survives a restart, any
replica may take the click, and the first decision stands (compare-and-set on the row).
A ``CardClick`` is one press of a button on an approval card, as the Stream callback
brings it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agent.contracts.base import Contract
from agent.contracts.codes import ApprovalStatus, VoidReason

# own: only the asker's own reversible things; others: someone else is affected (an
# executor, an attendee); batch: many people at once; irreversible: cannot be undone.
Impact = Literal["own", "others", "batch", "irreversible"]


class Authorization(Contract):
    """Who may say yes to what, bound to the final arguments (their hash)."""

    schema_: Literal["dta.authorization/1"] = Field(default="dta.authorization/1", alias="$schema")
    authorizer: str  # the asker's staff id: the only person whose yes counts
    robot_code: str | None
    conversation_id: str
    tool: str
    action: str  # what it does, in words (the tool's description)
    object: str  # what it makes or changes: a to-do's subject, an event's summary, an id
    audience: list[str]  # staff ids it touches (executors, attendees, or the asker)
    # the tool names nobody it touches (an MCP write without ``people``): it may touch
    # anyone, so it counts as touching others
    audience_undeclared: bool = False
    arguments_hash: str  # sha256 of the canonical JSON of the final arguments
    impact: Impact
    reversible: bool
    taken_at: float
    fresh_until: float  # an approval not decided by then expires

    @property
    def needs_approval(self) -> bool:
        return self.impact != "own"


class ApprovalRecord(Contract):
    """A pending or decided approval of one act (the ``approvals`` table)."""

    schema_: Literal["dta.approval/1"] = Field(default="dta.approval/1", alias="$schema")
    approval_id: str
    event_id: str  # the message whose run proposed the act
    run_id: str
    conversation_id: str
    tool: str
    arguments: dict[str, Any]
    authorization: Authorization
    status: ApprovalStatus = ApprovalStatus.PENDING
    code: str  # the text code ("4F2A") that decides it where no card is configured
    out_track_id: str | None = None  # the approval card's handle, when one was sent
    created_at: float
    expires_at: float
    decided_by: str | None = None
    decided_at: float | None = None
    detail: str | None = None  # why it ended void or expired
    void_reason: VoidReason | None = None  # the code behind a void (its words say which)
    # The act's slot (its idempotency key): a re-asked model's new wording of the same act
    # finds it here and in the intents (agent/acts/identity.py).
    act_key: str | None = None
    english: bool = False  # the asker wrote in English: the outcome is told in English
    # how the asker was asked: on a card with buttons, or in words with the text code (no
    # template, or DingTalk refused the card)
    asked_with: Literal["card", "text"] | None = None
    # the names of the people it touches, as the directory gave them when it was opened:
    # what the card and the prompt show (never staff ids, never a model's words)
    names: dict[str, str] = Field(default_factory=dict)

    @property
    def settle_event_id(self) -> str:
        """The id of the runtime's event that carries its decision out (stored once)."""
        return f"approval:{self.approval_id}"


class CardClick(Contract):
    """One button press on a card (the data of topic ``/v1.0/card/instances/callback``)."""

    frame_id: str  # the Stream frame's messageId: a redelivered click has the same one
    out_track_id: str
    user_id: str  # the clicker (staff id, ``userIdType: 1``)
    # approve | deny | stop | up | down (feedback) | submit (a form) | cancel_form: a
    # button's ``action`` param, or its action id
    action: str
    received_at: float
    # a form's submit: its fields' values as the callback carried them (not yet checked)
    values: dict[str, Any] = Field(default_factory=dict)
    reason: str | None = None  # a 👎's optional reason
