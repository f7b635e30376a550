"""The action gate: re-checks every request right before it could become a side effect.

Like the response gate it is an ordered table (``CHECKS``): each row is a small named
function that lets the request pass (``None``) or refuses it with a stable
``RefusalReason``, and the first refusal decides. Every verdict lists the checks that ran,
in order, so a receipt or an intent's ``gate_checks`` shows how far the request got.
Approval binds the request to its run: the target is always copied from the run's origin,
never taken from the request (which has no target field to begin with).

The gate is pure: it decides over data handed to it. The store facts it needs
(``ActionFacts``) are gathered outside this package, by ``agent.run.gate_facts.load_facts``, so
a decision can be tested, replayed and explained from data alone. The checks themselves
and the data they read live in ``gates/action_checks.py``; this module runs them and turns
an approval into intents.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    MessageContent,
    Receipt,
    RefusalReason,
    Run,
    new_id,
)
from gates.action_case import (
    DAY_S,
    MINUTE_S,
    ActionFacts,
    ActionPolicy,
    RunTally,
    _Case,
    idempotency_key,
    slot_keys,
    split_text,
)
from gates.action_checks import CHECKS, MAX_TITLE_CHARS, _Check
from gates.attachments import CheckedAttachment

# The gate's whole API, also what ``gates/action_checks.py`` holds (imported from here).
__all__ = [
    "CHECKS",
    "DAY_S",
    "GATE_VERSION",
    "MAX_TITLE_CHARS",
    "MINUTE_S",
    "ActionFacts",
    "ActionGate",
    "ActionPolicy",
    "Approval",
    "Refusal",
    "RunTally",
    "_Case",
    "checks_for",
    "idempotency_key",
    "slot_keys",
    "split_text",
]

GATE_VERSION = "action-gate/1"


@dataclass(frozen=True)
class Approval:
    request: ActionRequest
    intents: list[ActionIntent]
    checked: list[str]
    reminder_due: float | None = None  # epoch seconds of the request's approved reminder
    # An act that passed every check but reaches beyond the asker's own reversible things:
    # it runs only once its authorizer approves (agent/acts/approvals.py).
    waits_for_approval: bool = False
    # a reply's attachments with their bytes (each has an intent of its own after the text)
    attachments: tuple[CheckedAttachment, ...] = ()

    def payload(self, intent: ActionIntent) -> bytes | None:
        """The bytes of the attachment an intent carries (None for any other intent)."""
        ref = intent.content.attachment if intent.content is not None else None
        if ref is None:
            return None
        return next((a.data for a in self.attachments if a.ref.sha256 == ref.sha256), None)


@dataclass(frozen=True)
class Refusal:
    """A refused request; ``checked`` ends with the name of the check that refused it."""

    reason: RefusalReason
    detail: str
    checked: list[str]
    kind: ActionKind | None = None
    first_receipt: Receipt | None = None
    # What the robot says instead, when the refusal has plain words for the person (a
    # switched-off capability); else the honest failure's.
    say: str | None = None

    @property
    def terminal(self) -> bool:
        """Did the refused request claim to end the run? The caller then still owes the
        person an answer (an invalid request counts if it named a terminal kind)."""
        return self.kind is not None and self.kind.is_terminal


class ActionGate:
    def __init__(self, policy: ActionPolicy) -> None:
        self.policy = policy

    def decide(
        self,
        raw: ActionRequest | dict[str, Any] | Any,
        run: Run,
        tally: RunTally,
        facts: ActionFacts,
        form: str = "text",
        from_provider: bool = True,
    ) -> Approval | Refusal:
        """``form`` is how a reply would go ("text", "markdown" or "card"); the gate applies
        it to replies only (and "approval" to a confirm: an approval card; "form" to an ask
        with a form: a form card): acks, other asks and silences keep their own form.
        ``from_provider``: the words are a provider's (their claims need backing), not the
        runtime's own."""
        case = _Case(raw, run, tally, facts, self.policy, form, from_provider)
        checked: list[str] = []
        # ``schema`` first: only a request that parsed has a kind to pick the rest by
        for check in _checks(case):
            checked.append(check.name)
            refused = check.test(case)
            if refused is not None:
                return Refusal(
                    refused.reason,
                    refused.detail,
                    checked,
                    case.kind,
                    refused.first_receipt,
                    refused.say,
                )
        due = case.reminder_due if case.request.reminder is not None else None
        auth = facts.authorization
        waits = (
            case.request.kind is ActionKind.ACT
            and facts.approval is None
            and auth is not None
            and auth.needs_approval
        )
        attachments = case.attachments if case.request.attachments else []
        assert isinstance(attachments, list)  # a problem was refused by its check
        return Approval(
            case.request, _intents(case, checked), checked, due, waits, tuple(attachments)
        )


def checks_for(kind: ActionKind, table: tuple[_Check, ...] = CHECKS) -> tuple[_Check, ...]:
    """The checks of ``table`` that apply to requests of ``kind``, in order (worked out
    once per table and kind: the gate runs before every write)."""
    key = (id(table), kind)
    found = _BY_KIND.get(key)
    if found is None or found[0] is not table:
        found = _BY_KIND[key] = (table, tuple(c for c in table if c.applies(kind)))
    return found[1]


_BY_KIND: dict[tuple[int, ActionKind], tuple[tuple[_Check, ...], tuple[_Check, ...]]] = {}


def _checks(case: _Case) -> Iterator[_Check]:
    """The checks for the case's request, in ``CHECKS`` order (``schema`` decides first
    whether there is a request to read)."""
    yield CHECKS[0]
    yield from checks_for(case.request.kind, CHECKS)[1:]


def _msgtype(c: _Case) -> str:
    """How a message goes: the form it was decided for, where its kind takes that form."""
    kind = c.request.kind
    if c.takes_up_card:  # the slot's card, which a stop left blank, carries it
        return "card"
    if kind is ActionKind.REPLY and c.form in ("markdown", "card"):
        return c.form
    if kind is ActionKind.CONFIRM and c.form == "approval":
        return "approval"
    if kind is ActionKind.ASK and c.form == "form" and c.request.form is not None:
        return "form"
    if kind is ActionKind.ACK and c.form == "reaction":
        return "reaction"
    return "text" if c.request.text is not None else "markdown"


def _intents(c: _Case, checked: list[str]) -> list[ActionIntent]:
    """One intent per message (none for silence's content), each bound to the run's origin."""
    request, run = c.request, c.run
    kind = request.kind
    if kind is ActionKind.ACT:
        return [_act_intent(c, checked)]
    if kind.is_message:
        contents, words = _message_contents(c)
    else:
        contents, words = [None], 1
    return [
        ActionIntent(
            intent_id=new_id("int"),
            run_id=run.run_id,
            event_id=run.event_id,
            kind=kind,
            idempotency_key=_key(c, chunk, words),
            target=run.origin,
            content=content,
            approval_id=request.approval_id,
            chunk=chunk,
            chunks=words,
            task=request.task,
            gate_checks=list(checked),
            created_at=c.facts.now,
        )
        for chunk, content in enumerate(contents, start=1)
    ]


def _act_intent(c: _Case, checked: list[str]) -> ActionIntent:
    """An act's one intent: its tool and arguments under the run's authorization."""
    request, run = c.request, c.run
    return ActionIntent(
        intent_id=new_id("int"),
        run_id=run.run_id,
        event_id=run.event_id,
        kind=request.kind,
        idempotency_key=c.key,
        target=run.origin,
        tool=request.tool,
        arguments=request.arguments or {},
        authorization=c.facts.authorization,
        gate_checks=list(checked),
        created_at=c.facts.now,
    )


def _message_contents(c: _Case) -> tuple[list[MessageContent | None], int]:
    """A message's contents, its text's pieces then each attachment, and how many pieces
    are words (``chunks`` counts these: the attachments come after them)."""
    request = c.request
    msgtype = _msgtype(c)
    pieces = c.labelled(c.pieces, card=msgtype == "card")
    contents: list[MessageContent | None] = [
        MessageContent(
            msgtype=msgtype,
            text=piece,
            title=request.title,
            label=c.label if piece != plain else None,
        )
        for piece, plain in zip(pieces, c.pieces, strict=True)
    ]
    words = len(contents)
    if request.attachments:  # after the text, each its own message in the same slot
        attachments = c.attachments
        assert isinstance(attachments, list)
        contents += [
            MessageContent(msgtype=item.ref.kind, text=item.ref.name, attachment=item.ref)
            for item in attachments
        ]
    return contents, words


def _key(c: _Case, chunk: int, words: int) -> str:
    """The slot's key for its ``chunk``-th message. A card's later parts take ``#2``, ``#3``
    … (``agent/cards/broker.py``, ``part_intent``), so a card reply's files are numbered
    apart (``#file1`` …), in the same slot: a long card never takes a picture's key."""
    kind, event_id = c.request.kind, c.run.event_id
    if c.as_card and chunk > words:
        return f"{idempotency_key(event_id, kind, of=c.slot)}#file{chunk - words}"
    return idempotency_key(event_id, kind, chunk, c.slot)
