"""The action gate's checks for messages and the order of the whole table (``CHECKS``).

Each check is a small named function that lets the request pass (``None``) or refuses it
with a stable ``RefusalReason``; ``gates/action.py`` runs them in order and turns an
approval into intents. What they read is ``gates/action_case.py``; the checks of acts are
``gates/act_checks.py``. Pure: nothing here reads the store or the clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, NamedTuple

from pydantic import ValidationError

from agent.contracts import ActionKind, RefusalReason
from gates.act_checks import act_approval, act_budget, act_tool, authority, people
from gates.action_case import (
    DAY_S,
    MINUTE_S,
    ActionFacts,
    ActionPolicy,
    RunTally,
    _Case,
    _Refused,
    idempotency_key,
    slot_keys,
    split_text,
)
from gates.attachments import AttachmentProblem
from gates.backing import Backing, unbacked, unkept
from gates.claims import find_claims
from gates.figure_grounding import problem_detail, ungrounded
from gates.images import foreign_images
from gates.raw_output import raw_output
from gates.reminders import ReminderLimits, mentions_everyone, reminder_problem

__all__ = [
    "CHECKS",
    "DAY_S",
    "MINUTE_S",
    "ActionFacts",
    "ActionPolicy",
    "RunTally",
    "_Case",
    "idempotency_key",
    "slot_keys",
    "split_text",
]

# A session webhook URL lets anyone post into the conversation while it lives.
_WEBHOOK_URL = re.compile(r"sendBySession(?:\?|%3F)session(?:=|%3D)", re.IGNORECASE)
MAX_TITLE_CHARS = 64  # a markdown title is a notification line, not a second body


def _schema(c: _Case) -> _Refused | None:
    """A valid ActionRequest: it has no target, robot or user field to smuggle in."""
    if not isinstance(c.parsed, ValidationError):
        return None
    first = c.parsed.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "request"
    return _Refused(RefusalReason.SCHEMA_INVALID, f"{where}: {first['msg']}")


def _allowed_action(c: _Case) -> _Refused | None:
    """The run's skills decide which kinds of action it may take. A confirm is the host's
    own prompt for an act that waits: allowed where acts are, never from a provider."""
    kind = c.request.kind
    if c.request.follow_up and c.from_provider:
        return _Refused(RefusalReason.ACTION_NOT_ALLOWED, "a follow-up line is the host's own")
    if kind is ActionKind.CONFIRM:
        if not c.from_provider and ActionKind.ACT in c.run.allowed_actions:
            return None
    elif kind in c.run.allowed_actions:
        return None
    return _Refused(RefusalReason.ACTION_NOT_ALLOWED, f"{kind.value} is not allowed")


def _run_state(c: _Case) -> _Refused | None:
    """Nothing after silence, nothing after a terminal action (but the host's one line on
    what of it could not be sent)."""
    terminal = c.tally.terminal
    if c.request.follow_up and terminal is not ActionKind.SILENCE:
        return None
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
    """At most one ack per run, and at most ``max_acts_per_run`` acts (the terminal slot is
    guarded by ``run_state``)."""
    if c.request.kind is ActionKind.ACK and c.tally.acks >= 1:
        return _Refused(RefusalReason.RUN_BUDGET, "a run may ack at most once")
    limit = c.policy.max_acts_per_run
    if c.request.kind is ActionKind.ACT and c.tally.acts >= limit:
        return _Refused(RefusalReason.RUN_BUDGET, f"a run may act at most {limit} times")
    return None


def _idempotency(c: _Case) -> _Refused | None:
    """A repeat of a slot already used (e.g. by a crashed execution) gets its first receipt;
    a reply in the slot of the run's own card that a stop left showing nothing goes on it."""
    key = c.key
    if key not in c.facts.taken_keys or c.takes_up_card:
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
    cost = min(len(c.pieces), c.allowed_pieces) + len(c.request.attachments)
    if c.takes_up_card:
        cost -= 1  # the card it takes up was counted when it was made: one message, once
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


def _attachments(c: _Case) -> _Refused | None:
    """A reply's pictures and files: DingTalk takes them (by their bytes, not their names),
    none too large, no more than a reply may carry, no secret inside (``gates/attachments.py``)."""
    checked = c.attachments
    if isinstance(checked, AttachmentProblem):
        return _Refused(checked.reason, checked.detail)
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


def _images(c: _Case) -> _Refused | None:
    """What goes as Markdown embeds pictures only by DingTalk media id: a reader's client
    fetches any other, and its host learns who read the message and when (``gates/images.py``).
    Each message is judged as it will be shown (a chunk alone, the title apart); a text
    message shows the syntax as written."""
    request = c.request
    shown = request.markdown is not None
    if request.kind is ActionKind.REPLY and c.form in ("markdown", "card"):
        shown = True  # the reply form turns text into Markdown (``_intents``)
    if not shown:
        return None
    hosts = foreign_images(request.title or "")
    for piece in c.pieces:
        hosts += [host for host in foreign_images(piece) if host not in hosts]
    if not hosts:
        return None
    return _Refused(
        RefusalReason.FOREIGN_IMAGE,
        f"embeds an image from {', '.join(hosts[:3])}; only DingTalk media ids (@lA…) may be shown",
    )


UNBACKED_SAY = (
    "这件事我还没有办成，刚才也没有这样做。需要的话请再说一次具体要办什么，或者直接联系对方。"
)
PROMISE_SAY = "这个我现在答不上来，之后也不会自动回复你。需要的话可以让我设一个提醒。"


def _claims(c: _Case) -> _Refused | None:
    """Every claim of doing in an ack, a reply or a question needs an act of this run
    behind that very claim (``gates/backing.py``): its own kind of effect, its own people
    and object, worded as far as its outcome goes (verified: done; accepted: done, not yet
    confirmed; uncertain: submitted). A look-up backs no claim of doing; an approval prompt
    backs none of its act; a reminder the request sets backs its own confirmation."""
    if not c.from_provider or c.request.kind not in _SPOKEN:
        return None
    said = f"{c.request.title}\n{c.body}" if c.request.title else c.body
    found = unbacked(
        find_claims(said, c.facts.sources),
        c.facts.backing,
        reminder=c.request.reminder is not None,
    )
    if found is None:
        return None
    return _Refused(RefusalReason.UNBACKED_CLAIM, found[1], say=UNBACKED_SAY)


def _promises(c: _Case) -> _Refused | None:
    """A final reply that promises later work (or narrates work in progress) needs
    something opened to keep it: a reminder, a task left waiting that the heartbeat follows
    up, an act in doubt whose read-back the asker is told of, an approval the act waits on."""
    if not c.from_provider or c.request.kind is not ActionKind.REPLY:
        return None
    backing = list(c.facts.backing)
    task = c.request.task
    if task is not None and task.status == "waiting" and c.policy.follow_ups:
        backing.append(Backing("task"))
    promise = unkept(
        find_claims(c.body, c.facts.sources), backing, reminder=c.request.reminder is not None
    )
    if promise is None:
        return None
    return _Refused(
        RefusalReason.DEFERRED_PROMISE,
        f"promises {promise.text!r} ({promise.effect}) and nothing is opened to keep it",
        say=PROMISE_SAY,
    )


FIGURE_SAY = (
    "我给出的数字和我查到的资料对不上，所以没有发出。请以资料原文为准，或者换个问法再问我一次。"
)


def _figures(c: _Case) -> _Refused | None:
    """An answer that uses knowledge or tool results gives only figures they or the
    question hold, or that a computation it shows yields from them
    (``gates/figure_grounding.py``): 300 美元 against a section that says 180 美元 is
    refused, 「180 美元 × 2 晚 = 360 美元」 passes."""
    if not c.generated or c.request.kind not in (ActionKind.REPLY, ActionKind.ASK):
        return None  # the host's own arithmetic and words are no model's guess
    if not c.facts.grounds:
        return None
    said = f"{c.request.title}\n{c.body}" if c.request.title else c.body
    found = ungrounded(said, c.facts.grounds, c.facts.question)
    if not found:
        return None
    detail = problem_detail(found, c.facts.grounds)
    return _Refused(RefusalReason.UNGROUNDED_FIGURE, detail, say=FIGURE_SAY)


RAW_SAY = "我刚才的回答直接贴了工具的原始数据，没有发出。请再问我一次，我用平常的话说给你。"


def _raw_output(c: _Case) -> _Refused | None:
    """What a tool returned is said in words: a reply that pastes its fields or a staff
    id (``gates/raw_output.py``) is refused, to be said again as prose."""
    if not c.from_provider or c.request.kind not in _SPOKEN:
        return None
    results = (*c.facts.results, *c.facts.shown)
    if not results and not c.facts.ids:
        return None
    problem = raw_output(f"{c.request.title or ''}\n{c.body}", results, c.facts.ids)
    if problem is None:
        return None
    return _Refused(RefusalReason.RAW_TOOL_OUTPUT, problem, say=RAW_SAY)


_SPOKEN = (ActionKind.ACK, ActionKind.REPLY, ActionKind.ASK)


# Which requests a check applies to: all; messages (silence and acts send no message);
# acts; writes (messages and acts: anything with an effect outside).
Scope = Literal["all", "messages", "acts", "writes"]


class _Check(NamedTuple):
    name: str
    test: Callable[[_Case], _Refused | None]
    scope: Scope = "all"

    def applies(self, kind: ActionKind) -> bool:
        if self.scope == "messages":
            return kind.is_message
        if self.scope == "acts":
            return kind is ActionKind.ACT
        if self.scope == "writes":
            return kind.is_message or kind is ActionKind.ACT
        return True


# Checked in this order; the first refusal decides (RefusalReason lists its codes in this order).
CHECKS: tuple[_Check, ...] = (
    _Check("schema", _schema),
    _Check("allowed_action", _allowed_action),
    _Check("run_state", _run_state),
    _Check("generation", _generation),
    _Check("run_budget", _run_budget),
    _Check("idempotency", _idempotency),
    _Check("identity", _identity, "writes"),
    _Check("write_budget", _write_budget, "messages"),
    _Check("target", _target, "messages"),
    _Check("content", _content, "messages"),
    _Check("attachments", _attachments, "messages"),
    _Check("reminder", _reminder, "messages"),
    _Check("at_all", _at_all, "messages"),
    _Check("images", _images, "messages"),
    _Check("claims", _claims, "messages"),
    _Check("promises", _promises, "messages"),
    _Check("figures", _figures, "messages"),
    _Check("raw_output", _raw_output, "messages"),
    # acts only (they send no message, so the message checks above skip them)
    _Check("tool", act_tool, "acts"),
    _Check("authority", authority, "acts"),
    _Check("people", people, "acts"),
    _Check("act_budget", act_budget, "acts"),
    _Check("approval", act_approval, "acts"),
)
