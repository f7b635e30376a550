"""A run and what it leaves behind besides receipts: its origin, task and memory proposals.

``Run`` is one event's work, bound to the ``Origin`` it may answer and the ``SkillSnapshot``
it used; ``RunEnding`` says which state a run ends in given its last receipt.
``TaskCheckpoint`` is multi-message work in one thread, and ``MemoryCandidate`` is something
a run proposed to remember (reviewed offline). They are grouped because they are the
run-scoped records the store keeps and the broker and pipeline update together.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from agent.contracts.base import Contract, canonical_json, sha256_text
from agent.contracts.codes import (
    ActionKind,
    ConversationType,
    MemoryStatus,
    ReceiptStatus,
    RunState,
    TaskStatus,
)
from agent.contracts.events import Event, SessionWebhook

if TYPE_CHECKING:
    from agent.contracts.actions import Receipt


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
    # Proactive work (agent/proactive/heartbeat.py). ``origin`` is where the task came
    # from: the only place a follow-up or a reminder may go. A ``reminder`` is due at
    # ``due_at``; a task that waits gets follow-ups counted from ``waiting_since``.
    kind: Literal["task", "reminder"] = "task"
    origin: Origin | None = None
    due_at: float | None = None
    waiting_since: float | None = None
    follow_ups: int = 0


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
    # the tools its skills allow, among the robot's enabled ones (None: they narrow none)
    tools: list[str] | None = None
    origin: Origin
    skill_snapshot: SkillSnapshot = Field(default_factory=SkillSnapshot)
    provider: str
    state: RunState = RunState.WORKING
    usage: dict[str, int] = Field(default_factory=dict)  # provider tokens, if it reports them
    failure: str | None = None  # why the provider gave no usable answer
    # The provider whose answer was delivered, when not ``provider`` (fixed at the start):
    # the fallback, with why (``model_budget``, ``model_unavailable``), or "host".
    answered_by: str | None = None
    degraded: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)  # the provider's (stderr, rounds)
    created_at: float
    updated_at: float


class MemoryCandidate(Contract):
    """Something a run proposed to remember. Online runs only propose; review and publish
    are offline steps by a person (``dta memory``). The id is a hash of scope and content,
    so a replayed or redelivered message never proposes the same thing twice."""

    schema_: Literal["dta.memory-candidate/1"] = Field(
        default="dta.memory-candidate/1", alias="$schema"
    )
    candidate_id: str
    kind: Literal["semantic", "episodic", "social", "procedural", "tombstone"]
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
    # the skills it was learned under (``SkillSnapshot.digest``, with names and versions):
    # a reviewer can tell a fact from what a skill's wording led the run to propose
    skill_snapshot: str | None = None
    skills: list[str] = Field(default_factory=list)
    # Who told it the robot: the run's person (``Origin.user_id``); None on candidates
    # stored before it was recorded. In a group, 「忘掉…」 withdraws at once only what
    # the asker taught (agent/run/forgetting.py).
    taught_by: str | None = None
    # A tombstone for memories someone else taught: they stay in use until a reviewer
    # approves it, which moves these into ``supersedes`` (``dta memory approve``).
    asks_to_supersede: list[str] | None = None

    @staticmethod
    def id_for(scope_id: str, content: str) -> str:
        return "mem_" + sha256_text(f"{scope_id}\n{content.strip()}")[:20]


TaskCheckpoint.model_rebuild()


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
