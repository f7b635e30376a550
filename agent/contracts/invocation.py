"""What a provider is handed: the ``EnrichedInvocation`` and the items it is enriched with.

Each item (``Identity``, ``QuotedMessage``, ``Burst``, ``Grounding``) derives from
``Sourced``: it says where it came from and what is missing or cut, and never grants
authority. ``MediaItem`` is a picture, file, video or audio fetched after the gate;
``DocumentText`` the text read from a PDF, Word or Excel one, page by page, sheet by sheet
or section by section. ``EnrichedInvocation.for_provider`` is the one view a provider may
see: webhook URLs, download codes and storage paths are left out of it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agent.contracts.base import Contract
from agent.contracts.codes import ActionKind, DocumentProblem, MediaStatus
from agent.contracts.events import Event, ResponseDecision
from agent.contracts.forms import FormAnswer
from agent.contracts.runs import TaskCheckpoint


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


class MediaItem(Contract):
    """A picture, file, video or audio of the message (or of its quote), after the gate.

    ``path`` is where a provider finds the bytes, relative to its run directory; where the
    daemon stored them (``stored_at``) and the download code are the host's business and
    are left out of what providers see.
    """

    media_id: str
    kind: str  # picture | file | video | audio
    # "earlier": of the person's message just before (a file, then 「帮我看下这个文件」)
    part_of: Literal["message", "quote", "earlier"] = "message"
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


# ---- documents: the text of a PDF, Word or Excel file the person sent (agent/run/documents.py)


class DocumentPart(Contract):
    """One page of a PDF, one sheet of a workbook or one headed section of a Word file: what
    a model answers from and names (「根据你发的《报销标准.pdf》第 2 页…」)."""

    ref: str  # "报销标准.pdf#page=2", "budget.xlsx#sheet=差旅", "handbook.docx#section=报销"
    page: int | None = None  # PDF, from 1
    sheet: str | None = None  # Excel: the sheet's name
    section: str | None = None  # Word: the heading above the text (None: before the first)
    text: str  # a sheet's rows one a line, cells separated by " | "
    truncated: bool = False  # cut where the file's budget ran out
    original_length: int | None = None


class DocumentText(Sourced):
    """What was read of one PDF, Word or Excel file, or why nothing could be (``problem``,
    with ``missing`` in words). ``left_out`` names each page, sheet or row range not given
    (over the budget, past a bound, or a page with no text), so nothing unread is guessed at."""

    media_id: str
    file_name: str
    part_of: Literal["message", "quote", "earlier"] = "message"
    format: Literal["pdf", "docx", "xlsx", "office-97"]
    pages: int | None = None  # a PDF's page count
    sheets: list[str] = Field(default_factory=list)  # a workbook's sheet names, all of them
    parts: list[DocumentPart] = Field(default_factory=list)
    left_out: list[str] = Field(default_factory=list)  # "pages 8-12 (over the 20000-char …)"
    problem: DocumentProblem | None = None


# ---- end of documents


class BurstMessage(Contract):
    msg_id: str
    text: str
    created_at: float


class Burst(Sourced):
    messages: list[BurstMessage] = Field(default_factory=list)


class Turn(Contract):
    """One earlier message of the person to the robot, and what the robot actually
    delivered in answer (None: nothing reached them)."""

    msg_id: str
    said: str
    at: float
    reply: str | None = None
    # how long before the message being answered: what the turn says (a count, a list, a
    # status a tool returned then) is a snapshot from then, not this turn's data
    earlier: str = ""


class RecentExchange(Sourced):
    """The person's recent turns with the robot in this conversation, oldest first."""

    turns: list[Turn] = Field(default_factory=list)


class KnowledgeItem(Contract):
    """One section of the knowledge folder, or one published memory, that matches the
    message: what a model answers from and names as its source."""

    ref: str  # "hr/leave.md#病假", "memory:<candidate_id>", or "dingtalk:<doc id>#<heading>"
    # "dingtalk": a section of a DingTalk doc or AI table snapshotted into the store
    kind: Literal["knowledge", "memory", "dingtalk"]
    file: str | None = None  # the folder's file, or the DingTalk doc's title
    section: str | None = None
    content: str
    sha256: str  # of the whole section, so a quote can be checked against its source
    truncated: bool = False
    original_length: int | None = None
    scope: str | None = None  # a memory's conversation
    # a DingTalk doc's: which, where it opens, as of when (what an answer cites)
    doc_id: str | None = None
    link: str | None = None
    as_of: str | None = None  # the doc's (or record's) modified time, in the team's zone
    as_of_epoch: float | None = None


class Grounding(Sourced):
    """What the knowledge folder and this conversation's published memory hold on the
    message: only the items that match, and when none do, what was searched."""

    query: str
    files: int = 0
    sections: int = 0
    memories: int = 0  # published memories in this conversation's scope
    items: list[KnowledgeItem] = Field(default_factory=list)
    nothing_found: str | None = None
    # memories withdrawn here (「忘掉…」, a tombstone proposed or published): never served
    withdrawn: list[str] = Field(default_factory=list)
    # DingTalk docs that matched but the asker may not read (never shown, never quoted):
    # the answer may say a source exists that they cannot open
    unreadable: int = 0
    unchecked: int = 0  # docs withheld because DingTalk could not be asked just now
    docs: int = 0  # DingTalk docs and tables searched beside the folder


class Repair(Contract):
    """Why the provider's previous answer was refused: its one repair round. A model gets
    its answer back with the reason and answers again; a second refusal gets the honest
    plain words instead."""

    reason: str  # the action gate's refusal code (unbacked_claim, deferred_promise)
    detail: str
    previous: list[Any] = Field(default_factory=list)  # the refused requests, as given


class LocalNow(Contract):
    """When the message is answered, as the team says it: a model writing a reminder's or a
    meeting's time needs the date, the weekday and the zone, not epoch seconds."""

    iso: str  # 2026-12-03T18:47:00+08:00
    date: str  # 2026-12-03
    weekday: str  # Thursday / 星期四
    time: str  # 18:47
    timezone: str  # Asia/Shanghai


class EarlierAct(Contract):
    """One of this person's recent acts here (this message's own after a restart, or an
    earlier message's), with what became of it in the host's words: a model asked again
    must not do it a second time, and may say it is done only if it is."""

    tool: str
    action: str  # in words: 创建待办
    object: str  # what it made or changed: a subject, a summary
    people: list[str]  # who it touches, by name where the directory gave one
    outcome: str  # ActOutcome: verified | accepted | uncertain | failed | refused | …
    said: str  # what the outcome means, in the operator's words
    this_message: bool  # asked for by the message being answered (a re-driven run)


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
    # the person's last turns with the robot here and its delivered replies (bounded by
    # context_window_s and context_turns, not by the burst window)
    recent: RecentExchange | None = None
    # the knowledge sections and published memory in scope that match the message
    knowledge: Grounding | None = None
    # the text of the PDF, Word and Excel files among ``media``, per page, sheet or section
    documents: list[DocumentText] = Field(default_factory=list)
    # set on the repair round: what was refused and why
    repair: Repair | None = None
    # the local date, weekday, time and zone (the team's, from ``timezone``)
    now: LocalNow | None = None
    # the person's recent acts in this conversation and what became of them
    acts: list[EarlierAct] = Field(default_factory=list)
    # the form this event submitted (its card's submit, or the asker's numbered reply):
    # the asker's values, checked against the form's fields
    form: FormAnswer | None = None

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
