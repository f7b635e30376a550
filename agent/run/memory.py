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
import re
import tempfile
import time
import uuid
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
            asks_to_supersede=proposal.asks_to_supersede or None,
            taught_by=run.origin.user_id,
            proposed_by_run=run.run_id,
            created_at=now,
            updated_at=now,
            skill_snapshot=run.skill_snapshot.digest,
            skills=[f"{s.name}@{s.version}" for s in run.skill_snapshot.skills],
        )
        for proposal in request.memory_candidates
    ]


def file_hash(path: Path) -> str:
    data = path.read_bytes() if path.exists() else b""
    return hashlib.sha256(data).hexdigest()[:16]


def marker(candidate: MemoryCandidate) -> str:
    """The line that starts a published block: which candidate, and the conversation it
    was learned in (the knowledge search serves it there only)."""
    return f"<!-- dta:memory {candidate.candidate_id} scope={candidate.scope_id} -->"


def holds(text: str, candidate: MemoryCandidate) -> bool:
    """Does a file already hold this candidate's block (any marker version)?"""
    return f"<!-- dta:memory {candidate.candidate_id} " in text


def block(candidate: MemoryCandidate) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime(candidate.updated_at))
    sources = ", ".join(candidate.source_refs)
    return (
        f"\n{marker(candidate)}\n## {candidate.title}\n\n{candidate.content}\n\n"
        f"_source: {sources} · scope {candidate.scope_id} · {candidate.kind} · "
        f"confidence {candidate.confidence:g} · approved {when}"
        f"{f' · skills {candidate.skill_snapshot}' if candidate.skill_snapshot else ''}_\n"
    )


def _find(store: Store, candidate_id: str) -> MemoryCandidate | None:
    return next(
        (c for c in store.context.memory_candidates() if c.candidate_id == candidate_id), None
    )


def review(store: Store, candidate_id: str, revision: int, approve: bool, out: TextIO) -> int:
    candidate = _find(store, candidate_id)
    if candidate is None:
        print(f"no candidate {candidate_id}", file=out)
        return 1
    if candidate.status is not MemoryStatus.PROPOSED:
        print(f"{candidate_id} is already {candidate.status.value}", file=out)
        return 1
    status = MemoryStatus.APPROVED if approve else MemoryStatus.REJECTED
    update = {"status": status, "revision": revision + 1, "updated_at": time.time()}
    if approve and candidate.asks_to_supersede:
        # Approved: what it asked to withdraw (others' memories) is withdrawn from now on.
        asked = [i for i in candidate.asks_to_supersede if i not in candidate.supersedes]
        update |= {"supersedes": [*candidate.supersedes, *asked], "asks_to_supersede": None}
    moved = candidate.model_copy(update=update)
    if revision != candidate.revision or not store.context.save_memory(moved):
        print(
            f"{candidate_id} moved: it is at revision {candidate.revision}, "
            f"you reviewed {revision}",
            file=out,
        )
        return 1
    print(f"{candidate_id}: {status.value} (revision {moved.revision})", file=out)
    return 0


PUBLISH_LEASE_S = 60.0  # one publisher per file, from its hash check to the read-back


def published_text(candidate: MemoryCandidate, text: str) -> str | None:
    """The file's text once ``candidate`` is published, or None when nothing changes: a
    memory's block is appended; a tombstone removes the blocks of what it supersedes."""
    if candidate.kind != "tombstone":
        return None if holds(text, candidate) else text + block(candidate)
    kept = text
    for superseded in candidate.supersedes:
        kept = re.sub(
            rf"\n?<!-- dta:memory {re.escape(superseded)}[ >][^\n]*\n.*?\n_source:[^\n]*_\n",
            "",
            kept,
            flags=re.DOTALL,
        )
    return None if kept == text else kept


def _replace_file(target: Path, new_text: str) -> bool:
    """Atomically replace ``target`` and read it back: True when it holds ``new_text``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=target.parent, delete=False, suffix=".tmp"
    ) as tmp:
        tmp.write(new_text)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, target)
    return target.read_text(encoding="utf-8") == new_text


def publish(
    store: Store, candidate_id: str, target: Path, expect_hash: str | None, out: TextIO
) -> int:
    candidate = _find(store, candidate_id)
    if candidate is None or candidate.status is not MemoryStatus.APPROVED:
        state = candidate.status.value if candidate else "unknown"
        print(f"only approved candidates are published ({candidate_id} is {state})", file=out)
        return 1
    # A lease on the file in the store: two reviewers (or a console on another replica)
    # publishing to one file at once would each pass the hash check and lose an edit.
    key, owner = f"publish:{target.resolve()}", f"publisher-{uuid.uuid4().hex[:12]}"
    if expect_hash is not None and not store.context.take_lease(key, owner, PUBLISH_LEASE_S):
        print(f"someone else is publishing to {target} right now; try again shortly", file=out)
        return 1
    try:
        return _publish_held(store, candidate, target, expect_hash, out)
    finally:
        if expect_hash is not None:
            store.work.release_thread(key, owner)


def _publish_held(
    store: Store, candidate: MemoryCandidate, target: Path, expect_hash: str | None, out: TextIO
) -> int:
    current = file_hash(target)
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    new_text = published_text(candidate, text)
    if new_text is None and candidate.kind != "tombstone":
        print(f"{target} already holds {candidate.candidate_id}; nothing to do", file=out)
        return 0
    if expect_hash is None:
        what = "removed" if candidate.kind == "tombstone" else "appended"
        print(f"dry run: {target} has hash {current}; this would be {what}:", file=out)
        print(block(candidate) if what == "appended" else candidate.content, file=out)
        print(f"publish with --expect-hash {current}", file=out)
        return 0
    if expect_hash != current:
        print(f"{target} changed (hash {current}, expected {expect_hash}); look again", file=out)
        return 1
    if new_text is not None and not _replace_file(target, new_text):
        print(f"read-back of {target} did not match; candidate left approved", file=out)
        return 1
    published = candidate.model_copy(
        update={
            "status": MemoryStatus.PUBLISHED,
            "revision": candidate.revision + 1,
            "updated_at": time.time(),
        }
    )
    if not store.context.save_memory(published):
        print(f"{candidate.candidate_id} moved during publishing; check {target}", file=out)
        return 1
    print(f"{candidate.candidate_id}: published to {target} (hash {file_hash(target)})", file=out)
    return 0


def list_candidates(store: Store, status: str | None, out: TextIO) -> int:
    candidates = store.context.memory_candidates(status)
    if not candidates:
        print("nothing to review", file=out)
    for c in candidates:
        print(
            f"{c.candidate_id}  {c.status.value:<9} rev {c.revision}  [{c.scope_id}] "
            f"{c.title}\n    {c.content}\n    from {', '.join(c.source_refs)}"
            + (f"\n    supersedes {', '.join(c.supersedes)}" if c.supersedes else "")
            + (
                f"\n    asks to supersede {', '.join(c.asks_to_supersede)} (still in use;"
                " approving withdraws them)"
                if c.asks_to_supersede
                else ""
            )
            + (
                f"\n    learned under skills {', '.join(c.skills)} ({c.skill_snapshot})"
                if c.skill_snapshot
                else ""
            ),
            file=out,
        )
    return 0
