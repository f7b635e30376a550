"""The action gate's checks (``CHECKS``) and the data they read: the operator's policy, the
store facts, what the run has done so far, and one request under review (``_Case``).

Each check is a small named function that lets the request pass (``None``) or refuses it
with a stable ``RefusalReason``; ``gates/action.py`` runs them in order and turns an
approval into intents. Pure: nothing here reads the store or the clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from pydantic import ValidationError

from agent.contracts import (
    ActionKind,
    ActionRequest,
    Receipt,
    RefusalReason,
    Run,
)
from gates.claims import done_claim, later_promise, unquoted
from gates.reminders import ReminderLimits, mentions_everyone, reminder_problem, reminder_time

# A session webhook URL lets anyone post into the conversation while it lives.
_WEBHOOK_URL = re.compile(r"sendBySession(?:\?|%3F)session(?:=|%3D)", re.IGNORECASE)
MAX_TITLE_CHARS = 64  # a markdown title is a notification line, not a second body
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


@dataclass
class RunTally:
    """What this execution of a run has already done (kept in memory by the pipeline).

    A re-execution after a crash starts a fresh tally; repeats of what the crashed
    execution already did are caught by the idempotency key instead.
    """

    acks: int = 0
    terminal: ActionKind | None = None


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
    # Why the origin's session webhook cannot carry a reply (expired, or its URL off the
    # allowed webhook origins), as the transport decides; None when it can.
    webhook_problem: str | None = None
    # What the run was given as sources (knowledge, memory): a claim quoted from them is
    # theirs, not the robot's.
    sources: tuple[str, ...] = ()


def idempotency_key(event_id: str, kind: ActionKind, chunk: int = 1) -> str:
    """One ack slot and one terminal slot per event; chunks of a long reply get suffixes."""
    slot = "ack" if kind is ActionKind.ACK else "terminal"
    return f"{event_id}:{slot}" if chunk == 1 else f"{event_id}:{slot}#{chunk}"


def slot_keys(event_id: str) -> list[str]:
    """The keys whose use the idempotency check looks up: the event's ack and terminal slots."""
    return [idempotency_key(event_id, kind) for kind in (ActionKind.ACK, ActionKind.REPLY)]


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

    @property
    def request(self) -> ActionRequest:
        """The valid request: every check after ``schema`` relies on it."""
        parsed = self.parsed
        if isinstance(parsed, ValidationError):
            raise parsed
        return parsed

    @property
    def kind(self) -> ActionKind | None:
        """The kind to record on a refusal, also when the request itself was invalid."""
        parsed = self.parsed
        return _kind_of(self.raw) if isinstance(parsed, ValidationError) else parsed.kind

    @cached_property
    def body(self) -> str:
        request = self.request
        return request.text if request.text is not None else request.markdown or ""

    @property
    def later(self) -> str:
        """What the request has the robot say later: a reminder's text, at its time."""
        reminder = self.request.reminder
        return reminder.text if reminder is not None else ""

    @cached_property
    def pieces(self) -> list[str]:
        """The messages the body takes (write budget and content both count them)."""
        return split_text(self.body, self.policy.max_reply_chars)

    @property
    def as_card(self) -> bool:
        return self.form == "card" and self.request.kind is ActionKind.REPLY

    @cached_property
    def reminder_due(self) -> float | None:
        """The reminder's time in epoch seconds (None: no reminder, or an unreadable time)."""
        reminder = self.request.reminder
        return None if reminder is None else reminder_time(reminder.at, self.policy.timezone)

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


def _schema(c: _Case) -> _Refused | None:
    """A valid ActionRequest: it has no target, robot or user field to smuggle in."""
    if not isinstance(c.parsed, ValidationError):
        return None
    first = c.parsed.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "request"
    return _Refused(RefusalReason.SCHEMA_INVALID, f"{where}: {first['msg']}")


def _allowed_action(c: _Case) -> _Refused | None:
    """The run's skills decide which kinds of action it may take."""
    kind = c.request.kind
    if kind in c.run.allowed_actions:
        return None
    return _Refused(RefusalReason.ACTION_NOT_ALLOWED, f"{kind.value} is not allowed")


def _run_state(c: _Case) -> _Refused | None:
    """Nothing after silence, nothing after a terminal action."""
    terminal = c.tally.terminal
    if terminal is ActionKind.SILENCE:
        return _Refused(RefusalReason.RUN_SILENT, "the run already chose silence")
    if terminal is not None:
        return _Refused(RefusalReason.RUN_TERMINAL, f"the run already ended with {terminal}")
    return None


def _generation(c: _Case) -> _Refused | None:
    """A newer message in the same thread supersedes this run."""
    ours, thread = c.run.generation, c.facts.thread_generation
    if ours >= thread:
        return None
    return _Refused(
        RefusalReason.STALE_GENERATION, f"run generation {ours} < thread generation {thread}"
    )


def _run_budget(c: _Case) -> _Refused | None:
    """At most one ack per run (the terminal slot is guarded by ``run_state``)."""
    if c.request.kind is ActionKind.ACK and c.tally.acks >= 1:
        return _Refused(RefusalReason.RUN_BUDGET, "a run may ack at most once")
    return None


def _idempotency(c: _Case) -> _Refused | None:
    """A repeat of a slot already used (e.g. by a crashed execution) gets its first receipt."""
    key = idempotency_key(c.run.event_id, c.request.kind)
    if key not in c.facts.taken_keys:
        return None
    return _Refused(
        RefusalReason.DUPLICATE_INTENT,
        f"idempotency key {key} already used",
        c.facts.taken_keys[key],
    )


def _identity(c: _Case) -> _Refused | None:
    """The run must belong to the robot this daemon is bound to."""
    configured, seen = c.policy.robot_code, c.run.origin.robot_code
    if not configured or seen == configured:
        return None
    return _Refused(
        RefusalReason.IDENTITY_MISMATCH, f"event robot {seen!r} is not the configured robot"
    )


def _write_budget(c: _Case) -> _Refused | None:
    """Per conversation per minute and per day, counting every message a chunked reply takes
    (a reply too long to send at all costs its limit; ``content`` refuses it later)."""
    cost = min(len(c.pieces), c.allowed_pieces)
    facts, policy = c.facts, c.policy
    per_minute = policy.write_budget_per_conversation_per_minute
    if facts.writes_last_minute + cost > per_minute:
        return _Refused(
            RefusalReason.WRITE_BUDGET,
            f"{facts.writes_last_minute} writes in this conversation in the last minute;"
            f" budget {per_minute}",
        )
    if facts.writes_last_day + cost > policy.write_budget_per_day:
        return _Refused(
            RefusalReason.WRITE_BUDGET,
            f"{facts.writes_last_day} writes today; budget {policy.write_budget_per_day}",
        )
    return None


def _target(c: _Case) -> _Refused | None:
    """The origin must still be reachable: a usable session webhook or OpenAPI credentials."""
    webhook = c.run.origin.session_webhook
    live = webhook is not None and webhook.valid_at(c.facts.now, c.policy.webhook_expiry_margin_s)
    if live and c.facts.webhook_problem is None:
        return None
    if c.policy.has_openapi_credentials:
        return None
    problem = c.facts.webhook_problem or "session webhook expired"
    return _Refused(
        RefusalReason.TARGET_UNAVAILABLE, f"{problem} and no OpenAPI credentials configured"
    )


def _content(c: _Case) -> _Refused | None:
    """Long replies are chunked up to a bound, titles stay short, no secret is ever said."""
    pieces, allowed = c.pieces, c.allowed_pieces
    if len(pieces) > allowed:
        return _Refused(
            RefusalReason.CONTENT_TOO_LARGE,
            f"{len(c.body)} characters need {len(pieces)} messages; limit {allowed}",
        )
    title = c.request.title or ""
    if len(title) > MAX_TITLE_CHARS:
        return _Refused(
            RefusalReason.CONTENT_TOO_LARGE,
            f"title has {len(title)} characters; limit {MAX_TITLE_CHARS}",
        )
    said = f"{title}\n{c.body}\n{c.later}"  # everything that goes on the wire, now or later
    if _WEBHOOK_URL.search(said) or any(s in said for s in c.policy.secrets if s):
        return _Refused(
            RefusalReason.SECRET_IN_CONTENT,
            "the text contains a configured secret or a session webhook URL",
        )
    return None


def _reminder(c: _Case) -> _Refused | None:
    """Only for the person who asked, where they asked, in the future within the limit, and
    only when a heartbeat will deliver it (``gates/reminders.py``)."""
    reminder = c.request.reminder
    if reminder is None:
        return None
    policy = c.policy
    problem = reminder_problem(
        reminder,
        c.request.kind,
        c.run.origin,
        c.reminder_due,
        c.facts.now,
        ReminderLimits(policy.reminders, policy.max_reminder_days * DAY_S),
    )
    if problem is None:
        return None
    return _Refused(RefusalReason.REMINDER_NOT_ALLOWED, problem.detail, say=problem.say)


def _at_all(c: _Case) -> _Refused | None:
    """Nothing the robot says @s everyone (an operator's send included)."""
    if mentions_everyone(f"{c.request.title or ''}\n{c.body}\n{c.later}"):
        return _Refused(RefusalReason.AT_ALL, "the text @s everyone")
    return None


UNBACKED_SAY = (
    "这件事我没有办成：我不能替你发消息、通知别人或创建什么，刚才也没有这样做。"
    "需要的话请直接联系对方。"
)
PROMISE_SAY = "这个我现在答不上来，之后也不会自动回复你。需要的话可以让我设一个提醒。"


def _about_reminding(text: str) -> bool:
    return "提醒" in text or "remind" in text.lower()


def _claims(c: _Case) -> _Refused | None:
    """A reply or question that says something was done needs an act in this run behind
    it (``gates/claims.py``); nothing a provider can do yet is such an act, so until the
    tools issue lands the only backing is a reminder this very request sets."""
    if not c.from_provider or c.request.kind not in (ActionKind.REPLY, ActionKind.ASK):
        return None
    said = f"{c.request.title or ''}\n{c.body}"
    claim = done_claim(unquoted(said, c.facts.sources))
    if claim is None or (c.request.reminder is not None and _about_reminding(said)):
        return None
    return _Refused(
        RefusalReason.UNBACKED_CLAIM, f"says {claim!r} with nothing done", say=UNBACKED_SAY
    )


def _promises(c: _Case) -> _Refused | None:
    """A final reply that promises later work needs a follow-up opened with it: a reminder,
    or a task left waiting that the heartbeat follows up."""
    if not c.from_provider or c.request.kind is not ActionKind.REPLY:
        return None
    promise = later_promise(unquoted(c.body, c.facts.sources))
    if promise is None or c.request.reminder is not None:
        return None
    task = c.request.task
    if task is not None and task.status == "waiting" and c.policy.follow_ups:
        return None
    return _Refused(
        RefusalReason.DEFERRED_PROMISE,
        f"promises {promise!r} and no follow-up is opened",
        say=PROMISE_SAY,
    )


class _Check(NamedTuple):
    name: str
    test: Callable[[_Case], _Refused | None]
    # Silence sends nothing: identity, budget, target and content do not apply to it.
    messages_only: bool = False


# Checked in this order; the first refusal decides (RefusalReason lists its codes in this order).
CHECKS: tuple[_Check, ...] = (
    _Check("schema", _schema),
    _Check("allowed_action", _allowed_action),
    _Check("run_state", _run_state),
    _Check("generation", _generation),
    _Check("run_budget", _run_budget),
    _Check("idempotency", _idempotency),
    _Check("identity", _identity, messages_only=True),
    _Check("write_budget", _write_budget, messages_only=True),
    _Check("target", _target, messages_only=True),
    _Check("content", _content, messages_only=True),
    _Check("reminder", _reminder, messages_only=True),
    _Check("at_all", _at_all, messages_only=True),
    _Check("claims", _claims, messages_only=True),
    _Check("promises", _promises, messages_only=True),
)


def _kind_of(raw: Any) -> ActionKind | None:
    """The kind an invalid request claimed, if it named a real one (for the refusal record)."""
    value = raw.get("kind") if isinstance(raw, dict) else None
    try:
        return ActionKind(value) if isinstance(value, str) else None
    except ValueError:
        return None
