"""``dta knowledge``: the DingTalk knowledge sources, their docs, as-of times and problems.

dta knowledge sync          read every configured source now (``knowledge_sources``) into
                            the store, and say what each gave (docs, or its problem)
dta knowledge status        each source: its last good sync, its problem if the last one
                            failed (its last good snapshot is still served), its docs with
                            their as-of times, withdrawn ones with why

Times in the team's zone (``timezone``).
"""

from __future__ import annotations

from typing import TextIO

from agent.cli.trace import DEFAULT_TIMEZONE, when
from agent.config import Settings
from agent.contracts.knowledge import SourceState
from storage import Store


def source_line(state: SourceState, timezone: str = DEFAULT_TIMEZONE) -> str:
    ok = when(state.last_ok_at, timezone) or "never"
    problem = ""
    if state.problem:
        problem = f"  PROBLEM: {state.problem} (its last good snapshot is served)"
    return f"{state.source}  {state.docs} doc(s)  last good sync {ok}{problem}"


def status(store: Store, settings: Settings, out: TextIO) -> int:
    zone = settings.timezone
    states = {s.source: s for s in store.knowledge.source_states()}
    if not settings.knowledge_sources:
        print("no knowledge_sources configured", file=out)
    for source in settings.knowledge_sources:
        state = states.get(source.key)
        scope = source.scope if source.scope is not None else "dm"
        if state is None:
            print(f"{source.key}  not synced yet  (scope {scope})", file=out)
            continue
        print(f"{source_line(state, zone)}  (scope {scope})", file=out)
        for doc in store.knowledge.docs(source.key):
            as_of = when(doc.modified_at, zone) or "-"
            gone = f"  withdrawn: {doc.reason}" if doc.status == "withdrawn" else ""
            print(f"  {doc.doc_id}  《{doc.title}》 ({doc.kind}) as of {as_of}{gone}", file=out)
    problems = [s for s in states.values() if s.problem]
    return 1 if problems else 0
