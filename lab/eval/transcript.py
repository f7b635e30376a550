"""A readable account of one case or replay: per event, what was decided and done.

Built from the store and the fake platform's record after the run, for reports and for
``dta lab replay``. It contains no secrets: webhook URLs are cut to their host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lab.eval.stores import Records


@dataclass
class EventTrail:
    msg: str
    actor: str
    conversation: str
    scene: str
    text: str
    deliveries: int
    decision: dict[str, Any] | None
    run_state: str | None
    intents: list[dict[str, Any]] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Transcript:
    events: list[EventTrail]
    platform: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]
    faults: list[dict[str, Any]]
    tasks: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        out: list[str] = []
        for q in self.quarantine:
            out.append(f"frame quarantined ({q['reason']}): {q['error']}")
        for trail in self.events:
            out.append(
                f"{trail.msg} from {trail.actor} in {trail.scene} {trail.conversation}:"
                f" “{trail.text[:60]}” (delivered {trail.deliveries}x)"
            )
            if trail.decision:
                out.append(f"  decision: {trail.decision['verdict']} ({trail.decision['reason']})")
            for intent in trail.intents:
                out.append(f"  intent {intent['kind']} [{intent['key']}]: “{intent['text'][:60]}”")
                for attempt in intent["attempts"]:
                    out.append(f"    attempt via {attempt['channel']}: {attempt['outcome']}")
            for receipt in trail.receipts:
                reason = f" ({receipt['reason']})" if receipt.get("reason") else ""
                tried = receipt["evidence"].get("channels_tried") or []
                via = f" via {' -> '.join(tried)}" if tried else ""
                out.append(f"  receipt {receipt['kind']}: {receipt['status']}{reason}{via}")
            if trail.run_state:
                out.append(f"  run: {trail.run_state}")
        for task in self.tasks:
            proof = f"; proven by {', '.join(task['evidence'])}" if task["evidence"] else ""
            out.append(
                f"task “{task['goal']}” in {task['scope_id']}: {task['status']}"
                f" (revision {task['revision']}{proof})"
            )
        for message in self.platform:
            target = message.get("conversation_id") or ",".join(message.get("user_ids") or [])
            at = f" @{','.join(message['at_user_ids'])}" if message.get("at_user_ids") else ""
            out.append(
                f"platform got via {message['channel']} to {target}{at}: “{message['text'][:80]}”"
            )
        return out


def _host_only(url: str | None) -> str | None:
    return urlsplit(url).netloc if url else None


def collect_transcript(
    store: Records, platform: list[dict[str, Any]], faults: list[dict[str, Any]] | None = None
) -> Transcript:
    decisions = {d.event_id: d for d in store.events.decisions()}
    trails: list[EventTrail] = []
    for event in store.events.all():
        decision = decisions.get(event.event_id)
        run = store.events.get_run(event.event_id)
        trail = EventTrail(
            msg=event.event_id,
            actor=event.actor.user_id,
            conversation=event.conversation.id,
            scene=event.conversation.type.value,
            text=event.text,
            deliveries=store.events.deliveries(event.event_id),
            decision=(
                {
                    "verdict": decision.verdict.value,
                    "reason": decision.reason.value,
                    "checked": decision.checked,
                }
                if decision
                else None
            ),
            run_state=run.state.value if run else None,
        )
        for intent in store.actions.intents(event.event_id):
            trail.intents.append(
                {
                    "kind": intent.kind.value,
                    "key": intent.idempotency_key,
                    "text": intent.content.text if intent.content else "",
                    "target": intent.target.conversation_id,
                    "webhook_host": _host_only(
                        intent.target.session_webhook.url if intent.target.session_webhook else None
                    ),
                    "attempts": [
                        {
                            "channel": a.channel.value,
                            "outcome": a.outcome.value,
                            "evidence": a.evidence.to_dict() if a.evidence else {},
                        }
                        for a in store.actions.attempts(intent.intent_id)
                    ],
                }
            )
        for receipt in store.actions.receipts(event.event_id):
            trail.receipts.append(
                {
                    "kind": receipt.kind.value if receipt.kind else None,
                    "status": receipt.status.value,
                    "reason": receipt.reason,
                    "evidence": receipt.evidence.to_dict(),
                    "skill_snapshot": receipt.skill_snapshot,
                    "gate_version": receipt.gate_version,
                }
            )
        trails.append(trail)
    quarantine = [
        {"reason": q["reason"], "error": q["error"], "raw": q["raw"][:200]}
        for q in store.events.quarantined()
    ]
    tasks = [task.model_dump(mode="json") for task in store.context.tasks()]
    return Transcript(trails, platform, quarantine, list(faults or []), tasks)
