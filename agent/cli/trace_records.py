"""The stored records of one message's chain as the plain documents ``dta trace`` shows.

``agent/cli/trace.py`` decides what belongs to the chain; this module only turns each
record (event, run, decision, intent with its attempts, receipt, task, memory candidate)
into a JSON-ready dict, times worded by the reader's clock.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from agent.cli.trace_acts import Clock, act_text, act_view
from agent.contracts import AttemptOutcome, Event, ResponseDecision, Run
from agent.run.reactions import RECALL, owes_recall
from storage import Store


def event_record(event: Event, when: Clock) -> dict[str, Any]:
    """The message as stored: where it came from, who sent it, its text and times."""
    return {
        "msg_id": event.event_id,
        "conversation": event.conversation.id,
        "scene": event.conversation.type.value,
        "sender": event.actor.user_id,
        "nick": event.actor.nick,
        "text": event.text,
        "msgtype": event.msgtype,
        "mentioned": event.mentioned,
        "created_at": when(event.created_at),
        "received_at": when(event.received_at),
    }


def run_record(
    run: Run, when: Clock, spent: tuple[str, int, float] | None = None
) -> dict[str, Any]:
    """The run: its state, provider, skills, tokens and what its model cost (``spent``:
    model, tokens, cost in ``model_prices``' unit), tool calls and how it ended."""
    return {
        "model_cost": None if spent is None else round(spent[2], 6),
        "run_id": run.run_id,
        "state": run.state.value,
        "provider": run.provider,
        "generation": run.generation,
        "allowed_actions": [a.value for a in run.allowed_actions],
        "skills": [f"{s.name}@{s.version}" for s in run.skill_snapshot.skills],
        "usage": run.usage,
        "tool_calls": run.evidence.get("tool_calls", []),
        "failure": run.failure,
        "answered_by": run.answered_by,
        "degraded": run.degraded,
        "started_at": when(run.created_at),
        "updated_at": when(run.updated_at),
    }


def intent_records(store: Store, event_id: str, timezone: str) -> list[dict[str, Any]]:
    """Each intent with its attempts; an act's with its raw tool and arguments, what
    became of it (``outcome``, in agent/acts/told.py's vocabulary) and how it reads."""
    chain = []
    approvals = store.approvals.all(event_id)
    for intent in store.actions.intents(event_id):
        webhook = intent.target.session_webhook
        act = act_view(store, intent, approvals, timezone) if intent.tool is not None else None
        item: dict[str, Any] = {
            "kind": intent.kind.value,
            "chunk": f"{intent.chunk}/{intent.chunks}",
            "target": intent.target.conversation_id,
            "webhook_host": urlsplit(webhook.url).netloc if webhook else None,
            "text": intent.content.text if intent.content else act_text(act) if act else "",
            "msgtype": intent.content.msgtype if intent.content else None,
            "form": form_of(intent.kind.value, intent.content.msgtype if intent.content else None),
            "gate_checks": intent.gate_checks,
            "attempts": [
                {
                    "channel": a.channel.value,
                    "outcome": a.outcome.value,
                    "evidence": a.evidence.to_dict() if a.evidence else {},
                }
                for a in store.actions.attempts(intent.intent_id)
            ],
        }
        if act is not None:
            item.update(act)
        if intent.content is not None and intent.content.msgtype == "reaction":
            state = reaction_state(store.actions.attempts(intent.intent_id))
            item["text"] = f"{intent.content.text} — {state}"
        chain.append(item)
    return chain


# What each outbound form is called where one line shows it: an act, a card, a reaction are
# not words the robot said (dev's prompt and the console label them).
_FORMS = {"card": "card", "approval": "approval card", "reaction": "reaction", "image": "picture"}


def form_of(kind: str, msgtype: str | None) -> str:
    """An intent's form by name: "act", "card", "approval card", "reaction", "picture",
    "file" — or "" for words (text, Markdown)."""
    if kind == "act":
        return "act"
    if msgtype in (None, "text", "markdown"):
        return ""
    return _FORMS.get(msgtype, msgtype)


def reaction_state(attempts: list[Any]) -> str:
    """Where a working-signal reaction stands: never put, on the message, or recalled."""
    put = [a for a in attempts if a.request_digest != RECALL]
    recalls = [a for a in attempts if a.request_digest == RECALL]
    if not put or all(a.outcome is AttemptOutcome.FAILED for a in put):
        return "not put (DingTalk refused it)"
    if any(a.outcome is AttemptOutcome.ACCEPTED for a in recalls):
        return f"recalled ({len(recalls)} tr{'y' if len(recalls) == 1 else 'ies'})"
    if owes_recall(attempts):
        tries = (
            f"; {len(recalls)} recall(s) refused, tried again by the recovery pass"
            if recalls
            else ""
        )
        return f"on the message{tries}"
    return "recall refused for good (nothing there to take off)"


def receipt_record(receipt: Any, when: Clock) -> dict[str, Any]:
    """One receipt (a refusal too): its status, reason, the channels tried and when."""
    return {
        "kind": receipt.kind.value if receipt.kind else None,
        "status": receipt.status.value,
        "reason": receipt.reason,
        "channels": [c.value for c in receipt.evidence.channels_tried],
        "detail": receipt.evidence.detail or receipt.evidence.error or receipt.evidence.errmsg,
        "readback": receipt.evidence.readback,
        "at": when(receipt.created_at),
    }


def decision_record(decision: ResponseDecision | None) -> dict[str, Any] | None:
    """The response gate's verdict with every rule it checked, or None when it never ran."""
    if decision is None:
        return None
    return {
        "verdict": decision.verdict.value,
        "reason": decision.reason.value,
        "checked": decision.checked,
        "gate_version": decision.gate_version,
    }


def delivery_records(deliveries: list[Any], when: Clock) -> list[dict[str, Any]]:
    """Each time DingTalk delivered the frame, and whether it was a repeat."""
    return [{"at": when(d.received_at), "duplicate": d.duplicate} for d in deliveries]


def task_records(tasks: list[Any], run: Run | None) -> list[dict[str, Any]]:
    """The thread's tasks this message's run last changed."""
    run_id = run.run_id if run else None
    return [
        {"task_id": t.task_id, "status": t.status.value, "revision": t.revision, "goal": t.goal}
        for t in tasks
        if t.updated_by_run == run_id
    ]


def memory_records(candidates: list[Any], msg_id: str) -> list[dict[str, Any]]:
    """The conversation's memory candidates that cite this message as a source."""
    return [
        {
            "candidate_id": c.candidate_id,
            "status": c.status.value,
            "revision": c.revision,
            "title": c.title,
        }
        for c in candidates
        if f"msg:{msg_id}" in c.source_refs
    ]


RATING_SIGN = {"up": "👍", "down": "👎"}


def feedback_records(store: Store, event_id: str, when: Clock) -> list[dict[str, Any]]:
    """The 👍 / 👎 people gave the answer (one per person: their latest press)."""
    return [
        {
            "by": rated.user_id,
            "rating": rated.rating,
            "sign": RATING_SIGN.get(rated.rating, rated.rating),
            "reason": rated.reason,
            "at": when(rated.at),
        }
        for rated in store.feedback.of_event(event_id)
    ]


def form_records(store: Store, event_id: str, when: Clock) -> list[dict[str, Any]]:
    """The ask-user forms this message's run asked (and, for a form's own event or a
    numbered reply, the form it answered): how asked, where it stands, who submitted what."""
    forms = store.forms.all(event_id)
    answered = store.forms.answered_by(event_id)
    if answered is not None and all(f.form_id != answered.form_id for f in forms):
        forms.append(answered)
    return [
        {
            "form_id": f.form_id,
            "asked_with": f.asked_with,
            "status": f.status,
            "fields": [field.name for field in f.spec.fields],
            "values": f.values,
            "submitted_by": f.submitted_by,
            "expires": when(f.expires_at),
            "decided": when(f.decided_at),
        }
        for f in forms
    ]
