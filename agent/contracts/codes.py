"""Every enum of the contracts: verdicts, reason codes, states and kinds.

Their values are API — tests, metrics, reports and stored rows count and compare them — so
they are kept together under one rule: add members, never rename them. Also here are the
msgtype groups (``TEXT_MSGTYPES``, ``MEDIA_MSGTYPES``) the readers and the gates share. This
module imports nothing, so any other contract module can use it.
"""

from __future__ import annotations

from enum import StrEnum


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
    # Added by dta for proactive work (agent/proactive/heartbeat.py, agent/proactive/work.py):
    HEARTBEAT_IDLE = "heartbeat_idle"  # a beat found nothing due: recorded, nothing sent
    HEARTBEAT_DUE = "heartbeat_due"  # a beat found due work: each item is its own event
    QUIET_HOURS = "quiet_hours"  # a beat in quiet hours: follow-ups postponed, never dropped
    TASK_EXPIRED = "task_expired"  # a task nobody answered in time ended ``expired``
    NOT_DUE = "not_due"  # the task moved (answered, cancelled) after the beat found it due
    POSTPONED = "postponed"  # a due reminder the write budget refused waits for the budget
    # Added by dta for approvals (agent/acts/settle.py): a voided approval's event, carried
    # out with nothing to say (the request that voided it asks anew), and a decision's
    # event when another run (a code reply's) carries it out.
    APPROVAL_VOID = "approval_void"
    APPROVAL_SETTLED = "approval_settled"
    # Added by dta (agent/run/together.py): a file or picture sent with the words about it
    # (「帮我看下这个文件」 at the same instant, or later in the burst): the words' run takes
    # it and answers both, so its own run ends before anything asks DingTalk for anything.
    ANSWERED_TOGETHER = "answered_together"
    # Added by dta for recurring jobs (agent/proactive/jobs.py): a job's run found the same
    # facts as the last result it delivered, so it says nothing (lab-cases.md).
    NOTHING_NEW = "nothing_new"
    # Added by dta for ask-user forms (agent/acts/form_routes.py): a form's event whose form
    # ended without an answer — it expired, or its asker cancelled it; the card says so.
    FORM_EXPIRED = "form_expired"
    FORM_CANCELLED = "form_cancelled"


class EngageReason(StrEnum):
    DM = "dm"
    MENTIONED = "mentioned"
    # Added by dta: work the heartbeat found due (a follow-up, a reminder, an expiry), and
    # a message an operator sends with ``dta send``; both go to a recorded origin only.
    SCHEDULED = "scheduled"
    OPERATOR = "operator"


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
    # A reply's attachment DingTalk's media upload does not take (by its bytes: text, audio,
    # video, an unknown format) or whose base64 does not decode; too large is
    # content_too_large.
    ATTACHMENT_UNSUPPORTED = "attachment_unsupported"
    # Added by dta: a reminder for someone other than the requester or their conversation,
    # in the past or beyond ``max_reminder_days``, or with no heartbeat to deliver it.
    REMINDER_NOT_ALLOWED = "reminder_not_allowed"
    AT_ALL = "at_all"  # the text @s everyone (@所有人, @all): never sent
    # A Markdown reply embeds an image from anything but DingTalk media (a tracking pixel
    # would tell a stranger who read the message, and when).
    FOREIGN_IMAGE = "foreign_image"
    # A reply or question says something was done (sent, told, created, booked, approved)
    # and nothing in this run backs it: no verified receipt of an act, no tool result.
    UNBACKED_CLAIM = "unbacked_claim"
    # A final reply promises later work and no follow-up was opened (a reminder, or a task
    # the heartbeat follows up): nothing would ever come.
    DEFERRED_PROMISE = "deferred_promise"
    # A reply that uses knowledge or tool results gives a figure (an amount, count,
    # percentage, date, duration) that none of them nor the question holds, and that no
    # computation the reply shows yields from them.
    UNGROUNDED_FIGURE = "ungrounded_figure"
    # A reply pastes a tool's raw output — its field names, or the staff id of someone a
    # tool returned or the message named — instead of saying it in words.
    RAW_TOOL_OUTPUT = "raw_tool_output"
    # Acts (writes to the DingTalk workspace, ``kind: act``), added with the tools:
    TOOL_NOT_ALLOWED = "tool_not_allowed"  # the tool is not enabled for this robot and skill
    NOT_AUTHORIZED = "not_authorized"  # the asker may not authorize it (another's to-do)
    # An act names a person who is not the asker, not @-ed in the message and not returned
    # by a directory look-up in this run: nobody resolved who is meant (one question asks).
    PERSON_UNRESOLVED = "person_unresolved"
    # Acts have their own budgets beside the write budgets (per conversation, per day).
    ACT_BUDGET = "act_budget"
    # An act that waited for approval and did not get it: the asker said no, nobody said
    # yes within ``approval_timeout_s``, or the parameters changed after it was asked for.
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_VOID = "approval_void"


class AttachmentReason(StrEnum):
    """Why a reply's attachment was not delivered while its text was (on a failed receipt)."""

    UPLOAD_FAILED = "upload_failed"  # DingTalk's media upload said no: its words in evidence
    NO_OPENAPI = "attachment_needs_openapi"  # a session webhook cannot carry a file (401102)


class PieceReason(StrEnum):
    """Why a piece of an answer (a chunk, a picture, a file) was not sent (a failed receipt)."""

    EARLIER_PIECE_FAILED = "earlier_piece_failed"  # the words stopped at a failed piece
    PIECE_LOST = "piece_lost"  # after a crash, its bytes were no longer kept


class CardReason(StrEnum):
    """Why a reply meant for an AI card ended otherwise (on its receipt; same stability rules).

    The first five are fallbacks: the card never carried the answer, so the same answer went
    as markdown. ``card_cut_off`` is a card that ended with what was streamed and a note
    that the answer was cut off (a crash, a stall, a provider that broke mid-answer).
    ``card_final_late`` is a whole answer whose last frame DingTalk took only later.
    """

    NO_PERMISSION = "card_no_permission"  # the app lacks Card.Instance.Write / Streaming.Write
    TEMPLATE_UNPUBLISHED = "card_template_unpublished"
    KEY_MISMATCH = "card_key_mismatch"  # 500 unknownError: the key is not the streaming variable
    REFUSED = "card_refused"  # any other definite no to the create
    THROTTLED = "card_throttled"  # the create stayed throttled until card_stall_s
    CUT_OFF = "card_cut_off"
    # The final frame stayed throttled past card_stall_s: the card showed what had streamed
    # (receipt ``failed``) until the recovery loop put the whole answer on it (a second
    # receipt, ``accepted``, with this reason: what the person finally saw).
    FINAL_LATE = "card_final_late"
    # The person who asked pressed the card's stop button: the answer stopped there, the
    # card ends with what it showed and 「已停止」 (receipt ``accepted``: what they chose).
    STOPPED = "card_stopped"
    # A stop cut the create off on the wire and its next execution took the card up: it may
    # or may not exist, so it is closed (if it is there) and the answer goes as markdown.
    CREATE_UNKNOWN = "card_create_unknown"


class SignalReason(StrEnum):
    """Why a working signal (the run's ack) did not show (on its receipt; same rules)."""

    REACTION_FAILED = "reaction_failed"  # the emotion API said no: the answer goes anyway


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
    # A write to the workspace through a tool (``tool`` + ``arguments``): neither a
    # message nor the run's end; its own per-run limit (``max_acts_per_run``).
    ACT = "act"
    # The host's approval prompt for an act that waits (a card with buttons, or a text
    # code): a message, not the run's end; one per approval.
    CONFIRM = "confirm"

    @property
    def is_terminal(self) -> bool:
        return self not in (ActionKind.ACK, ActionKind.ACT, ActionKind.CONFIRM)

    @property
    def is_message(self) -> bool:
        return self not in (ActionKind.SILENCE, ActionKind.ACT)


class Channel(StrEnum):
    SESSION_WEBHOOK = "session_webhook"
    OPENAPI_OTO = "openapi_oto"
    OPENAPI_GROUP = "openapi_group"
    NONE = "none"
    CARD = "card"  # an AI card: created, streamed and finalized through the OpenAPI
    ACT = "act"  # a workspace write (to-do, calendar) through the OpenAPI, read back after
    REACTION = "reaction"  # the working signal as an emotion reaction on the person's message


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


class JobStatus(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"  # with a reason: its owner left the allow list, its conversation is gone
    CANCELLED = "cancelled"


class TaskStatus(StrEnum):
    WORKING = "working"
    WAITING = "waiting"  # asked a question; the actor's next message resumes it
    COMPLETED = "completed"  # only with receipts for every done_when item
    CANCELLED = "cancelled"  # stopped by the actor, or superseded by a correction
    FAILED = "failed"
    # Added by dta for proactive work:
    SCHEDULED = "scheduled"  # a reminder waiting for its time (never a continuation)
    EXPIRED = "expired"  # nobody answered within the follow-ups or ``task_expiry_s``


class MediaStatus(StrEnum):
    FETCHED = "fetched"  # downloaded, checked and stored beside the run
    MISSING = "missing"  # could not be had: ``missing`` says why; never guessed around


class DocumentProblem(StrEnum):
    """Why a PDF, Word or Excel file's text could not be read (``DocumentText.problem``)."""

    NO_TEXT_LAYER = "no_text_layer"  # a scan: pages with no extractable text at all
    ENCRYPTED = "encrypted"  # needs a password (a PDF, or an Office file's encrypted package)
    CORRUPT = "corrupt"  # the bytes are not a readable file of that kind
    UNSUPPORTED = "unsupported"  # Office 97-2003 (.doc, .xls): not read
    TOO_LARGE = "too_large"  # unpacks to more than may be read (a zip bomb, or just huge)
    TIMEOUT = "timeout"  # reading took longer than ``document_read_timeout_s``


class ApprovalStatus(StrEnum):
    PENDING = "pending"  # asked; the run that proposed the act ends ``waiting``
    APPROVED = "approved"  # the authorizer said yes: the act runs (once)
    DENIED = "denied"
    EXPIRED = "expired"  # nobody decided within ``approval_timeout_s``: as a denial
    VOID = "void"  # the parameters changed after it was asked for

    @property
    def is_open(self) -> bool:
        return self is ApprovalStatus.PENDING


class VoidReason(StrEnum):
    """Why an approval ended ``void`` (on the record; its words say which, never a guess)."""

    SUPERSEDED = "superseded"  # the same person asked again for the same object, otherwise
    PROMPT_NOT_DELIVERED = "prompt_not_delivered"  # no card and no text code reached them


class ActOutcome(StrEnum):
    """What became of an act, as every reader tells it: the reply, the approval card,
    ``dta approvals``, the console and ``dta trace`` (agent/acts/told.py has the words).

    From the act's last receipt and its approval: ``verified`` (read back), ``accepted``
    (the platform or tool said done; nothing read it back yet), ``uncertain`` (it may have
    happened: read back later, never run again), ``failed`` (the platform said it did not
    happen), ``refused`` (the gate said no before anything was sent), ``denied``,
    ``expired`` and ``void`` (its approval), ``pending`` (waiting for the approval)."""

    VERIFIED = "verified"
    ACCEPTED = "accepted"
    UNCERTAIN = "uncertain"
    FAILED = "failed"
    REFUSED = "refused"
    DENIED = "denied"
    EXPIRED = "expired"
    VOID = "void"
    PENDING = "pending"

    @property
    def may_have_happened(self) -> bool:
        return self in (ActOutcome.VERIFIED, ActOutcome.ACCEPTED, ActOutcome.UNCERTAIN)


class MemoryStatus(StrEnum):
    PROPOSED = "proposed"
    APPROVED = "approved"
    REJECTED = "rejected"
    PUBLISHED = "published"


class CardState(StrEnum):
    CREATED = "created"  # stored before createAndDeliver: it may or may not exist
    STREAMING = "streaming"  # DingTalk took the create: frames go to it
    FINALIZED = "finalized"  # DingTalk took the final frame and the finished state
    ABANDONED = "abandoned"  # it never existed (the create was refused): markdown went instead

    @property
    def is_open(self) -> bool:
        """A card that may be spinning in the chat: someone must still finalize it."""
        return self in (CardState.CREATED, CardState.STREAMING)
