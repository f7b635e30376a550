"""What the console's pages show, read from the store: plain data for the templates.

Each page is built from the same traces ``dta trace`` prints (``agent/cli/trace.py``), so the
console and the command line can never disagree about a message. Every time is shown in the
team's zone (``timezone`` in the configuration: ``2026-01-01 08:00:00 +08:00``), and an
act's outcome in the one vocabulary (agent/acts/told.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.acts.shown import person_names, readable
from agent.cli.trace import DEFAULT_TIMEZONE, Trace, clock, trace_message
from agent.cli.trace_acts import approval_act, named
from agent.contracts import MemoryStatus
from agent.proactive.heartbeat import BEAT_CONVERSATION
from storage import Store
from storage.inspect import FILTERS

THREAD_LIMIT = 100
OWN_PREFIX = BEAT_CONVERSATION.split(":")[0] + ":"  # dta:…


@dataclass(frozen=True)
class Selection:
    """What the operator asked to see: a conversation, or a filter across all of them."""

    conversation: str | None = None
    only: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.only is not None and self.only not in FILTERS:
            raise ValueError(f"unknown filter {self.only!r}")


def is_own(conversation_id: str) -> bool:
    """The runtime's own "conversation" (``dta:heartbeat``), not a person's."""
    return conversation_id.startswith(OWN_PREFIX)


def badge(status: str) -> str:
    """The CSS class of a status or verdict: green, amber, red or grey at a glance."""
    if status in ("accepted", "verified", "engage", "answered"):
        return "ok"
    if status in ("uncertain", "refused", "waiting", "pending"):
        return "warn"
    if status in ("failed", "interrupted", "never_arrived"):
        return "bad"
    return "quiet"


def message_view(trace: Trace) -> dict[str, Any]:
    event = trace.event or {}
    return {
        "msg_id": trace.msg_id,
        "sender": event.get("sender"),
        "nick": event.get("nick"),
        "scene": event.get("scene"),
        "conversation": event.get("conversation"),
        "mentioned": event.get("mentioned"),
        "text": event.get("text", ""),
        "received_at": event.get("received_at"),
        "deliveries": len(trace.deliveries),
        "decision": trace.decision,
        "replies": [
            {
                "kind": i["kind"],
                "form": i.get("form") or "",  # "" for words; an act, a card … says so
                "text": i["text"],
                "outcomes": [a["outcome"] for a in i["attempts"]],
            }
            for i in trace.intents
        ],
        "receipts": trace.receipts,
        "refusals": trace.refusals,
        "tasks": trace.tasks,
        "memory": trace.memory,
        "cause": trace.cause.value,
        "summary": trace.summary,
        "run_state": trace.run["state"] if trace.run else None,
        # what the run's model spent (none for rules): tokens, and cost where priced
        "tokens": ((trace.run or {}).get("usage") or {}).get("total_tokens"),
        "cost": (trace.run or {}).get("model_cost"),
    }


def overview(
    store: Store, selection: Selection, timezone: str = DEFAULT_TIMEZONE
) -> dict[str, Any]:
    """The threads page: conversations, the filters with counts, and the messages shown."""
    when = clock(timezone)
    records = store.inspect
    everything = [
        {
            "id": c.conversation_id,
            "messages": c.messages,
            "senders": c.senders,
            "last": when(c.last_received_at),
        }
        for c in records.conversations()
    ]
    # people's conversations first; the runtime's own events (the heartbeat) apart
    conversations = [c for c in everything if not is_own(c["id"])]
    own = [c for c in everything if is_own(c["id"])]
    current = selection.conversation
    if current is None and selection.only is None and everything:
        current = (conversations or own)[0]["id"]
    events = records.find_events(
        conversation=current if selection.only is None else None,
        only=selection.only,
        reason=selection.reason,
        limit=THREAD_LIMIT,
    )
    messages = [message_view(trace_message(store, e.event_id, timezone)) for e in reversed(events)]
    filters = [
        {"only": "silent", "reason": reason, "label": f"silent: {reason}", "count": count}
        for reason, count in records.silence_reasons().items()
    ]
    for name in ("failed", "uncertain", "refused"):
        count = len(records.find_events(only=name, limit=1000))
        filters.append({"only": name, "reason": None, "label": name, "count": count})
    return {
        "conversations": conversations,
        "own": own,
        "current": current,
        "selection": selection,
        "filters": filters,
        "messages": messages,
        "pending_memory": len(store.context.memory_candidates(MemoryStatus.PROPOSED.value)),
    }


def memory_queue(store: Store, timezone: str = DEFAULT_TIMEZONE) -> dict[str, Any]:
    """The review queue: proposals first, then what was decided, newest last."""
    when = clock(timezone)
    candidates = [
        {
            "id": c.candidate_id,
            "status": c.status.value,
            "revision": c.revision,
            "scope": c.scope_id,
            "title": c.title,
            "content": c.content,
            "sources": c.source_refs,
            "confidence": c.confidence,
            "updated": when(c.updated_at),
        }
        for c in store.context.memory_candidates()
    ]
    candidates.sort(key=lambda c: c["status"] != MemoryStatus.PROPOSED.value)
    return {"candidates": candidates}


def approvals_list(store: Store, timezone: str = DEFAULT_TIMEZONE) -> dict[str, Any]:
    """Every approval of an act, pending first, with its snapshot and what became of its act
    (read-only here: only the asker decides, on the card or with the code). People by the
    names the directory gave (staff ids kept beside them), arguments as a person reads them."""
    when = clock(timezone)
    approvals = []
    for a in store.approvals.all():
        auth, names = a.authorization, a.names
        act = approval_act(store, a)
        approvals.append(
            {
                "id": a.approval_id,
                "status": a.status.value,
                "tool": a.tool,
                "msg": a.event_id,
                "authorizer": auth.authorizer,
                "authorizer_name": named(auth.authorizer, names),
                "action": auth.action,
                "object": auth.object,
                "audience": auth.audience,
                "audience_names": person_names(auth.audience, names, english=True),
                "impact": auth.impact,
                "reversible": auth.reversible,
                "arguments": readable(a.tool, a.arguments, names, timezone, a.english, auth.object),
                "hash": auth.arguments_hash[:16],
                "outcome": act.outcome.value,
                "outcome_words": act.words,
                "asked": when(a.created_at),
                "asked_with": a.asked_with,
                "expires": when(a.expires_at),
                "decided_by": a.decided_by,
                "decided_by_name": named(a.decided_by, names),
                "decided": when(a.decided_at),
                "clicks": [
                    {**c, "user_name": named(c["user_id"], names)}
                    for c in store.approvals.clicks(a.approval_id)
                ],
            }
        )
    approvals.sort(key=lambda a: a["status"] != "pending")
    return {"approvals": approvals, "timezone": timezone}
