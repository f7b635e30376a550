"""Typed contracts for everything that crosses a boundary in dta.

Every model forbids unknown fields: a provider that tries to slip a ``target`` or a
``robot`` into an ActionRequest fails validation instead of being quietly obeyed. Reason
codes are enums whose values are API (tests, metrics and reports count them): add members,
never rename them.

This module imports nothing from the project so that ``storage`` and ``gates`` can depend
on it without pulling in the daemon.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# --------------------------------------------------------------------------- reason codes


class Verdict(StrEnum):
    ENGAGE = "engage"
    SILENT = "silent"


class SilentReason(StrEnum):
    """Why the robot stays silent. The first nine come from the response gate."""

    DUPLICATE = "duplicate"
    SELF_MESSAGE = "self_message"
    PAUSED = "paused"
    DENIED = "denied"
    NOT_ALLOWED = "not_allowed"
    STALE_EVENT = "stale_event"
    UNSUPPORTED_MSGTYPE = "unsupported_msgtype"
    EMPTY_MESSAGE = "empty_message"
    GROUP_NOT_MENTIONED = "group_not_mentioned"
    # Added by dta: the provider chose silence, or could not produce a valid answer.
    PROVIDER_SILENCE = "provider_silence"
    PROVIDER_FAILED = "provider_failed"
    TASK_CANCELLED = "task_cancelled"  # the actor said stop; the task ends, nothing is said
    INTERNAL_ERROR = "internal_error"  # the run broke unexpectedly; see the run's failure


class EngageReason(StrEnum):
    DM = "dm"
    MENTIONED = "mentioned"


DecisionReason = SilentReason | EngageReason


class RefusalReason(StrEnum):
    """Why the action gate refused a request. Order here is the gate's order."""

    SCHEMA_INVALID = "schema_invalid"
    ACTION_NOT_ALLOWED = "action_not_allowed"
    RUN_SILENT = "run_silent"
    RUN_TERMINAL = "run_terminal"
    STALE_GENERATION = "stale_generation"
    RUN_BUDGET = "run_budget"
    DUPLICATE_INTENT = "duplicate_intent"
    IDENTITY_MISMATCH = "identity_mismatch"
    WRITE_BUDGET = "write_budget"
    TARGET_UNAVAILABLE = "target_unavailable"
    CONTENT_TOO_LARGE = "content_too_large"
    # Added by dta: the text would publish a configured secret or a session webhook URL.
    SECRET_IN_CONTENT = "secret_in_content"


class CardReason(StrEnum):
    """Why a reply meant for an AI card ended otherwise (on its receipt; same stability rules).

    The first five are fallbacks: the card never carried the answer, so the same answer went
    as markdown. ``card_cut_off`` is a card that ended with what was streamed and a note
    that the answer was cut off (a crash, a stall, a provider that broke mid-answer).
    """

    NO_PERMISSION = "card_no_permission"  # the app lacks Card.Instance.Write / Streaming.Write
    TEMPLATE_UNPUBLISHED = "card_template_unpublished"
    KEY_MISMATCH = "card_key_mismatch"  # 500 unknownError: the key is not the streaming variable
    REFUSED = "card_refused"  # any other definite no to the create
    THROTTLED = "card_throttled"  # the create stayed throttled until card_stall_s
    CUT_OFF = "card_cut_off"


class QuarantineReason(StrEnum):
    """Why ingest refused a frame (added by dta; same stability rules)."""

    NOT_JSON = "not_json"
    BAD_SHAPE = "bad_shape"
    DATA_NOT_JSON = "data_not_json"
    MISSING_FIELD = "missing_field"
    BAD_FIELD = "bad_field"
    FRAME_TOO_LARGE = "frame_too_large"  # over max_frame_bytes: only a prefix is kept
    NOT_UTF8 = "not_utf8"  # a (binary) frame that is not UTF-8: kept in base64


class ReceiptStatus(StrEnum):
    ACCEPTED = "accepted"  # the platform took it
    VERIFIED = "verified"  # an independent readback saw it
    FAILED = "failed"  # definitely not delivered
    UNCERTAIN = "uncertain"  # may or may not have been delivered; never resent blindly
    REFUSED = "refused"  # the action gate said no
    SILENT = "silent"  # the run chose or was told to stay silent

    @property
    def delivered(self) -> bool:
        """DingTalk took the message (and, for ``verified``, a readback saw it)."""
        return self in (ReceiptStatus.ACCEPTED, ReceiptStatus.VERIFIED)


class ActionKind(StrEnum):
    ACK = "ack"
    REPLY = "reply"
    ASK = "ask"
    SILENCE = "silence"

    @property
    def is_terminal(self) -> bool:
        return self is not ActionKind.ACK

    @property
    def is_message(self) -> bool:
        return self is not ActionKind.SILENCE


class Channel(StrEnum):
    SESSION_WEBHOOK = "session_webhook"
    OPENAPI_OTO = "openapi_oto"
    OPENAPI_GROUP = "openapi_group"
    NONE = "none"
    CARD = "card"  # an AI card: created, streamed and finalized through the OpenAPI


class AttemptOutcome(StrEnum):
    STARTED = "started"
    ACCEPTED = "accepted"
    FAILED = "failed"
    UNCERTAIN = "uncertain"


class RunState(StrEnum):
    WORKING = "working"
    WAITING = "waiting"
    DONE = "done"
    SILENT = "silent"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def is_finished(self) -> bool:
        return self is not RunState.WORKING


# msgtypes whose meaning is their text: with no text and no media there is nothing to read
TEXT_MSGTYPES = ("text", "richText", "audio")
# msgtypes that carry a file DingTalk lets a robot download by its downloadCode
MEDIA_MSGTYPES = ("picture", "file", "video", "audio")


class ConversationType(StrEnum):
    DM = "dm"
    GROUP = "group"


# --------------------------------------------------------------------------- base


class Contract(BaseModel):
    """Base of every boundary model: unknown fields are an error, not a surprise."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_enum_values=False)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def new_id(prefix: str) -> str:
    """A unique id that sorts by creation time (microseconds, then 24 random bits).

    Time-ordered keys append at the end of the store's indexes instead of scattering
    writes across them, which keeps each commit small.
    """
    return f"{prefix}_{time.time_ns() // 1000:013x}{secrets.token_hex(3)}"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value: Any) -> str:
    """Stable JSON for hashing: sorted keys, no whitespace, UTF-8 kept readable."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- agent


class AgentDefinition(Contract):
    """Who the robot is: used for self-introduction and in prompts."""

    name: str = "小钉"
    role: str = "团队的数字员工，回答问题、做简单计算、查阅团队知识库"
    duties: list[str] = Field(
        default_factory=lambda: ["回答团队知识库里的问题", "做算术计算", "说明自己能做什么"]
    )


# --------------------------------------------------------------------------- event


class Conversation(Contract):
    id: str
    type: ConversationType
    title: str | None = None


class Actor(Contract):
    user_id: str  # senderStaffId: the id the OpenAPI and `at` use (senderId when it has none)
    dingtalk_id: str | None = None  # senderId
    # False for a sender DingTalk gave no staff id (external or cross-corp): user_id is then
    # their senderId, which ``at.atUserIds`` cannot resolve.
    has_staff_id: bool = True
    nick: str | None = None
    corp_id: str | None = None
    is_admin: bool = False


class Robot(Contract):
    code: str | None = None
    chatbot_user_id: str | None = None


class SessionWebhook(Contract):
    url: str
    expires_at: float  # epoch seconds

    def valid_at(self, now: float, margin_s: float = 0.0) -> bool:
        return now + margin_s < self.expires_at


class Event(Contract):
    """A chatbot callback, normalised. ``event_id`` is DingTalk's msgId."""

    schema_: Literal["dta.event/1"] = Field(default="dta.event/1", alias="$schema")
    event_id: str
    conversation: Conversation
    actor: Actor
    robot: Robot
    msgtype: str
    text: str = ""
    mentioned: bool = False
    at_users: list[str] = Field(default_factory=list)
    quote: dict[str, Any] | None = None
    # Media described at ingest (never fetched there): one dict per picture, file, video or
    # audio, with ``kind``, ``part_of`` (message|quote) and DingTalk's own fields
    # (downloadCode, fileName, duration, recognition...). See agent/readers.py.
    attachments: list[dict[str, Any]] = Field(default_factory=list)
    session_webhook: SessionWebhook | None = None
    created_at: float
    # Where created_at came from when the callback had no createAt ("frame_header": the
    # Stream frame's own time); absent when DingTalk's createAt was used.
    created_at_source: str | None = None
    received_at: float
    frame_message_id: str | None = None

    @property
    def thread_key(self) -> str:
        """Work is serial per (conversation, actor): one person's thread of requests."""
        return f"{self.conversation.id}|{self.actor.user_id}"

    @property
    def addressed(self) -> bool:
        """Directed at the robot: a DM or an @."""
        return self.conversation.type is ConversationType.DM or self.mentioned


# --------------------------------------------------------------------------- decisions


class ResponseDecision(Contract):
    """The response gate's verdict, written per run as ``response-gate.json``."""

    schema_: Literal["dta.response-decision/1"] = Field(
        default="dta.response-decision/1", alias="$schema"
    )
    event_id: str
    verdict: Verdict
    reason: DecisionReason
    gate_version: str
    checked: list[str]
    decided_at: float


# --------------------------------------------------------------------------- tasks


class TaskStatus(StrEnum):
    WORKING = "working"
    WAITING = "waiting"  # asked a question; the actor's next message resumes it
    COMPLETED = "completed"  # only with receipts for every done_when item
    CANCELLED = "cancelled"  # stopped by the actor, or superseded by a correction
    FAILED = "failed"


class TaskCheckpoint(Contract):
    """Multi-message work in one thread. Updated only by revision compare-and-set."""

    schema_: Literal["dta.task-checkpoint/1"] = Field(
        default="dta.task-checkpoint/1", alias="$schema"
    )
    task_id: str
    scope_id: str  # the thread: conversation + actor
    status: TaskStatus
    revision: int
    goal: str
    done_when: list[str] = Field(default_factory=list)
    waiting_for: str | None = None
    # done_when item -> the receipt that proves it (a task completes only when all are here)
    evidence: dict[str, str] = Field(default_factory=dict)
    updated_by_run: str
    created_at: float
    updated_at: float


# --------------------------------------------------------------------------- invocation


class Sourced(Contract):
    """Base of invocation items: where it came from, and what is missing or cut."""

    source: str
    truncated: bool = False
    original_length: int | None = None
    missing: str | None = None  # reason the content is unavailable; never guessed


class Identity(Sourced):
    user_id: str
    name: str | None = None
    title: str | None = None
    department: str | None = None


class QuotedMessage(Sourced):
    msg_id: str | None = None
    author_id: str | None = None
    author_nick: str | None = None
    created_at: float | None = None
    msgtype: str | None = None
    text: str | None = None
    from_robot: bool = False
    # media_id of each quoted picture or file in ``EnrichedInvocation.media``
    media: list[str] = Field(default_factory=list)


class MediaStatus(StrEnum):
    FETCHED = "fetched"  # downloaded, checked and stored beside the run
    MISSING = "missing"  # could not be had: ``missing`` says why; never guessed around


class MediaItem(Contract):
    """A picture, file, video or audio of the message (or of its quote), after the gate.

    ``path`` is where a provider finds the bytes, relative to its run directory; where the
    daemon stored them (``stored_at``) and the download code are the host's business and
    are left out of what providers see.
    """

    media_id: str
    kind: str  # picture | file | video | audio
    part_of: Literal["message", "quote"] = "message"
    status: MediaStatus
    file_name: str | None = None
    mime: str | None = None  # sniffed from the bytes, not taken from the name
    size: int | None = None
    sha256: str | None = None
    path: str | None = None
    stored_at: str | None = None
    download_code: str | None = None
    duration_ms: int | None = None
    recognition: str | None = None  # DingTalk's speech-to-text for audio
    missing: str | None = None
    # why it is missing, as a code: refused (DingTalk said no to the code: expired, invalid;
    # worth a resend), too_large, timeout, failed, no_code
    problem: str | None = None

    @property
    def refused(self) -> bool:
        return self.problem == "refused"

    @property
    def is_image(self) -> bool:
        return self.status is MediaStatus.FETCHED and (self.mime or "").startswith("image/")


class BurstMessage(Contract):
    msg_id: str
    text: str
    created_at: float


class Burst(Sourced):
    messages: list[BurstMessage] = Field(default_factory=list)


class EnrichedInvocation(Contract):
    """What a behavior skill sees: the event plus quote, burst and identity.

    Sources explain where an item came from; they never grant authority.
    """

    schema_: Literal["dta.enriched-invocation/1"] = Field(
        default="dta.enriched-invocation/1", alias="$schema"
    )
    run_id: str
    event: Event
    response_gate: ResponseDecision | None = None
    text: str
    text_truncated: bool = False
    text_original_length: int | None = None
    identity: Identity
    quote: QuotedMessage | None = None
    burst: Burst | None = None
    allowed_actions: list[ActionKind]
    # the thread's waiting task this message answers, with its checkpoint
    continuation: TaskCheckpoint | None = None
    # the message's media (and its quote's), fetched after the gate engaged
    media: list[MediaItem] = Field(default_factory=list)

    def for_provider(self) -> dict[str, Any]:
        """The invocation as any provider (a model, an external command) may see it.

        The session webhook is left out: its URL lets anyone post into the conversation
        until it expires — a credential that would bypass the action gate. Download codes
        and where the daemon keeps media are left out too: providers read ``path``.
        """
        data = self.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"event": {"session_webhook"}}
        )
        for item in data.get("media", []):
            item.pop("stored_at", None)
            item.pop("download_code", None)
        for item in data.get("event", {}).get("attachments", []):
            for key in ("downloadCode", "pictureDownloadCode"):
                item.pop(key, None)
        return data


# --------------------------------------------------------------------------- skills


class SkillRef(Contract):
    name: str
    version: str
    files: dict[str, str]  # relative path -> sha256


class SkillSnapshot(Contract):
    """The frozen set of skills a run used, stamped on each of its receipts."""

    skills: list[SkillRef] = Field(default_factory=list)

    @cached_property
    def digest(self) -> str:
        """Short content hash: equal snapshots have equal digests (stamped on receipts)."""
        return sha256_text(canonical_json(self.to_dict()))[:16]


# --------------------------------------------------------------------------- run


class Origin(Contract):
    """The only place a run may answer: where the message came from."""

    conversation_id: str
    conversation_type: ConversationType
    user_id: str
    nick: str | None = None
    robot_code: str | None = None
    session_webhook: SessionWebhook | None = None
    # False when user_id is a senderId (no staff id): a group reply then @s by dingtalkId
    has_staff_id: bool = True

    @classmethod
    def of(cls, event: Event) -> Origin:
        """Where ``event`` came from: the one place its run may answer."""
        return cls(
            conversation_id=event.conversation.id,
            conversation_type=event.conversation.type,
            user_id=event.actor.user_id,
            nick=event.actor.nick,
            robot_code=event.robot.code,
            session_webhook=event.session_webhook,
            has_staff_id=event.actor.has_staff_id,
        )


class Run(Contract):
    schema_: Literal["dta.run/1"] = Field(default="dta.run/1", alias="$schema")
    run_id: str
    event_id: str
    thread_key: str
    generation: int
    allowed_actions: list[ActionKind]
    origin: Origin
    skill_snapshot: SkillSnapshot = Field(default_factory=SkillSnapshot)
    provider: str
    state: RunState = RunState.WORKING
    usage: dict[str, int] = Field(default_factory=dict)  # provider tokens, if it reports them
    failure: str | None = None  # why the provider gave no usable answer
    evidence: dict[str, Any] = Field(default_factory=dict)  # the provider's (stderr, rounds)
    created_at: float
    updated_at: float


# --------------------------------------------------------------------------- actions


class TaskPatch(Contract):
    """A provider's proposed change to the thread's task checkpoint."""

    goal: str | None = None
    done_when: list[str] | None = None
    waiting_for: str | None = None
    status: Literal["working", "waiting", "completed", "cancelled"] | None = None


class MemoryCandidateProposal(Contract):
    kind: Literal["semantic", "episodic", "social", "procedural"] = "semantic"
    title: str
    content: str
    confidence: float = Field(default=0.5, ge=0, le=1)
    source_refs: list[str] = Field(default_factory=list)
    supersedes: list[str] = Field(default_factory=list)


class MemoryStatus(StrEnum):
    PROPOSED = "proposed"
    APPROVED = "approved"
    REJECTED = "rejected"
    PUBLISHED = "published"


class MemoryCandidate(Contract):
    """Something a run proposed to remember. Online runs only propose; review and publish
    are offline steps by a person (``dta memory``). The id is a hash of scope and content,
    so a replayed or redelivered message never proposes the same thing twice."""

    schema_: Literal["dta.memory-candidate/1"] = Field(
        default="dta.memory-candidate/1", alias="$schema"
    )
    candidate_id: str
    kind: Literal["semantic", "episodic", "social", "procedural"]
    scope_id: str
    title: str
    content: str
    source_refs: list[str]
    confidence: float
    supersedes: list[str] = Field(default_factory=list)
    status: MemoryStatus = MemoryStatus.PROPOSED
    revision: int = 1
    proposed_by_run: str
    created_at: float
    updated_at: float

    @staticmethod
    def id_for(scope_id: str, content: str) -> str:
        return "mem_" + sha256_text(f"{scope_id}\n{content.strip()}")[:20]


class ActionRequest(Contract):
    """What a provider may ask for. It has no target, robot or user: the origin is implied.

    ``ack`` says "seen, this takes a while"; ``reply`` delivers a result; ``ask`` asks one
    short blocking question; ``silence`` says nothing and must say why.
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

    @model_validator(mode="after")
    def _content_matches_kind(self) -> ActionRequest:
        has_text = bool(self.text and self.text.strip())
        has_markdown = bool(self.markdown and self.markdown.strip())
        if self.kind is ActionKind.SILENCE:
            if not (self.reason and self.reason.strip()):
                raise ValueError("a silence request needs a reason")
            if has_text or has_markdown:
                raise ValueError("a silence request carries no text")
        else:
            if has_text == has_markdown:
                raise ValueError(f"a {self.kind.value} request needs exactly one of text/markdown")
        return self


class MessageContent(Contract):
    # "card": a reply delivered as an AI card (see agent/cards.py); its text is the card's
    # final text, recorded once when the card ends
    msgtype: Literal["text", "markdown", "card"]
    text: str
    title: str | None = None


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


class CardState(StrEnum):
    CREATED = "created"  # stored before createAndDeliver: it may or may not exist
    STREAMING = "streaming"  # DingTalk took the create: frames go to it
    FINALIZED = "finalized"  # DingTalk took the final frame and the finished state
    ABANDONED = "abandoned"  # it never existed (the create was refused): markdown went instead

    @property
    def is_open(self) -> bool:
        """A card that may be spinning in the chat: someone must still finalize it."""
        return self in (CardState.CREATED, CardState.STREAMING)


class Card(Contract):
    """An AI card carrying one reply intent, as the store keeps it.

    ``streamed`` is the last frame DingTalk took, so a card left open by a crash can be
    finalized with exactly what the person saw; ``final`` is the text the card must end
    with once that is decided (the answer, a refusal, or the cut-off text).
    """

    schema_: Literal["dta.card/1"] = Field(default="dta.card/1", alias="$schema")
    out_track_id: str
    intent_id: str
    run_id: str
    event_id: str
    conversation_id: str
    template_id: str
    content_key: str
    state: CardState = CardState.CREATED
    frames: int = 0
    streamed: str = ""
    final: str | None = None
    fallback: CardReason | None = None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class RunEnding:
    """How a run ends if a given receipt is its last word: data the pipeline hands to the
    broker, which saves the ended run in the receipt's own transaction.

    ``delivered`` is the state when the platform took the message, ``otherwise`` when it
    did not (failed, uncertain) — both the same for a silence or an honest failure. A
    streamed reply (a card) ends the same way when its final frame is receipted.
    """

    delivered: RunState
    otherwise: RunState

    def state_for(self, status: ReceiptStatus) -> RunState:
        delivered = status.delivered or status is ReceiptStatus.SILENT
        return self.delivered if delivered else self.otherwise

    def apply(self, run: Run, receipt: Receipt) -> Run:
        return run.model_copy(
            update={"state": self.state_for(receipt.status), "updated_at": receipt.created_at}
        )
