"""The console's knowledge page: each DingTalk source (a knowledge base, a doc, an AI table)
with its last good sync and its problem, and its docs with their as-of times, links and
whether they are served or withdrawn (and why) — what ``dta knowledge status`` prints."""

from __future__ import annotations

from typing import Any

from agent.cli.trace import DEFAULT_TIMEZONE, clock
from agent.config import Settings
from storage import Store


def knowledge_list(store: Store, settings: Settings | None = None) -> dict[str, Any]:
    zone = settings.timezone if settings is not None else DEFAULT_TIMEZONE
    when = clock(zone)
    configured = {s.key: s for s in settings.knowledge_sources} if settings else {}
    sources = []
    for state in store.knowledge.source_states():
        source = configured.get(state.source)
        scope = source.scope if source is not None else None
        docs = [
            {
                "id": d.doc_id,
                "title": d.title,
                "kind": d.kind,
                "link": d.url,
                "as_of": when(d.modified_at) or "-",
                "fetched": when(d.fetched_at),
                "status": d.status,
                "reason": d.reason,
            }
            for d in store.knowledge.docs(state.source)
        ]
        sources.append(
            {
                "key": state.source,
                "name": source.name if source is not None and source.name else state.source,
                "scope": ", ".join(scope) if isinstance(scope, list) else (scope or "dm"),
                "configured": source is not None,
                "last_ok": when(state.last_ok_at) or "never",
                "last_attempt": when(state.last_attempt_at),
                "problem": state.problem,
                "docs": docs,
            }
        )
    return {"sources": sources, "timezone": zone}
