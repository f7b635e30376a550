"""A lab case's expectations (``expect``): the messages, runs, calls, to-dos, events,
reactions, platform record, decisions, receipts, refusals and approvals a run must show."""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.contracts import (
    ActionKind,
    Channel,
    Contract,
    MemoryCandidate,
    ReceiptStatus,
    TaskCheckpoint,
    Verdict,
)
from lab.eval.card_cases import CardExpect
from lab.eval.case_base import CaseModel, Fragment
from lab.eval.feedback_cases import FeedbackExpect
from lab.fake.platform import Channel as PlatformChannel


def _given(model: BaseModel, empty_checks: frozenset[str]) -> set[str]:
    """The keys a case actually gave a value to check: ``null`` and ``[]`` check nothing,
    except where an empty list is itself the expectation (``at_users: []`` is "nobody")."""
    return {
        name
        for name in model.model_fields_set
        if (value := getattr(model, name)) is not None and (value != [] or name in empty_checks)
    }


class _Check(CaseModel):
    """An expectation object: one that gives no key would match anything, so it is refused."""

    EMPTY_CHECKS: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="after")
    def _checks_something(self) -> _Check:
        if not _given(self, self.EMPTY_CHECKS):
            names = ", ".join(type(self).model_fields)
            raise ValueError(f"an empty object matches anything; give at least one of {names}")
        return self


class MessageExpect(_Check):
    EMPTY_CHECKS = frozenset({"at_users"})

    conversation: str | None = None
    user: str | None = None
    contains: list[Fragment] = Field(default_factory=list)
    not_contains: list[Fragment] = Field(default_factory=list)
    matches: Fragment | None = None
    # exactly these users are @-ed, in any order; [] means nobody is
    at_users: list[str] | None = None
    # dta extension: the channel the platform took the message on
    channel: PlatformChannel | None = None
    # what kind of message the person sees (lab-cases.md, "Several robots, media out")
    msgtype: Literal["text", "markdown", "image", "file", "link", "actionCard", "card"] | None = (
        None
    )
    # which robot sent it (its robot_code), in a case with several robots
    robot: str | None = None


class RunExpect(_Check):
    """``expect.runs[msgId]``: the provider whose answer was delivered, and whether the
    run degraded (``model_budget``, ``model_unavailable``, or false)."""

    provider: str | None = None
    degraded: Literal["model_budget", "model_unavailable", False] | None = None
    # dta extension: the state the run ended in (answered, failed, silent, waiting, …)
    state: str | None = None


class ModelRequestExpect(_Check):
    """``expect.model_requests[i]``: the i-th request the fake model received, matched over
    everything in it (system prompt, history, knowledge, the repair round's words)."""

    contains: list[Fragment] = Field(default_factory=list)
    not_contains: list[Fragment] = Field(default_factory=list)


class CallsExpect(_Check):
    """``platform.calls``: exact counts of the HTTP requests the fake answered, by kind
    (``lab.fake.calls.CALL_KINDS``); a kind left out is not checked."""

    total: int | None = Field(default=None, ge=0)
    token: int | None = Field(default=None, ge=0)
    directory: int | None = Field(default=None, ge=0)
    send: int | None = Field(default=None, ge=0)
    card: int | None = Field(default=None, ge=0)
    download: int | None = Field(default=None, ge=0)
    media_upload: int | None = Field(default=None, ge=0)
    reaction: int | None = Field(default=None, ge=0)
    todo: int | None = Field(default=None, ge=0)
    calendar: int | None = Field(default=None, ge=0)
    readback: int | None = Field(default=None, ge=0)
    recall: int | None = Field(default=None, ge=0)
    # DingTalk knowledge: blocks and record reads, permission probes, listings
    doc_read: int | None = Field(default=None, ge=0)
    permission: int | None = Field(default=None, ge=0)
    doc_list: int | None = Field(default=None, ge=0)


class TodoExpect(_Check):
    """``platform.todos[i]``: the i-th to-do the fake workspace holds (creation order)."""

    EMPTY_CHECKS = frozenset({"executors"})

    contains: list[Fragment] = Field(default_factory=list)  # in the subject
    executors: list[str] | None = None  # exactly these staff ids, in any order
    done: bool | None = None


class EventExpect(_Check):
    """``platform.events[i]``: the i-th calendar event the fake workspace holds."""

    EMPTY_CHECKS = frozenset({"attendees"})

    contains: list[Fragment] = Field(default_factory=list)  # in the summary
    attendees: list[str] | None = None  # exactly these staff ids, in any order


class ReactionExpect(_Check):
    """A reaction put on a person's message (in order): whose message, and whether it was
    taken off again."""

    msg: str | None = None
    recalled: bool | None = None


class PlatformExpect(_Check):
    EMPTY_CHECKS = frozenset({"cards", "reactions"})

    count: int | None = Field(default=None, ge=0)
    messages: list[MessageExpect] = Field(default_factory=list)
    # dta extension: message-file download calls the platform answered
    downloads: int | None = Field(default=None, ge=0)
    # dta extension: every AI card the platform created, in order ([] means none)
    cards: list[CardExpect] | None = None
    # every request the fake answered, by kind (``../shared/lab-cases.md``)
    calls: CallsExpect | None = None
    # the smallest real gap between two messages the fake received for one conversation
    min_gap_s: float | None = Field(default=None, gt=0)
    # what the fake workspace holds, in creation order (lab-cases.md, "Workspace tools")
    todos: list[TodoExpect] = Field(default_factory=list)
    events: list[EventExpect] = Field(default_factory=list)
    todos_count: int | None = Field(default=None, ge=0)
    events_count: int | None = Field(default=None, ge=0)
    # reactions put on people's messages, in order ([] means none)
    reactions: list[ReactionExpect] | None = None

    @model_validator(mode="after")
    def _messages_not_empty(self) -> PlatformExpect:
        for name, count in (("messages", "count"), ("todos", "todos_count")):
            if name in self.model_fields_set and not getattr(self, name):
                raise ValueError(f"'{name}': [] checks nothing; say '{count}': 0 for none")
        if "events" in self.model_fields_set and not self.events:
            raise ValueError("'events': [] checks nothing; say 'events_count': 0 for none")
        return self


class DecisionExpect(_Check):
    verdict: Verdict | None = None
    reason: str | None = None


class ReceiptExpect(_Check):
    EMPTY_CHECKS = frozenset({"channels"})

    msg: str | None = None
    kind: ActionKind | None = None
    status: ReceiptStatus | None = None
    reason: str | None = None
    # dta extensions, from the receipt's evidence: the channel that carried it last
    # (`none` when nothing was sent) and every channel tried, in order
    channel: Channel | None = None
    channels: list[Channel] | None = None


class RefusalExpect(_Check):
    msg: str | None = None
    reason: str


def _subset_of(contract: type[Contract]) -> AfterValidator:
    """Check a subset-match record against the contract the store's records are dumped from.

    A misspelt key would never equal anything in a record that lacks it, and a misspelt
    value (``"status": "complete"``) never equals a real one: either turns a case into one
    that cannot pass for the reason it claims, so both are refused before anything runs.
    """
    fields = {name: field for name, field in contract.model_fields.items() if name != "schema_"}

    def check(record: dict[str, Any]) -> dict[str, Any]:
        if not record:
            raise ValueError("an empty object matches any record; name a field to check")
        for key, value in record.items():
            field = fields.get(key)
            if field is None:
                raise ValueError(
                    f"{key!r} is not a field of {contract.__name__}; one of {', '.join(fields)}"
                )
            try:
                TypeAdapter(field.annotation).validate_json(json.dumps(value), strict=True)
            except ValidationError as exc:
                message = exc.errors()[0]["msg"]
                raise ValueError(f"{key!r}: {message}") from None
        return record

    return AfterValidator(check)


TaskSubset = Annotated[dict[str, Any], _subset_of(TaskCheckpoint)]
MemorySubset = Annotated[dict[str, Any], _subset_of(MemoryCandidate)]


class ApprovalExpect(_Check):
    """One approval, in creation order (subset match)."""

    msg: str | None = None
    tool: str | None = None
    status: Literal["pending", "approved", "denied", "expired", "void"] | None = None
    by: str | None = None


class JobSlotExpect(_Check):
    """One slot of a job, oldest first: ``outcome`` dispatched or skipped; ``reason`` the
    skip's, or for a dispatched slot its run's silent reason (``nothing_new``); ``state``
    the run's end (``done``, ``silent``, …)."""

    due_at: float | None = None
    outcome: Literal["dispatched", "skipped"] | None = None
    reason: str | None = None
    state: str | None = None


class JobExpect(_Check):
    """One recurring job, in creation order (subset match); ``slots``: all of its slots,
    oldest first (exact count; ``[]``: none yet)."""

    EMPTY_CHECKS = frozenset({"slots"})

    owner: str | None = None
    schedule: str | None = None
    instruction: str | None = None
    status: Literal["active", "paused", "cancelled"] | None = None
    reason: str | None = None
    source: Literal["words", "config"] | None = None
    next_due_at: float | None = None
    slots: list[JobSlotExpect] | None = None


class FormExpect(_Check):
    """One ask-user form, in creation order (subset match): the message whose run asked,
    its status, the values it was submitted with (exactly), who submitted it."""

    msg: str | None = None
    status: Literal["pending", "submitted", "expired", "cancelled"] | None = None
    values: dict[str, Any] | None = None
    submitted_by: str | None = None
    asked_with: Literal["card", "text"] | None = None


class Expect(CaseModel):
    """What the evidence must show. Every key given is checked; a case with none is refused.

    An explicit empty list of records (``receipts``, ``refusals``, ``tasks``,
    ``memory_candidates``) means "none at all"; empty ``decisions`` or ``processed`` would
    check nothing and are refused.
    """

    EMPTY_CHECKS: ClassVar[frozenset[str]] = frozenset(
        {"receipts", "refusals", "tasks", "memory_candidates"}
    )

    platform: PlatformExpect | None = None
    decisions: dict[str, DecisionExpect] | None = None
    receipts: list[ReceiptExpect] | None = None
    refusals: list[RefusalExpect] | None = None
    quarantined: int | None = Field(default=None, ge=0)
    processed: list[str] | None = None
    # dta extension: redelivered frames recognised as duplicates (acked, counted, not run)
    duplicates: int | None = Field(default=None, ge=0)
    # subset matches on the store's records
    tasks: list[TaskSubset] | None = None
    memory_candidates: list[MemorySubset] | None = None
    # what the fake model was asked (lab-cases.md, "What the model saw and said")
    model_requests: list[ModelRequestExpect] | None = None
    runs: dict[str, RunExpect] | None = None
    model_requests_count: int | None = Field(default=None, ge=0)
    # the approvals of acts, in creation order (lab-cases.md, "Workspace tools")
    approvals: list[ApprovalExpect] | None = None
    approvals_count: int | None = Field(default=None, ge=0)
    # recurring jobs, in creation order (docs/lab.md); ``jobs_count``: exactly how many
    jobs: list[JobExpect] | None = None
    jobs_count: int | None = Field(default=None, ge=0)
    # dta extension (docs/lab.md): the ask-user forms, in creation order
    forms: list[FormExpect] | None = None
    forms_count: int | None = Field(default=None, ge=0)
    # dta extension: 👍 / 👎 on answers, one per person and answer (lab/eval/feedback_cases.py)
    feedback: list[FeedbackExpect] | None = None
    feedback_count: int | None = Field(default=None, ge=0)

    @field_validator("decisions", "processed")
    @classmethod
    def _names_a_message(cls, value: dict[str, Any] | list[str] | None) -> Any:
        if value is not None and not value:
            raise ValueError("an empty one checks nothing; name the msgIds")
        return value

    @model_validator(mode="after")
    def _checks_something(self) -> Expect:
        if not _given(self, self.EMPTY_CHECKS):
            raise ValueError(
                "a case must check something; give at least one of "
                + ", ".join(type(self).model_fields)
            )
        return self
