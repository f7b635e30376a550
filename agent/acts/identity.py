"""Which act a request is: its slot comes from what it does, not from how a model words it.

A model asked again — after a crash, after 「再试一次」, or retrying with one more argument —
words the same act a little differently (「续费公司域名」 for 「续费域名」, a ``due`` added). If
the act's slot were the hash of its arguments, each wording would be a new act and DingTalk
would get a second to-do. So an act is identified by:

- its tool (the kind of effect);
- its object: the argument that names what it makes or changes — compared by its wording
  for a subject or a summary (normalised; the shorter keeps at least ``MIN_SHARE`` of the
  longer, in order or reordered), exactly for an id (the to-do it completes);
- the people it touches, the asker left out (a model adding the asker to the executors
  names the same people);
- every other argument both requests give, exactly (a meeting on the 5th is not the one on
  the 12th; 100 is not 1000). An argument only one of them gives is an addition, not a
  difference; free text (a description) identifies nothing.

A new request that matches one of the person's recent acts in this conversation that may
have happened (or waits for their approval, with the same arguments) takes that act's slot —
the gate then finds it taken, and the earlier act is read back instead of run again. Only an
act that provably did not happen (failed, refused, denied, expired, void) leaves its object
free for a new try, under a fresh slot. An MCP tool's arguments are all compared exactly:
dta cannot tell which of them is wording.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agent.acts.told import last_act_receipt, outcome_of
from agent.contracts import (
    ActionIntent,
    ActOutcome,
    ApprovalRecord,
    ApprovalStatus,
    Authorization,
    canonical_json,
    sha256_text,
)
from agent.tools.builtin import WRITES
from gates.claims_text import normalised, same_object


def _object_of(tool: str) -> tuple[str, bool] | None:
    """A built-in tool's object argument, and whether it is wording (compared loosely) or an
    id (compared exactly): the tool's own (``WriteTool.object_arg``). Free text that
    identifies nothing is left out."""
    write = WRITES.get(tool)
    if write is None or write.object_arg is None:
        return None
    return write.object_arg, write.object_is_wording


_FREE_TEXT = frozenset({"description"})
_PEOPLE = frozenset({"executors", "attendees", "user_ids"})
_TIMES = frozenset({"start", "end", "due"})


def _moment(text: str) -> str:
    """One instant, however its offset is written (08:00+08:00 is 00:00Z)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return text
    return moment.astimezone(UTC).isoformat() if moment.tzinfo else text


@dataclass(frozen=True)
class ActIdentity:
    """What an act does, as requests are compared."""

    tool: str
    object: str | None  # the object's words (or id); None: the tool has no object argument
    loose: bool  # the object is wording, compared by ``same_object``
    people: tuple[str, ...]  # who it touches, the asker left out, sorted
    exact: dict[str, str] = field(default_factory=dict)  # the other arguments, canonical

    def same_as(self, other: ActIdentity) -> bool:
        if (self.tool, self.people, self.loose) != (other.tool, other.people, other.loose):
            return False
        if (self.object is None) != (other.object is None):
            return False
        if self.object is not None and other.object is not None:
            if self.loose and not same_object(self.object, other.object):
                return False
            if not self.loose and self.object != other.object:
                return False
        both = self.exact.keys() & other.exact.keys()
        return all(self.exact[key] == other.exact[key] for key in both)

    def key_text(self) -> str:
        """What a new act's slot is derived from (its first wording)."""
        exact = canonical_json(self.exact)
        obj = normalised(self.object) if self.loose and self.object else (self.object or "")
        return "|".join((self.tool, obj, ",".join(self.people), exact))


def identity_of(auth: Authorization, arguments: dict[str, Any]) -> ActIdentity:
    """The identity of an act from its authorization (who it touches) and arguments."""
    people = tuple(sorted(p for p in auth.audience if p != auth.authorizer))
    chosen = _object_of(auth.tool)
    exact: dict[str, str] = {}
    for key, value in arguments.items():
        if chosen is not None and key == chosen[0]:
            continue
        if chosen is not None and (key in _FREE_TEXT or key in _PEOPLE):
            continue  # free text identifies nothing; people are compared as people
        text = value.strip() if isinstance(value, str) else canonical_json(value)
        if key in _TIMES and isinstance(value, str):
            text = _moment(text)
        exact[key] = normalised(text) if isinstance(value, str) and chosen is None else text
    if chosen is None:
        return ActIdentity(auth.tool, None, False, people, exact)
    value = arguments.get(chosen[0])
    obj = str(value).strip() if value is not None else None
    return ActIdentity(auth.tool, obj, chosen[1], people, exact)


@dataclass(frozen=True)
class EarlierAct:
    """One of the person's recent acts, as a new request is compared with it."""

    key: str
    identity: ActIdentity
    arguments_hash: str
    outcome: ActOutcome
    event_id: str
    intent: ActionIntent | None = None
    approval: ApprovalRecord | None = None

    @property
    def approved(self) -> bool:
        """The asker said yes and it is not carried out yet: it will happen, as approved."""
        return self.approval is not None and self.approval.status is ApprovalStatus.APPROVED

    def holds_its_object(self, event_id: str) -> bool:
        """It may have happened, or still waits for (or has) a yes: a new request is it.
        For the same message, a no stands too: a re-driven run does not ask again."""
        if self.outcome.may_have_happened or self.outcome is ActOutcome.PENDING:
            return True
        said_no = self.outcome in (ActOutcome.DENIED, ActOutcome.EXPIRED)
        return said_no and self.event_id == event_id


def base_key(event_id: str, identity: ActIdentity) -> str:
    """The slot of a new act: its event and what it does (not its wording)."""
    return f"{event_id}:act:{sha256_text(identity.key_text())[:24]}"


def earlier_acts(
    intents: list[ActionIntent],
    approvals: list[ApprovalRecord],
    receipts_of: dict[str, list[Any]],
) -> list[EarlierAct]:
    """The acts behind ``intents`` (with their receipts) and the approvals not carried out
    yet, newest last."""
    found: list[EarlierAct] = []
    keys = set()
    for intent in intents:
        auth = intent.authorization
        if auth is None or intent.tool is None:
            continue
        last = last_act_receipt(receipts_of.get(intent.intent_id, []))
        outcome = outcome_of(last) if last is not None else ActOutcome.UNCERTAIN
        keys.add(intent.idempotency_key)
        identity = identity_of(auth, intent.arguments or {})
        found.append(
            EarlierAct(
                intent.idempotency_key,
                identity,
                auth.arguments_hash,
                outcome,
                intent.event_id,
                intent=intent,
            )
        )
    for record in approvals:
        key = record.act_key
        if key is None or key in keys:
            continue  # carried out: its intent says what became of it
        if record.status is ApprovalStatus.APPROVED:
            outcome = ActOutcome.PENDING  # decided, its settlement still to run
        else:
            outcome = outcome_of(None, record)
        identity = identity_of(record.authorization, record.arguments)
        found.append(
            EarlierAct(
                key,
                identity,
                record.authorization.arguments_hash,
                outcome,
                record.event_id,
                approval=record,
            )
        )
    return found


def slot_for(
    event_id: str,
    auth: Authorization,
    arguments: dict[str, Any],
    earlier: list[EarlierAct],
    taken: set[str],
) -> tuple[str, EarlierAct | None]:
    """The key a new act takes, and the earlier act it is (None: a new act).

    The same act that may have happened, or that its asker approved → its key (never run
    twice). The same act waiting for approval → its key when the arguments are the same
    (asked again, the same approval), else a fresh key (its approval is voided when the new
    one opens). The same message's act its asker declined → its key (the no stands). Otherwise
    a fresh key: the base one, or ``#2``, ``#3`` … when an earlier try that did not happen
    holds it.
    """
    identity = identity_of(auth, arguments)
    for act in reversed(earlier):
        if not act.holds_its_object(event_id) or not act.identity.same_as(identity):
            continue
        # only a pending approval (no answer yet) asked for by an earlier message gives way
        # to new arguments (a correction); an approved one runs as approved, and within one
        # message a re-asked model's new wording is the act already asked for
        corrected = act.outcome is ActOutcome.PENDING and not act.approved
        corrected = corrected and act.event_id != event_id
        if not corrected or act.arguments_hash == auth.arguments_hash:
            return act.key, act
    key = base_key(event_id, identity)
    used = taken | {act.key for act in earlier}
    candidate, n = key, 1
    while candidate in used:
        n += 1
        candidate = f"{key}#{n}"
    return candidate, None
