"""Grounding: the knowledge sections and scoped memory a run is given, and only those."""

from __future__ import annotations

import os
from pathlib import Path

from agent.contracts import (
    Actor,
    Conversation,
    ConversationType,
    Event,
    MemoryCandidate,
    MemoryStatus,
    Robot,
)
from agent.run.grounding import Grounder, GroundingLimits
from agent.run.memory import block
from gates.claims import done_claim, unquoted
from lab import retrieval_recall
from skills.retrieval.bm25 import Bm25Index
from skills.retrieval.folder import KnowledgeBase
from skills.retrieval.sections import parse_sections
from storage import Store
from tests import factories

TRAVEL = """# 差旅制度

## 国内差旅住宿标准

一线城市每晚不超过 500 元，其他城市每晚不超过 350 元。

## 国际差旅住宿标准

欧美每晚不超过 180 美元，亚洲其他地区每晚不超过 120 美元。
"""


def _event(conversation: str, kind: ConversationType, text: str) -> Event:
    return Event(
        event_id=f"m-{conversation}",
        robot=Robot(code="bot"),
        conversation=Conversation(id=conversation, type=kind),
        actor=Actor(user_id="u1", nick="Ann"),
        text=text,
        created_at=1000.0,
        received_at=1000.0,
        msgtype="text",
        mentioned=kind is ConversationType.GROUP,
    )


def _memory(scope: str, content: str, **fields: object) -> MemoryCandidate:
    return factories.memory_candidate(content, scope, **fields)


def test_only_matching_sections_are_returned_never_padded(tmp_path: Path) -> None:
    (tmp_path / "travel.md").write_text(TRAVEL, encoding="utf-8")
    kb = KnowledgeBase(tmp_path)
    hits = kb.retrieve("去伦敦出差酒店一晚最多报多少，国际标准", 3)
    assert [h.section.heading for h in hits] == ["国际差旅住宿标准"]
    assert kb.retrieve("股票期权什么时候行权", 3) == []
    # a heading with only subsections is not a document of its own
    assert all(s.heading != "差旅制度" for s in Bm25Index(kb.sections).sections)


def test_an_edited_file_is_searched_at_the_next_message(tmp_path: Path) -> None:
    path = tmp_path / "travel.md"
    path.write_text(TRAVEL, encoding="utf-8")
    kb = KnowledgeBase(tmp_path)
    assert kb.retrieve("停车位怎么申请", 3) == []
    stat = path.stat()
    path.write_text(TRAVEL + "\n## 停车位申请\n\n在行政系统里申请停车位，每月 300 元。\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert [h.section.heading for h in kb.retrieve("停车位怎么申请", 3)] == ["停车位申请"]


def test_a_published_block_carries_its_scope(tmp_path: Path) -> None:
    memory = _memory("dm-1", "我的工位在 3 楼 A 区 12 号", title="工位")
    sections = parse_sections("memory.md", "# 记忆\n" + block(memory))
    published = next(s for s in sections if s.memory_id)
    assert published.memory_id == memory.candidate_id and published.scope == "dm-1"
    assert published.visible_in("dm-1") and not published.visible_in("group-1")
    assert not published.visible_in("dm-1", frozenset({memory.candidate_id}))
    # a block written before the marker held the scope: read from its footnote
    legacy = block(memory).replace(" scope=dm-1", "")
    old = next(s for s in parse_sections("m.md", legacy) if s.memory_id)
    assert old.scope == "dm-1"


def test_dm_memory_never_reaches_a_group_and_forgetting_withdraws_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "dta.db")
    grounder = Grounder(KnowledgeBase(None), store, GroundingLimits(3, 500), "小钉")
    fact = _memory(
        "dm-1", "我的工位在 3 楼 A 区 12 号", title="工位", status=MemoryStatus.PUBLISHED
    )
    store.context.propose_memory([fact])
    question = "我的工位在哪"
    dm = grounder.ground(_event("dm-1", ConversationType.DM, question), question, None)
    assert [i.ref for i in dm.items] == [f"memory:{fact.candidate_id}"]
    group = grounder.ground(_event("g-1", ConversationType.GROUP, question), question, None)
    assert group.items == [] and group.memories == 0
    assert group.missing  # no folder and nothing remembered there: said so
    tombstone = _memory("dm-1", "忘掉：工位", kind="tombstone", supersedes=[fact.candidate_id])
    store.context.propose_memory([tombstone])  # proposed, not yet reviewed: withdrawn at once
    after = grounder.ground(_event("dm-1", ConversationType.DM, question), question, None)
    assert after.items == [] and after.withdrawn == [fact.candidate_id]
    store.close()


def test_nothing_found_says_what_was_searched(tmp_path: Path) -> None:
    (tmp_path / "travel.md").write_text(TRAVEL, encoding="utf-8")
    store = Store(tmp_path / "dta.db")
    grounder = Grounder(KnowledgeBase(tmp_path), store, GroundingLimits(3, 500), "小钉")
    text = "@小钉 股票期权什么时候行权"
    found = grounder.ground(_event("dm-1", ConversationType.DM, text), text, None)
    assert found.items == [] and found.query == "股票期权什么时候行权"
    assert found.nothing_found is not None and "1 files (2 sections)" in found.nothing_found
    store.close()


def test_a_quote_of_the_sources_is_not_the_robots_claim() -> None:
    source = ("报销单提交以后，我们已通知财务审核。财务 5 个工作日内审核。",)
    quoted = "根据《finance/reimbursement.md》：报销单提交以后，我们已通知财务审核。"
    assert done_claim(quoted) is not None
    assert done_claim(unquoted(quoted, source)) is None
    own = "好的，已通知财务。"  # too short to be a quote, even though the source holds it
    marked = "根据通知：「已通知财务」。"  # a short piece in quotation marks is the source's
    assert done_claim(unquoted(marked, ("已通知财务",))) is None
    assert done_claim(unquoted(own, source)) is not None


def test_recall_on_the_labelled_set_stays_where_the_docs_say() -> None:
    """A quality floor, not a timing: the labelled questions docs/architecture.md quotes."""
    figures = {f.retriever: f for f in retrieval_recall.run()}
    bm25 = figures["bm25-bigram"]
    assert bm25.answerable >= 60 and bm25.unanswerable >= 10
    assert bm25.recall_at_3 >= 0.8
    assert bm25.recall_at_3 > figures["fts5-trigram"].recall_at_3


def test_every_label_names_a_real_section() -> None:
    sections = {
        (s.source, s.heading if s.level else "")
        for s in KnowledgeBase(retrieval_recall.KNOWLEDGE).sections
    }
    for question in retrieval_recall.load():
        for wanted in question["expect"]:
            assert (wanted["file"], wanted["section"]) in sections, question["id"]
