"""Typed contracts for everything that crosses a boundary in dta.

Every model forbids unknown fields: a provider that tries to slip a ``target`` or a
``robot`` into an ActionRequest fails validation instead of being quietly obeyed. Reason
codes are enums whose values are API (tests, metrics and reports count them): add members,
never rename them.

This package imports nothing from the project so that ``storage`` and ``gates`` can depend
on it without pulling in the daemon. ``agent.contracts`` is the one import path for every
boundary type: the modules below are how the types are kept, not where they are imported
from —

- ``base``: the ``Contract`` base and the ``new_id``/``sha256_text``/``canonical_json`` helpers
- ``codes``: every enum (reason codes, states, kinds) and the msgtype groups
- ``events``: the normalised callback (``Event`` and its parts) and the gate's verdict on it
- ``runs``: ``Run``, its ``Origin`` and ending, task checkpoints and memory candidates
- ``invocation``: what a provider is handed (``EnrichedInvocation`` and its sourced items)
- ``actions``: request → intent → attempt → receipt, with the platform's evidence
- ``cards``: an AI card as the store keeps it
- ``acts``: an act's authorization snapshot, its approval, a click on an approval card
- ``jobs``: a recurring job and what became of each of its slots
- ``forms``: an ask-user form — its fields, its record while it waits, its checked answer
- ``tool_specs``: what a tool declares, one call and its result (the tools: ``agent/tools/``)
"""

from agent.contracts.actions import (
    ActionIntent,
    ActionRequest,
    AttachmentRef,
    Attempt,
    Evidence,
    MemoryCandidateProposal,
    MessageContent,
    OutboundAttachment,
    Receipt,
    ReminderProposal,
    TaskPatch,
)
from agent.contracts.acts import (
    ApprovalRecord,
    Authorization,
    CardClick,
    Impact,
)
from agent.contracts.base import (
    Contract,
    canonical_json,
    new_id,
    sha256_text,
)
from agent.contracts.cards import (
    Card,
)
from agent.contracts.codes import (
    MEDIA_MSGTYPES,
    TEXT_MSGTYPES,
    ActionKind,
    ActOutcome,
    ApprovalStatus,
    AttachmentReason,
    AttemptOutcome,
    CardReason,
    CardState,
    Channel,
    ConversationType,
    DecisionReason,
    DocumentProblem,
    EngageReason,
    JobStatus,
    MediaStatus,
    MemoryStatus,
    PieceReason,
    QuarantineReason,
    ReceiptStatus,
    RefusalReason,
    RunState,
    SignalReason,
    SilentReason,
    TaskStatus,
    Verdict,
    VoidReason,
)
from agent.contracts.events import (
    Actor,
    AgentDefinition,
    Conversation,
    Event,
    ResponseDecision,
    Robot,
    Scheduled,
    SessionWebhook,
)
from agent.contracts.forms import (
    FormAnswer,
    FormField,
    FormOption,
    FormRecord,
    FormSpec,
    FormValue,
    form_event_id,
    form_id_for,
)
from agent.contracts.invocation import (
    Burst,
    BurstMessage,
    DocumentPart,
    DocumentText,
    EarlierAct,
    EnrichedInvocation,
    Grounding,
    Identity,
    KnowledgeItem,
    LocalNow,
    MediaItem,
    QuotedMessage,
    RecentExchange,
    Repair,
    Sourced,
    Turn,
)
from agent.contracts.jobs import Job, JobRun, job_event_id
from agent.contracts.runs import (
    MemoryCandidate,
    Origin,
    Run,
    RunEnding,
    SkillRef,
    SkillSnapshot,
    TaskCheckpoint,
)
from agent.contracts.tool_specs import ToolCall, ToolResult, ToolSpec

__all__ = [
    "MEDIA_MSGTYPES",
    "TEXT_MSGTYPES",
    "ActOutcome",
    "ActionIntent",
    "ActionKind",
    "ActionRequest",
    "Actor",
    "AgentDefinition",
    "ApprovalRecord",
    "ApprovalStatus",
    "AttachmentReason",
    "AttachmentRef",
    "Attempt",
    "AttemptOutcome",
    "Authorization",
    "Burst",
    "BurstMessage",
    "Card",
    "CardClick",
    "CardReason",
    "CardState",
    "Channel",
    "Contract",
    "Conversation",
    "ConversationType",
    "DecisionReason",
    "DocumentPart",
    "DocumentProblem",
    "DocumentText",
    "EarlierAct",
    "EngageReason",
    "EnrichedInvocation",
    "Event",
    "Evidence",
    "FormAnswer",
    "FormField",
    "FormOption",
    "FormRecord",
    "FormSpec",
    "FormValue",
    "Grounding",
    "Identity",
    "Impact",
    "Job",
    "JobRun",
    "JobStatus",
    "KnowledgeItem",
    "LocalNow",
    "MediaItem",
    "MediaStatus",
    "MemoryCandidate",
    "MemoryCandidateProposal",
    "MemoryStatus",
    "MessageContent",
    "Origin",
    "OutboundAttachment",
    "PieceReason",
    "QuarantineReason",
    "QuotedMessage",
    "Receipt",
    "ReceiptStatus",
    "RecentExchange",
    "RefusalReason",
    "ReminderProposal",
    "Repair",
    "ResponseDecision",
    "Robot",
    "Run",
    "RunEnding",
    "RunState",
    "Scheduled",
    "SessionWebhook",
    "SignalReason",
    "SilentReason",
    "SkillRef",
    "SkillSnapshot",
    "Sourced",
    "TaskCheckpoint",
    "TaskPatch",
    "TaskStatus",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Turn",
    "Verdict",
    "VoidReason",
    "canonical_json",
    "form_event_id",
    "form_id_for",
    "job_event_id",
    "new_id",
    "sha256_text",
]
