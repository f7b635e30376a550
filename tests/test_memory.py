"""Memory candidates: proposed once per scope and content; reviewed by revision; published
to Markdown only with the expected hash, atomically."""

import io

from agent.contracts import MemoryCandidate, MemoryStatus
from agent.run.memory import file_hash, list_candidates, publish, review
from tests.factories import T0


def candidate(content="周五例会在 301", scope="cid-1", run="run_1") -> MemoryCandidate:
    return MemoryCandidate(
        candidate_id=MemoryCandidate.id_for(scope, content),
        kind="semantic",
        scope_id=scope,
        title=content[:10],
        content=content,
        source_refs=["msg:m1"],
        confidence=0.6,
        proposed_by_run=run,
        created_at=T0,
        updated_at=T0,
    )


def test_same_scope_and_content_is_one_candidate(store):
    assert store.context.propose_memory([candidate()]) == 1
    assert store.context.propose_memory([candidate(run="run_2")]) == 0  # a replay, a repeat
    assert store.context.propose_memory([candidate(scope="cid-2")]) == 1  # another conversation
    assert len(store.context.memory_candidates()) == 2


def test_review_is_compare_and_set(store):
    store.context.propose_memory([candidate()])
    cid = candidate().candidate_id
    out = io.StringIO()
    assert review(store, cid, revision=5, approve=True, out=out) == 1
    assert "revision 1" in out.getvalue()
    assert review(store, cid, revision=1, approve=True, out=io.StringIO()) == 0
    assert store.context.memory_candidates("approved")[0].revision == 2
    assert review(store, cid, revision=2, approve=False, out=io.StringIO()) == 1  # not proposed


def test_publish_needs_approval_then_the_expected_hash(store, tmp_path):
    store.context.propose_memory([candidate()])
    cid = candidate().candidate_id
    target = tmp_path / "MEMORY.md"
    target.write_text("# Team memory\n", encoding="utf-8")
    assert publish(store, cid, target, None, io.StringIO()) == 1  # not approved yet
    review(store, cid, 1, True, io.StringIO())
    dry = io.StringIO()
    assert publish(store, cid, target, None, dry) == 0
    before = file_hash(target)
    assert before in dry.getvalue() and target.read_text() == "# Team memory\n"
    target.write_text("# Team memory\nedited meanwhile\n", encoding="utf-8")
    assert publish(store, cid, target, before, io.StringIO()) == 1  # changed under us
    now = file_hash(target)
    assert publish(store, cid, target, now, io.StringIO()) == 0
    text = target.read_text()
    assert "edited meanwhile" in text and "周五例会在 301" in text and cid in text
    assert store.context.memory_candidates()[0].status is MemoryStatus.PUBLISHED
    assert publish(store, cid, target, file_hash(target), io.StringIO()) == 1  # not approved


def test_list_says_when_there_is_nothing(store):
    out = io.StringIO()
    list_candidates(store, None, out)
    assert out.getvalue().strip() == "nothing to review"
