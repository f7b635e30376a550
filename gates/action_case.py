"""What the action gate's checks read: the operator's policy (``ActionPolicy``), the store
facts (``ActionFacts``), what the run has done so far (``RunTally``), and one request under
review (``_Case``), with the idempotency keys its slots take.

Pure: nothing here reads the store or the clock. The checks themselves are in
``gates/action_checks.py`` (messages) and ``gates/act_checks.py`` (acts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from agent.contracts import (
    ActionKind,
    ActionRequest,
    ApprovalRecord,
    Authorization,
    Receipt,
    RefusalReason,
    Run,
)
from gates.attachments import (
    AttachmentLimits,
    AttachmentProblem,
    CheckedAttachment,
    check_attachments,
)
from gates.backing import Backing
from gates.form_values import in_english, prompt_lines
from gates.reminders import reminder_time

# The write-budget windows: ``ActionFacts`` counts writes over exactly these spans.
DAY_S = 86_400.0
MINUTE_S = 60.0


@dataclass(frozen=True)
class ActionPolicy:
    robot_code: str | None
    write_budget_per_conversation_per_minute: int
    write_budget_per_day: int
    max_reply_chars: int
    max_reply_chunks: int
    has_openapi_credentials: bool
    webhook_expiry_margin_s: float
    # values that must never be said in a conversation (app secret, model keys)
    secrets: tuple[str, ...]
    # Reminders need the heartbeat to deliver them; naive times are read in ``timezone``.
    reminders: bool
    max_reminder_days: float
    timezone: str
    # A task left waiting is followed up by the heartbeat (follow_up_after_s is set), so a
    # reply that says "I'll come back to you" with one is not an empty promise.
    follow_ups: bool
    # Pictures and files a reply may carry (how many, how large each)
    attachments: AttachmentLimits
    # Acts: the tools enabled for this robot (``tools`` in dta.toml), at most this many
    # acts per run, and their own budgets per conversation and in total, per day.
    tools: frozenset[str] = frozenset()
    max_acts_per_run: int = 0
    act_budget_per_conversation_per_day: int = 0
    act_budget_per_day: int = 0
    # the AI label on a model's replies and questions (``ai_label`` in dta.toml)
    ai_label: str = "off"
    ai_label_text: str = ""


@dataclass
class RunTally:
    """What this execution of a run has already done (kept in memory by the pipeline).

    A re-execution after a crash starts a fresh tally; repeats of what the crashed
    execution already did are caught by the idempotency key instead.
    """

    acks: int = 0
    terminal: ActionKind | None = None
    acts: int = 0


@dataclass(frozen=True)
class ActionFacts:
    """Store facts for one run at one moment, loaded by the caller before each decision.

    Writes are counted over the last ``MINUTE_S`` in the run's conversation and the last
    ``DAY_S`` in total; ``taken_keys`` covers the run's ``slot_keys``.
    """

    now: float
    thread_generation: int
    writes_last_minute: int
    writes_last_day: int
    # idempotency key -> the first receipt of the intent holding it (None: taken, no receipt yet)
    taken_keys: dict[str, Receipt | None] = field(default_factory=dict)
    # Of those, the slots this run's own AI card holds, created by an execution that
    # stopped before the card showed anything (no frame, no receipt): a card reply of this
    # run takes it up — the card carries the reply — instead of being refused as a repeat.
    blank_card_keys: frozenset[str] = frozenset()
    # Why the origin's session webhook cannot carry a reply (expired, or its URL off the
    # allowed webhook origins), as the transport decides; None when it can.
    webhook_problem: str | None = None
    # What the run was given as sources (knowledge, memory): a claim quoted from them is
    # theirs, not the robot's.
    sources: tuple[str, ...] = ()
    # What an answer's figures may come from: the knowledge and tool results the run used
    # (none: the answer uses neither, and its figures are not checked), and the question.
    grounds: tuple[str, ...] = ()
    question: str = ""
    # What the run's tools returned (JSON texts) and the staff ids of the people it knows
    # of: a reply says them in words, never pastes them.
    results: tuple[str, ...] = ()
    shown: tuple[str, ...] = ()  # every tool result as the model saw it, envelope and all
    ids: tuple[str, ...] = ()
    # What this run has done that a claim may rest on (gates/backing.py): its acts with
    # their outcomes, effects, people and objects, its reads, approval prompts delivered.
    backing: tuple[Backing, ...] = ()
    # An act under review: its authorization snapshot (from trusted facts; None when the
    # tool is unknown), why the asker may not authorize it (None: they may), acts counted
    # in this conversation and in total over the last day, and its approval if it has one.
    authorization: Authorization | None = None
    authority_problem: str | None = None
    # the people the act names that are not the asker, not @-ed and not returned by a
    # directory look-up in this run; and the act's slot (the same act, however worded)
    unresolved_people: tuple[str, ...] = ()
    act_key: str | None = None
    acts_last_day_conversation: int = 0
    acts_last_day: int = 0
    approval: ApprovalRecord | None = None


FOLLOW_UP_SLOT = "note"  # the host's one line after an answer (ActionRequest.follow_up)


def idempotency_key(event_id: str, kind: ActionKind, chunk: int = 1, of: str = "") -> str:
    """One ack slot and one terminal slot per event; chunks of a long reply get suffixes.
    An act's slot is its final arguments' hash (``of``): the same act in one event never
    runs twice; a confirm's is its approval's id."""
    if kind is ActionKind.ACT:
        return f"{event_id}:act:{of[:24]}"
    if kind is ActionKind.CONFIRM:
        return f"{event_id}:confirm:{of}"
    if of == FOLLOW_UP_SLOT:
        return f"{event_id}:{FOLLOW_UP_SLOT}"
    slot = "ack" if kind is ActionKind.ACK else "terminal"
    return f"{event_id}:{slot}" if chunk == 1 else f"{event_id}:{slot}#{chunk}"


def slot_keys(event_id: str) -> list[str]:
    """The keys whose use the idempotency check looks up: the event's ack and terminal slots."""
    keys = [idempotency_key(event_id, kind) for kind in (ActionKind.ACK, ActionKind.REPLY)]
    return [*keys, idempotency_key(event_id, ActionKind.REPLY, of=FOLLOW_UP_SLOT)]


def split_text(text: str, size: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``size`` characters, preferring line breaks."""
    pieces: list[str] = []
    rest = text
    while len(rest) > size:
        cut = rest.rfind("\n", size // 2, size)
        cut = cut if cut > 0 else size
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    pieces.append(rest)
    return pieces


# Providers whose words are worked out by the host, not generated (rules' arithmetic, its
# figures included, knowledge quoted as written, its honest "can't answer now"), and the
# host's own answers.
NOT_GENERATED = frozenset({"rules", "host"})
LABEL_GAP = "\n\n"  # between the label and the words it labels
CARD_RULE = "\n\n---\n"  # a card's footer line under a rule


def words_of(text: str, label: str | None) -> str:
    """``text`` without the AI ``label`` it carries (wherever ``_Case.labelled`` put it)."""
    if not label:
        return text
    for footer in (f"{LABEL_GAP}{label}", f"{CARD_RULE}{label}"):
        if text.endswith(footer):
            return text[: -len(footer)]
    return text.removeprefix(f"{label}{LABEL_GAP}")


@dataclass(frozen=True)
class _Case:
    """One request under review and everything a check may read (what the response gate
    calls its facts). Derived values are computed once, when a check first needs them."""

    raw: Any
    run: Run
    tally: RunTally
    facts: ActionFacts
    policy: ActionPolicy
    # How a reply would be delivered: "text", "markdown" or "card" (one message, whatever
    # its length, so its budget and its size are those of one message)
    form: str = "text"
    # The provider's words (a model, rules, a command), whose claims need backing; the
    # runtime's own words (an operator's send, a reminder, a follow-up) say what it did.
    from_provider: bool = True

    @cached_property
    def parsed(self) -> ActionRequest | ValidationError:
        raw = self.raw
        if isinstance(raw, ActionRequest):
            return raw
        try:
            return ActionRequest.model_validate(raw)
        except ValidationError as exc:
            return exc

    @cached_property
    def request(self) -> ActionRequest:
        """The valid request: every check after ``schema`` relies on it (read dozens of
        times per decision, so kept once it is had; an invalid one raises each time)."""
        parsed = self.parsed
        if isinstance(parsed, ValidationError):
            raise parsed
        return parsed

    @property
    def kind(self) -> ActionKind | None:
        """The kind to record on a refusal, also when the request itself was invalid."""
        parsed = self.parsed
        return _kind_of(self.raw) if isinstance(parsed, ValidationError) else parsed.kind

    @property
    def slot(self) -> str:
        """What tells this request's slot from others of its kind (acts, confirms)."""
        request = self.request
        if request.kind is ActionKind.ACT:
            auth = self.facts.authorization
            return auth.arguments_hash if auth is not None else ""
        if request.follow_up:
            return FOLLOW_UP_SLOT
        return request.approval_id or ""

    @property
    def key(self) -> str:
        if self.request.kind is ActionKind.ACT and self.facts.act_key is not None:
            return self.facts.act_key  # the act it is, maybe an earlier message's
        return idempotency_key(self.run.event_id, self.request.kind, of=self.slot)

    @cached_property
    def body(self) -> str:
        request = self.request
        body = request.text if request.text is not None else request.markdown or ""
        if request.form is not None and self.form != "form":
            # no form card carries it: the fields go as a numbered question in the words
            body = f"{body}\n{prompt_lines(request.form, in_english(body))}"
        return body

    @property
    def later(self) -> str:
        """What the request has the robot say later: a reminder's text, at its time."""
        reminder = self.request.reminder
        return reminder.text if reminder is not None else ""

    @cached_property
    def pieces(self) -> list[str]:
        """The messages the body takes (write budget and content both count them), each
        with room for the AI label where one goes (``labelled``)."""
        room = len(self.label) + len(LABEL_GAP) if self.label else 0
        return split_text(self.body, self.policy.max_reply_chars - room)

    @property
    def generated(self) -> bool:
        """Are these words a model's (a generating provider's), not the host's?"""
        answered = self.run.answered_by or self.run.provider
        return self.from_provider and answered not in NOT_GENERATED

    @cached_property
    def label(self) -> str:
        """The AI label this request's words carry: a generating provider's reply or
        question, where one is configured; "" for the host's own words and rules' answers."""
        if self.policy.ai_label == "off" or not self.generated:
            return ""
        if self.request.kind not in (ActionKind.REPLY, ActionKind.ASK):
            return ""
        return self.policy.ai_label_text

    def labelled(self, pieces: list[str], card: bool) -> list[str]:
        """``pieces`` with the label on the first ("start") or as the last one's last line;
        words that carry it there already (a model that wrote it too) are left as they are."""
        if not self.label or not pieces:
            return pieces
        if self.policy.ai_label == "start":
            first = pieces[0]
            if first.lstrip().startswith(self.label):
                return pieces
            return [f"{self.label}{LABEL_GAP}{first}", *pieces[1:]]
        return [*pieces[:-1], pieces[-1] + self.label_footer(card, pieces[-1])]

    def label_footer(self, card: bool, words: str) -> str:
        """The label as the last line after ``words`` ("" when they carry none, or end with
        it already): on a card with "card", a footer under a rule. A streamed card takes it
        here whatever the setting: its start was on the screen before it was judged."""
        if not self.label or words.rstrip().endswith(self.label):
            return ""
        if card and self.policy.ai_label == "card":
            return f"{CARD_RULE}{self.label}"
        return f"{LABEL_GAP}{self.label}"

    @property
    def as_card(self) -> bool:
        return self.form == "card" and self.request.kind is ActionKind.REPLY

    @property
    def takes_up_card(self) -> bool:
        """A reply in the slot of the run's own card that a stop left showing nothing: it
        goes on that card, one message, whatever form it was asked in (the host's honest
        failure too), rather than being refused as a repeat."""
        if self.request.kind is not ActionKind.REPLY or self.key not in self.facts.blank_card_keys:
            return False
        return self.as_card or len(self.pieces) == 1

    @cached_property
    def reminder_due(self) -> float | None:
        """The reminder's time in epoch seconds (None: no reminder, or an unreadable time)."""
        reminder = self.request.reminder
        return None if reminder is None else reminder_time(reminder.at, self.policy.timezone)

    @cached_property
    def attachments(self) -> list[CheckedAttachment] | AttachmentProblem:
        """The request's attachments decoded and typed by their bytes, or what is wrong."""
        return check_attachments(
            self.request.attachments, self.policy.attachments, self.policy.secrets
        )

    @property
    def allowed_pieces(self) -> int:
        if self.request.kind is not ActionKind.REPLY or self.as_card:
            return 1
        return self.policy.max_reply_chunks


@dataclass(frozen=True)
class _Refused:
    reason: RefusalReason
    detail: str
    first_receipt: Receipt | None = None
    say: str | None = None  # how the robot tells the person, where the refusal has words


def _kind_of(raw: Any) -> ActionKind | None:
    """The kind an invalid request claimed, if it named a real one (for the refusal record)."""
    value = raw.get("kind") if isinstance(raw, dict) else None
    try:
        return ActionKind(value) if isinstance(value, str) else None
    except ValueError:
        return None
