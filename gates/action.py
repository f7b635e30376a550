"""The action gate: re-checks every request right before it could become a side effect.

The checks run in a fixed order and the first failure refuses the request with a stable
code. Approval binds the request to its run: the target is always copied from the run's
origin, never taken from the request (which has no target field to begin with).

``ActionGate.decide`` is pure. The few facts it needs from the store are gathered by
``load_facts`` and handed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    MessageContent,
    Receipt,
    RefusalReason,
    Run,
    TaskPatch,
    new_id,
)
from storage import Store

GATE_VERSION = "action-gate/1"
# A session webhook URL lets anyone post into the conversation while it lives.
_WEBHOOK_URL = re.compile(r"sendBySession(?:\?|%3F)session(?:=|%3D)", re.IGNORECASE)
MAX_TITLE_CHARS = 64  # a markdown title is a notification line, not a second body
DAY_S = 86_400.0
MINUTE_S = 60.0


@dataclass(frozen=True)
class ActionPolicy:
    robot_code: str | None
    write_budget_per_conversation_per_minute: int = 20
    write_budget_per_day: int = 10_000
    max_reply_chars: int = 3800
    max_reply_chunks: int = 4
    has_openapi_credentials: bool = False
    webhook_expiry_margin_s: float = 30.0
    # values that must never be said in a conversation (app secret, model keys)
    secrets: tuple[str, ...] = ()


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
    """Store facts for one run at one moment (see ``load_facts``)."""

    now: float
    thread_generation: int
    writes_last_minute: int
    writes_last_day: int
    # idempotency key -> the first receipt of the intent holding it (None: taken, no receipt yet)
    taken_keys: dict[str, Receipt | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Approval:
    request: ActionRequest
    intents: list[ActionIntent]
    checks: list[str]


@dataclass(frozen=True)
class Refusal:
    reason: RefusalReason
    detail: str
    checks: list[str]
    kind: ActionKind | None = None
    first_receipt: Receipt | None = None


def idempotency_key(event_id: str, kind: ActionKind, chunk: int = 1) -> str:
    """One ack slot and one terminal slot per event; chunks of a long reply get suffixes."""
    slot = "ack" if kind is ActionKind.ACK else "terminal"
    return f"{event_id}:{slot}" if chunk == 1 else f"{event_id}:{slot}#{chunk}"


def load_facts(store: Store, run: Run, now: float) -> ActionFacts:
    keys = [idempotency_key(run.event_id, kind) for kind in (ActionKind.ACK, ActionKind.REPLY)]
    generation, last_minute, last_day, taken = store.gate_facts(
        run.thread_key, run.origin.conversation_id, now - MINUTE_S, now - DAY_S, keys
    )
    return ActionFacts(
        now=now,
        thread_generation=generation,
        writes_last_minute=last_minute,
        writes_last_day=last_day,
        taken_keys=taken,
    )


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


class ActionGate:
    def __init__(self, policy: ActionPolicy) -> None:
        self.policy = policy

    def decide(
        self,
        raw: ActionRequest | dict[str, Any] | Any,
        run: Run,
        tally: RunTally,
        facts: ActionFacts,
    ) -> Approval | Refusal:
        checks: list[str] = []

        def refuse(
            reason: RefusalReason,
            detail: str,
            kind: ActionKind | None,
            first: Receipt | None = None,
        ) -> Refusal:
            checks.append(reason.value)
            return Refusal(reason, detail, list(checks), kind, first)

        # 1. schema: the request must be a valid ActionRequest (no target, robot or user)
        try:
            request = raw if isinstance(raw, ActionRequest) else ActionRequest.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "request"
            kind = _kind_of(raw)
            return refuse(RefusalReason.SCHEMA_INVALID, f"{where}: {first['msg']}", kind)
        checks.append("schema")
        kind = request.kind

        # 2. the run's skills must allow this kind of action
        if kind not in run.allowed_actions:
            return refuse(RefusalReason.ACTION_NOT_ALLOWED, f"{kind.value} is not allowed", kind)
        checks.append("allowed_action")

        # 3. run state: nothing after silence, nothing after a terminal action
        if tally.terminal is ActionKind.SILENCE:
            return refuse(RefusalReason.RUN_SILENT, "the run already chose silence", kind)
        if tally.terminal is not None:
            return refuse(
                RefusalReason.RUN_TERMINAL, f"the run already ended with {tally.terminal}", kind
            )
        checks.append("run_state")

        # 4. generation: a newer message in the same thread supersedes this run
        if run.generation < facts.thread_generation:
            return refuse(
                RefusalReason.STALE_GENERATION,
                f"run generation {run.generation} < thread generation {facts.thread_generation}",
                kind,
            )
        checks.append("generation")

        # 5. per-run budget: at most one ack
        if kind is ActionKind.ACK and tally.acks >= 1:
            return refuse(RefusalReason.RUN_BUDGET, "a run may ack at most once", kind)
        checks.append("run_budget")

        # 6. idempotency: a repeat of a slot already used returns the first receipt
        key = idempotency_key(run.event_id, kind)
        if key in facts.taken_keys:
            return refuse(
                RefusalReason.DUPLICATE_INTENT,
                f"idempotency key {key} already used",
                kind,
                facts.taken_keys[key],
            )
        checks.append("idempotency")

        if kind is ActionKind.SILENCE:
            intent = self._intent(run, kind, key, None, 1, 1, checks, facts.now, request.task)
            return Approval(request, [intent], checks)

        # 7. identity: the run must belong to the robot this daemon is bound to
        policy = self.policy
        if policy.robot_code and run.origin.robot_code != policy.robot_code:
            return refuse(
                RefusalReason.IDENTITY_MISMATCH,
                f"event robot {run.origin.robot_code!r} is not the configured robot",
                kind,
            )
        checks.append("identity")

        # the content decides how many messages this takes (checked in step 10)
        body = request.text if request.text is not None else request.markdown or ""
        pieces = split_text(body, policy.max_reply_chars)
        allowed_pieces = policy.max_reply_chunks if kind is ActionKind.REPLY else 1

        # 8. write budget, per conversation per minute and per day
        cost = min(len(pieces), allowed_pieces)
        per_minute = policy.write_budget_per_conversation_per_minute
        if facts.writes_last_minute + cost > per_minute:
            return refuse(
                RefusalReason.WRITE_BUDGET,
                f"{facts.writes_last_minute} writes in this conversation in the last minute;"
                f" budget {per_minute}",
                kind,
            )
        if facts.writes_last_day + cost > policy.write_budget_per_day:
            return refuse(
                RefusalReason.WRITE_BUDGET,
                f"{facts.writes_last_day} writes today; budget {policy.write_budget_per_day}",
                kind,
            )
        checks.append("write_budget")

        # 9. the origin must still be reachable
        webhook = run.origin.session_webhook
        webhook_ok = webhook is not None and webhook.valid_at(
            facts.now, policy.webhook_expiry_margin_s
        )
        if not webhook_ok and not policy.has_openapi_credentials:
            return refuse(
                RefusalReason.TARGET_UNAVAILABLE,
                "session webhook expired and no OpenAPI credentials configured",
                kind,
            )
        checks.append("target")

        # 10. content: long replies are chunked, up to a bound; no secret is ever said
        if len(pieces) > allowed_pieces:
            return refuse(
                RefusalReason.CONTENT_TOO_LARGE,
                f"{len(body)} characters need {len(pieces)} messages; limit {allowed_pieces}",
                kind,
            )
        if len(request.title or "") > MAX_TITLE_CHARS:
            return refuse(
                RefusalReason.CONTENT_TOO_LARGE,
                f"title has {len(request.title or '')} characters; limit {MAX_TITLE_CHARS}",
                kind,
            )
        said = f"{request.title or ''}\n{body}"  # everything that goes on the wire
        if _WEBHOOK_URL.search(said) or any(s in said for s in policy.secrets if s):
            return refuse(
                RefusalReason.SECRET_IN_CONTENT,
                "the text contains a configured secret or a session webhook URL",
                kind,
            )
        checks.append("content")

        msgtype = "text" if request.text is not None else "markdown"
        intents = [
            self._intent(
                run,
                kind,
                idempotency_key(run.event_id, kind, index),
                MessageContent(msgtype=msgtype, text=piece, title=request.title),
                index,
                len(pieces),
                checks,
                facts.now,
                request.task,
            )
            for index, piece in enumerate(pieces, start=1)
        ]
        return Approval(request, intents, checks)

    @staticmethod
    def _intent(
        run: Run,
        kind: ActionKind,
        key: str,
        content: MessageContent | None,
        chunk: int,
        chunks: int,
        checks: list[str],
        now: float,
        task: TaskPatch | None = None,
    ) -> ActionIntent:
        return ActionIntent(
            intent_id=new_id("int"),
            run_id=run.run_id,
            event_id=run.event_id,
            kind=kind,
            idempotency_key=key,
            target=run.origin,
            content=content,
            chunk=chunk,
            chunks=chunks,
            task=task,
            gate_checks=list(checks),
            created_at=now,
        )


def _kind_of(raw: Any) -> ActionKind | None:
    """The kind an invalid request claimed, if it named a real one (for the refusal record)."""
    value = raw.get("kind") if isinstance(raw, dict) else None
    try:
        return ActionKind(value) if isinstance(value, str) else None
    except ValueError:
        return None
