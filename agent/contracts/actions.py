"""The way from a provider's request to a side effect, and the proof of what happened.

``ActionRequest`` is what a provider may ask for (no target: the origin is implied), with
its optional ``TaskPatch`` and ``MemoryCandidateProposal`` items. An approved request
becomes an ``ActionIntent`` bound to its run's origin; each delivery try is an ``Attempt``
with the platform's ``Evidence``; the ``Receipt`` is the only proof that something
happened, or deliberately did not.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agent.contracts.acts import Authorization
from agent.contracts.base import Contract
from agent.contracts.codes import ActionKind, AttemptOutcome, Channel, ReceiptStatus
from agent.contracts.forms import FormSpec
from agent.contracts.runs import Origin


class TaskPatch(Contract):
    """A provider's proposed change to the thread's task checkpoint."""

    goal: str | None = None
    done_when: list[str] | None = None
    waiting_for: str | None = None
    status: Literal["working", "waiting", "completed", "cancelled"] | None = None


class MemoryCandidateProposal(Contract):
    kind: Literal["semantic", "episodic", "social", "procedural", "tombstone"] = "semantic"
    title: str
    content: str
    confidence: float = Field(default=0.5, ge=0, le=1)
    source_refs: list[str] = Field(default_factory=list)
    supersedes: list[str] = Field(default_factory=list)
    # withdrawn only once a reviewer approves (``MemoryCandidate.asks_to_supersede``)
    asks_to_supersede: list[str] | None = None


class ReminderProposal(Contract):
    """A reminder a provider proposes with its reply: ``text`` at ``at``.

    ``at`` is ISO 8601; without an offset it is read in the configured ``timezone``. A
    reminder is only ever for the person who asked, in the conversation they asked in:
    ``user_id`` and ``conversation_id`` may be given only to say so (the action gate
    refuses any other value), never to address someone else.
    """

    at: str = Field(min_length=1, max_length=64)
    text: str = Field(min_length=1, max_length=500)
    user_id: str | None = None
    conversation_id: str | None = None


class OutboundAttachment(Contract):
    """A picture or a file a reply carries out (a chart, an export a skill or tool made):
    its name and its bytes in base64. Not the inbound ``Event.attachments``: what it is
    comes from its bytes, checked by the action gate, never from its name."""

    name: str = Field(min_length=1, max_length=120, pattern=r"^[^/\\\x00-\x1f]+$")
    data_base64: str = Field(min_length=4)


class ActionRequest(Contract):
    """What a provider may ask for. It has no target, robot or user: the origin is implied.

    ``ack`` says "seen, this takes a while"; ``reply`` delivers a result; ``ask`` asks one
    short blocking question (with a ``form``: the typed fields its answer fills in, on a
    card or in a numbered reply); ``silence`` says nothing and must say why; ``act`` writes to
    the workspace through ``tool`` with ``arguments`` (a model's write tool call becomes
    one); ``confirm`` is the host's own approval prompt for an act that waits.
    """

    schema_: Literal["dta.action-request/1"] = Field(
        default="dta.action-request/1", alias="$schema"
    )
    kind: ActionKind
    text: str | None = None
    markdown: str | None = None
    title: str | None = None
    reason: str | None = None
    memory_candidates: list[MemoryCandidateProposal] = Field(default_factory=list)
    task: TaskPatch | None = None
    reminder: ReminderProposal | None = None  # set with a reply that confirms it
    tool: str | None = None  # an act's tool, e.g. "dingtalk.todo.create"
    arguments: dict[str, Any] | None = None  # an act's final arguments
    approval_id: str | None = None  # a confirm's approval (the host's own requests only)
    # pictures and files a reply carries: each its own message after the text
    attachments: list[OutboundAttachment] = Field(default_factory=list)
    # the host's own one line after an answer, in a slot of its own: what of the answer
    # could not be sent (a picture whose upload failed, a piece a crash left unknown)
    follow_up: bool = False
    # an ask's fields (agent/contracts/forms.py): the asker's answer comes back typed
    form: FormSpec | None = None

    @model_validator(mode="after")
    def _content_matches_kind(self) -> ActionRequest:
        if self.form is not None and self.kind is not ActionKind.ASK:
            raise ValueError("only an ask carries a form")
        if self.attachments and self.kind is not ActionKind.REPLY:
            raise ValueError("only a reply carries attachments")
        if self.follow_up and (self.kind is not ActionKind.REPLY or self.attachments):
            raise ValueError("a follow-up line is a reply of words only")
        has_text = bool(self.text and self.text.strip())
        has_markdown = bool(self.markdown and self.markdown.strip())
        if (self.kind is ActionKind.ACT) != (self.tool is not None):
            raise ValueError("an act names its tool, and only an act does")
        if (self.kind is ActionKind.CONFIRM) != (self.approval_id is not None):
            raise ValueError("a confirm names its approval, and only a confirm does")
        if self.kind is ActionKind.ACT:
            if has_text or has_markdown or self.reminder is not None:
                raise ValueError("an act carries arguments, not words")
        elif self.kind is ActionKind.SILENCE:
            if not (self.reason and self.reason.strip()):
                raise ValueError("a silence request needs a reason")
            if has_text or has_markdown:
                raise ValueError("a silence request carries no text")
            if self.reminder is not None:
                raise ValueError("a reminder is confirmed in words: not with a silence")
        else:
            if has_text == has_markdown:
                raise ValueError(f"a {self.kind.value} request needs exactly one of text/markdown")
        return self


class AttachmentRef(Contract):
    """An attachment as an intent records it: what the gate found in its bytes, never the
    bytes themselves (they go to DingTalk's media upload once, with the attempt)."""

    name: str
    kind: Literal["image", "file"]
    file_type: str  # as uploaded: png, jpg, pdf, xlsx, …
    size: int
    sha256: str


class MessageContent(Contract):
    # "card": a reply delivered as an AI card (see agent/cards/broker.py); its text is the card's
    # final text, recorded once when the card ends; "approval": an approval card with
    # approve/deny buttons (agent/acts/approval_card.py), its text what the card says
    # "reaction": the working signal as an emotion on the person's message (its name)
    # "image", "file": an attachment of a reply, sent by the OpenAPI after the text; its
    # text is the attachment's name
    # "form": an ask's form card (agent/acts/form_card.py), its text the question
    msgtype: Literal["text", "markdown", "card", "approval", "reaction", "image", "file", "form"]
    text: str
    title: str | None = None
    attachment: AttachmentRef | None = None
    # the AI label ``text`` carries (gates/action_case.py), so what the model said can be
    # told from it (recovery rebuilds an answer's words from its pieces)
    label: str | None = None


class ActionIntent(Contract):
    """An approved request bound to its run; the target is copied from the run's origin."""

    schema_: Literal["dta.action-intent/1"] = Field(default="dta.action-intent/1", alias="$schema")
    intent_id: str
    run_id: str
    event_id: str
    kind: ActionKind
    idempotency_key: str
    target: Origin
    content: MessageContent | None = None
    chunk: int = 1
    chunks: int = 1
    task: TaskPatch | None = None  # the request's task patch, so recovery can settle the task
    # An act's tool, final arguments and the authority it runs under; a confirm's approval.
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    authorization: Authorization | None = None
    approval_id: str | None = None
    gate_checks: list[str]
    created_at: float


class Evidence(Contract):
    """What the platform said. Never holds secrets: tokens and webhook sessions are redacted."""

    http_status: int | None = None
    errcode: int | None = None
    errmsg: str | None = None
    process_query_key: str | None = None
    readback: str | None = None
    error: str | None = None
    retries: int = 0
    channels_tried: list[Channel] = Field(default_factory=list)
    detail: str | None = None
    first_receipt_id: str | None = None
    out_track_id: str | None = None  # the AI card's handle, when the reply was a card
    frames: int | None = None  # frames of the card DingTalk took (the final one included)
    object_id: str | None = None  # what an act made or changed (a to-do's id, an event's)
    media_id: str | None = None  # an attachment's upload (DingTalk's media_id)


class Attempt(Contract):
    schema_: Literal["dta.attempt/1"] = Field(default="dta.attempt/1", alias="$schema")
    attempt_id: str
    intent_id: str
    channel: Channel
    started_at: float
    request_digest: str
    outcome: AttemptOutcome = AttemptOutcome.STARTED
    finished_at: float | None = None
    evidence: Evidence | None = None


class Receipt(Contract):
    """The only proof that something happened (or deliberately did not)."""

    schema_: Literal["dta.receipt/1"] = Field(default="dta.receipt/1", alias="$schema")
    receipt_id: str
    run_id: str
    event_id: str
    intent_id: str | None = None
    kind: ActionKind | None = None  # None only when a refused request named no valid kind
    status: ReceiptStatus
    reason: str | None = None  # refusal or silence code
    evidence: Evidence = Field(default_factory=Evidence)
    gate_version: str
    skill_snapshot: str  # SkillSnapshot.digest
    created_at: float
    updated_at: float
