"""``dta feedback export | case``: answers' 👍 / 👎 for review, and a 👎 turned into a case.

``export`` writes one JSON line per rating (one per person and answer, their latest press)
with what a reviewer needs beside it: the question, the sources the answer was given (the
knowledge items' refs, the tools it called), the answer as delivered, who rated and why.

``case MSG`` drafts a lab case (``dta.lab.case/1``) from a 👎 on the answer to message
``MSG`` (or the run id): the question as a ``send`` step, the reason and the answer in its
``description``, and an ``expect`` the operator must write — its ``TODO`` key makes the
file invalid until they do, so a draft never passes by accident.
"""

from __future__ import annotations

import json
import re
from typing import IO, Any

from agent.cli.trace import when
from agent.contracts import ActionKind, ConversationType, Event, Run
from storage import Store
from storage.feedback import Rated

SCHEMA = "dta.feedback/1"
ANSWER_KINDS = (ActionKind.REPLY, ActionKind.ASK)
TODO = (
    "DRAFT: write what the answer must (not) say here, e.g."
    ' {"platform": {"messages": [{"contains": ["…"], "not_contains": ["…"]}]}}'
)


def answer_text(store: Store, event_id: str) -> str:
    """What the run said, as its intents hold it (a card's its final text)."""
    texts = [
        intent.content.text
        for intent in store.actions.intents(event_id)
        if intent.kind in ANSWER_KINDS and intent.content is not None and intent.content.text
    ]
    return "\n\n".join(texts)


def sources_of(run: Run | None) -> list[str]:
    """The knowledge items the answer was given, then the tools it called."""
    if run is None:
        return []
    refs = [str(ref) for ref in run.evidence.get("sources", [])]
    calls = run.evidence.get("tool_calls", [])
    return refs + [f"tool:{call.get('tool')}" for call in calls if isinstance(call, dict)]


def export_line(store: Store, rated: Rated, timezone: str) -> dict[str, Any]:
    event = store.events.get_event(rated.event_id)
    run = store.events.get_run(rated.event_id)
    return {
        "schema": SCHEMA,
        "msg": rated.event_id,
        "run_id": rated.run_id,
        "by": rated.user_id,
        "rating": rated.rating,
        "reason": rated.reason,
        "at": when(rated.at, timezone),
        "conversation": rated.conversation_id,
        "provider": (run.answered_by or run.provider) if run is not None else None,
        "skills": [s.name for s in run.skill_snapshot.skills] if run is not None else [],
        "question": event.text if event is not None else None,
        "sources": sources_of(run),
        "answer": answer_text(store, rated.event_id),
    }


def export(store: Store, out: IO[str], since: float | None, timezone: str) -> int:
    """Every rating since ``since`` as JSON lines; how many were written."""
    rated = store.feedback.since(since)
    for item in rated:
        out.write(json.dumps(export_line(store, item, timezone), ensure_ascii=False) + "\n")
    return len(rated)


def _event_of(store: Store, key: str) -> Event | None:
    """The message ``key`` names: its msgId, or the id of its run."""
    event_id = store.feedback.event_named(key)
    return store.events.get_event(event_id) if event_id is not None else None


def draft_case(store: Store, key: str, timezone: str) -> dict[str, Any] | str:
    """The case draft from the 👎 on ``key``'s answer, or why there is none."""
    event = _event_of(store, key)
    if event is None:
        return f"no stored message or run {key!r}"
    downs = [r for r in store.feedback.of_event(event.event_id) if r.rating == "down"]
    if not downs:
        return f"no 👎 on the answer to {event.event_id}: a case is drafted from a 👎"
    run = store.events.get_run(event.event_id)
    said = "; ".join(
        f"{r.user_id} at {when(r.at, timezone)}: {r.reason or '(no reason given)'}" for r in downs
    )
    provider = run.provider if run is not None else "rules"
    send: dict[str, Any] = {"msg": "m1", "from": event.actor.user_id, "text": event.text}
    if event.conversation.type is ConversationType.GROUP:
        send |= {"group": event.conversation.id, "at_bot": True}
    description = (
        f"DRAFT from 👎 on {event.event_id} (run {run.run_id if run else '?'}, provider"
        f" {provider}). 👎 {said}. The answer was: {answer_text(store, event.event_id)[:600]}"
    )
    if provider != "rules":
        description += " — script the model (fixtures.model_script) or use --against-model."
    slug = re.sub(r"[^a-z0-9]+", "-", event.event_id.lower()).strip("-")[:40] or "message"
    return {
        "schema": "dta.lab.case/1",
        "id": f"draft-from-feedback-{slug}",
        "category": "conversation-contract",
        "title": f"DRAFT: {event.text[:80]}",
        "description": description,
        "tags": ["draft", "feedback"],
        "config": {"provider": provider} if provider == "rules" else {},
        "steps": [{"at": 0, "send": send}],
        "expect": {"TODO": TODO},
    }
