"""Memory candidates: what runs propose (``candidates_from``), and ``dta memory`` — the
offline review and publishing of those proposals.

Runs only propose. A person lists the candidates, approves or rejects each by revision
(compare-and-set: if someone else moved it first, the step is refused), and publishes an
approved one into a local Markdown file. Publishing is two-step on purpose: without
``--expect-hash`` it shows the file's current hash and what would be appended; with it,
the file must still have that hash (nobody edited it meanwhile), the new content replaces
the file atomically and is read back before the candidate is marked published. Dedupe,
waits and receipts never go to Markdown — they stay in the store.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import TextIO

from agent.contracts import ActionRequest, MemoryCandidate, MemoryStatus, Run
from storage import Store


def candidates_from(run: Run, request: ActionRequest, now: float) -> list[MemoryCandidate]:
    """What an approved request proposed to remember, scoped to the run's conversation.

    The id is a hash of scope and content, so the same proposal from a replay or a repeat
    is the same candidate (the store keeps the first)."""
    scope = run.origin.conversation_id
    return [
        MemoryCandidate(
            candidate_id=MemoryCandidate.id_for(scope, proposal.content),
            kind=proposal.kind,
            scope_id=scope,
            title=proposal.title,
            content=proposal.content,
            source_refs=[f"msg:{run.event_id}", *proposal.source_refs],
            confidence=proposal.confidence,
            supersedes=proposal.supersedes,
            proposed_by_run=run.run_id,
            created_at=now,
            updated_at=now,
        )
        for proposal in request.memory_candidates
    ]


def file_hash(path: Path) -> str:
    data = path.read_bytes() if path.exists() else b""
    return hashlib.sha256(data).hexdigest()[:16]


def marker(candidate: MemoryCandidate) -> str:
    return f"<!-- dta:memory {candidate.candidate_id} -->"


def block(candidate: MemoryCandidate) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime(candidate.updated_at))
    sources = ", ".join(candidate.source_refs)
    return (
        f"\n{marker(candidate)}\n## {candidate.title}\n\n{candidate.content}\n\n"
        f"_source: {sources} · scope {candidate.scope_id} · {candidate.kind} · "
        f"confidence {candidate.confidence:g} · approved {when}_\n"
    )


def _find(store: Store, candidate_id: str) -> MemoryCandidate | None:
    return next((c for c in store.memory_candidates() if c.candidate_id == candidate_id), None)


def review(store: Store, candidate_id: str, revision: int, approve: bool, out: TextIO) -> int:
    candidate = _find(store, candidate_id)
    if candidate is None:
        print(f"no candidate {candidate_id}", file=out)
        return 1
    if candidate.status is not MemoryStatus.PROPOSED:
        print(f"{candidate_id} is already {candidate.status.value}", file=out)
        return 1
    status = MemoryStatus.APPROVED if approve else MemoryStatus.REJECTED
    moved = candidate.model_copy(
        update={"status": status, "revision": revision + 1, "updated_at": time.time()}
    )
    if revision != candidate.revision or not store.save_memory(moved):
        print(
            f"{candidate_id} moved: it is at revision {candidate.revision}, "
            f"you reviewed {revision}",
            file=out,
        )
        return 1
    print(f"{candidate_id}: {status.value} (revision {moved.revision})", file=out)
    return 0


def publish(
    store: Store, candidate_id: str, target: Path, expect_hash: str | None, out: TextIO
) -> int:
    candidate = _find(store, candidate_id)
    if candidate is None or candidate.status is not MemoryStatus.APPROVED:
        state = candidate.status.value if candidate else "unknown"
        print(f"only approved candidates are published ({candidate_id} is {state})", file=out)
        return 1
    current = file_hash(target)
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    if marker(candidate) in text:
        print(f"{target} already holds {candidate_id}; nothing to do", file=out)
        return 0
    if expect_hash is None:
        print(f"dry run: {target} has hash {current}; this would be appended:", file=out)
        print(block(candidate), file=out)
        print(f"publish with --expect-hash {current}", file=out)
        return 0
    if expect_hash != current:
        print(f"{target} changed (hash {current}, expected {expect_hash}); look again", file=out)
        return 1
    new_text = text + block(candidate)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=target.parent, delete=False, suffix=".tmp"
    ) as tmp:
        tmp.write(new_text)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, target)
    if target.read_text(encoding="utf-8") != new_text:
        print(f"read-back of {target} did not match; candidate left approved", file=out)
        return 1
    published = candidate.model_copy(
        update={
            "status": MemoryStatus.PUBLISHED,
            "revision": candidate.revision + 1,
            "updated_at": time.time(),
        }
    )
    if not store.save_memory(published):
        print(f"{candidate_id} moved during publishing; check {target}", file=out)
        return 1
    print(f"{candidate_id}: published to {target} (hash {file_hash(target)})", file=out)
    return 0


def list_candidates(store: Store, status: str | None, out: TextIO) -> int:
    candidates = store.memory_candidates(status)
    if not candidates:
        print("nothing to review", file=out)
    for c in candidates:
        print(
            f"{c.candidate_id}  {c.status.value:<9} rev {c.revision}  [{c.scope_id}] "
            f"{c.title}\n    {c.content}\n    from {', '.join(c.source_refs)}",
            file=out,
        )
    return 0
