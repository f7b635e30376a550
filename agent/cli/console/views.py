"""What the console's pages show, read from the store: plain data for the templates.

Each page is built from the same traces ``dta trace`` prints (``agent/cli/trace.py``), so the
console and the command line can never disagree about a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.cli.trace import Trace, inspector, trace_message, when
from agent.contracts import MemoryStatus
from storage import Store
from storage.inspect import FILTERS

THREAD_LIMIT = 100


@dataclass(frozen=True)
class Selection:
    """What the operator asked to see: a conversation, or a filter across all of them."""

    conversation: str | None = None
    only: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.only is not None and self.only not in FILTERS:
            raise ValueError(f"unknown filter {self.only!r}")


def badge(status: str) -> str:
    """The CSS class of a status or verdict: green, amber, red or grey at a glance."""
    if status in ("accepted", "verified", "engage", "answered"):
        return "ok"
    if status in ("uncertain", "refused", "waiting"):
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
    }


def overview(store: Store, selection: Selection) -> dict[str, Any]:
    """The threads page: conversations, the filters with counts, and the messages shown."""
    records = inspector(store)
    conversations = [
        {
            "id": c.conversation_id,
            "messages": c.messages,
            "senders": c.senders,
            "last": when(c.last_received_at),
        }
        for c in records.conversations()
    ]
    current = selection.conversation
    if current is None and selection.only is None and conversations:
        current = conversations[0]["id"]
    events = records.find_events(
        conversation=current if selection.only is None else None,
        only=selection.only,
        reason=selection.reason,
        limit=THREAD_LIMIT,
    )
    messages = [message_view(trace_message(store, e.event_id)) for e in reversed(events)]
    filters = [
        {"only": "silent", "reason": reason, "label": f"silent: {reason}", "count": count}
        for reason, count in records.silence_reasons().items()
    ]
    for name in ("failed", "uncertain", "refused"):
        count = len(records.find_events(only=name, limit=1000))
        filters.append({"only": name, "reason": None, "label": name, "count": count})
    return {
        "conversations": conversations,
        "current": current,
        "selection": selection,
        "filters": filters,
        "messages": messages,
        "pending_memory": len(store.memory_candidates(MemoryStatus.PROPOSED.value)),
    }


def memory_queue(store: Store) -> dict[str, Any]:
    """The review queue: proposals first, then what was decided, newest last."""
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
        for c in store.memory_candidates()
    ]
    candidates.sort(key=lambda c: c["status"] != MemoryStatus.PROPOSED.value)
    return {"candidates": candidates}


def approvals_list(store: Store) -> dict[str, Any]:
    """Every approval of an act, pending first, with its snapshot (read-only here: only the
    asker decides, on the card or with the code)."""
    approvals = [
        {
            "id": a.approval_id,
            "status": a.status.value,
            "tool": a.tool,
            "msg": a.event_id,
            "authorizer": a.authorization.authorizer,
            "action": a.authorization.action,
            "object": a.authorization.object,
            "audience": a.authorization.audience,
            "impact": a.authorization.impact,
            "reversible": a.authorization.reversible,
            "arguments": a.arguments,
            "hash": a.authorization.arguments_hash[:16],
            "asked": when(a.created_at),
            "expires": when(a.expires_at),
            "decided_by": a.decided_by,
            "decided": when(a.decided_at),
            "clicks": store.clicks(a.approval_id),
        }
        for a in store.approvals()
    ]
    approvals.sort(key=lambda a: a["status"] != "pending")
    return {"approvals": approvals}
