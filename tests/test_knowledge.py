"""DingTalk knowledge: snapshots kept with provenance (changed, unchanged, withdrawn, a
source that fails keeps its last good snapshot), the store family on both engines, an
asker's read right asked once and kept while the doc stands still, and where a source may
be served."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.clock import VirtualClock
from agent.config.parts import KnowledgeSource
from agent.contracts import Actor, Conversation, ConversationType, Event, Robot
from agent.dingtalk.knowledge_api import (
    DocBlock,
    DocNode,
    KnowledgeError,
    TableRecord,
    blocks_to_sections,
)
from agent.knowledge.rights import ReadRights
from agent.knowledge.sections import as_section, fits, snapshot_sections
from agent.knowledge.sync import KnowledgeSync

T0 = 1_767_225_600.0


def _node(node_id: str, name: str, modified: float, kind: str = "doc") -> DocNode:
    return DocNode(
        node_id=node_id, name=name, kind=kind, url=f"https://alidocs.example/{node_id}",
        modified_at=modified, workspace_id="ws", parent_id=None, has_children=False,
    )  # fmt: skip


@dataclass
class Wire:
    """A knowledge base as the sync sees it; ``fail`` raises on the next listing."""

    nodes: dict[str, DocNode] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    fail: str | None = None
    reads: int = 0

    async def workspace_nodes(self, workspace_id: str, operator: str) -> list[DocNode]:
        if self.fail:
            raise KnowledgeError(self.fail, "no")  # type: ignore[arg-type]
        return list(self.nodes.values())

    async def node(self, node_id: str, operator: str) -> DocNode:
        if node_id not in self.nodes:
            raise KnowledgeError("not_found", node_id)
        return self.nodes[node_id]

    async def blocks(self, doc_id: str, operator: str) -> list[DocBlock]:
        self.reads += 1
        heading, text = self.texts[doc_id].split("|")
        return [DocBlock("heading", heading, 1), DocBlock("paragraph", text)]

    async def table_sheets(self, base_id: str, operator: str) -> list[tuple[str, str]]:
        return [("s1", "台账")]

    async def table_records(self, base_id: str, sheet: str, operator: str) -> list[TableRecord]:
        return [TableRecord("r1", {"设备": "投影仪", "位置": "三楼", "价格": "5200"}, T0)]


def _sync(store: Any, wire: Wire, clock: VirtualClock, **source: Any) -> KnowledgeSync:
    return KnowledgeSync(
        store=store, clock=clock, client=wire, sources=[KnowledgeSource(**source)],
        reader="union-reader", to_sections=blocks_to_sections,
    )  # fmt: skip


async def test_a_doc_is_read_again_only_when_it_moved_and_withdrawn_when_gone(store) -> None:
    clock = VirtualClock(T0)
    wire = Wire({"d1": _node("d1", "差旅制度", T0)}, {"d1": "住宿标准|每晚 600 元"})
    sync = _sync(store, wire, clock, wiki="ws")
    [state] = await sync.sync()
    assert (state.docs, state.problem, state.last_ok_at) == (1, None, T0)
    [(doc, section)] = store.knowledge.sections()
    assert (doc.title, doc.url, doc.modified_at) == ("差旅制度", "https://alidocs.example/d1", T0)
    assert section.path[-1] == "住宿标准" and "600" in section.text
    clock.advance_to(T0 + 600)
    await sync.sync()
    assert wire.reads == 1, "unchanged modified time: not read again"
    wire.nodes["d1"] = _node("d1", "差旅制度", T0 + 500)
    wire.texts["d1"] = "住宿标准|每晚 650 元"
    before = store.knowledge.signature()
    await sync.sync()
    assert "650" in store.knowledge.sections()[0][1].text and store.knowledge.signature() != before
    del wire.nodes["d1"]
    await sync.sync()
    assert store.knowledge.sections() == []
    assert store.knowledge.doc("wiki:ws", "d1").reason == "gone from its source"


async def test_a_source_that_fails_keeps_its_last_good_snapshot(store) -> None:
    clock = VirtualClock(T0)
    wire = Wire({"d1": _node("d1", "差旅制度", T0)}, {"d1": "住宿标准|每晚 600 元"})
    sync = _sync(store, wire, clock, wiki="ws")
    await sync.sync()
    clock.advance_to(T0 + 600)
    wire.fail = "throttled"
    [state] = await sync.sync()
    assert state.problem is not None and "throttled" in state.problem
    assert state.last_ok_at == T0 and state.docs == 1
    assert len(store.knowledge.sections()) == 1  # still served


async def test_a_single_doc_deleted_is_withdrawn_and_a_table_is_its_records(store) -> None:
    clock = VirtualClock(T0)
    wire = Wire({"d1": _node("d1", "公告", T0)}, {"d1": "标题|内容"})
    sync = _sync(store, wire, clock, doc="d1")
    await sync.sync()
    del wire.nodes["d1"]
    await sync.sync()
    assert store.knowledge.doc("doc:d1", "d1").reason == "deleted"
    table = _sync(store, Wire({"b1": _node("b1", "设备台账", T0, "table")}), clock, table="b1",
                  fields=["设备", "位置"])  # fmt: skip
    await table.sync()
    [(doc, record)] = store.knowledge.sections()
    assert doc.kind == "table" and record.path == ["台账", "投影仪"]
    assert "三楼" in record.text and "5200" not in record.text  # only the chosen fields
    section = as_section(doc, record)
    assert section.doc is not None and section.doc.as_of == T0 and section.heading == "投影仪"


async def test_snapshot_sections_are_read_again_only_when_the_signature_moves(store) -> None:
    clock = VirtualClock(T0)
    wire = Wire({"d1": _node("d1", "差旅制度", T0)}, {"d1": "住宿标准|每晚 600 元"})
    await _sync(store, wire, clock, wiki="ws").sync()
    read = snapshot_sections(store)
    first, sections = read()
    assert [s.heading for s in sections] == ["住宿标准"] and sections[0].trail == ("差旅制度",)
    assert read()[0] == first


class Probe:
    def __init__(self, answers: list[bool | Exception]) -> None:
        self.answers, self.asked = answers, 0

    async def can_read(self, doc_id: str, operator: str) -> bool:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def _union(user_id: str) -> str:
    return f"union-{user_id}"


async def test_a_read_right_is_asked_once_and_kept_while_the_doc_stands_still(store) -> None:
    clock = VirtualClock(T0)
    probe = Probe([True, False, KnowledgeError("throttled", "429")])
    rights = ReadRights(store=store, clock=clock, client=probe, union_id=_union, ttl_s=300)
    assert await rights.may_read("u1", "d1", T0) is True
    assert await rights.may_read("u1", "d1", T0) is True and probe.asked == 1  # kept
    assert await rights.may_read("u1", "d1", T0 + 1) is False  # the doc moved: asked again
    clock.advance_to(T0 + 301)
    assert await rights.may_read("u1", "d1", T0 + 1) is None  # could not ask: not a "no"


def _event(kind: ConversationType, cid: str = "g1") -> Event:
    return Event(
        event_id="m1", conversation=Conversation(id=cid, type=kind), actor=Actor(user_id="u1"),
        robot=Robot(code="r"), msgtype="text", text="?", created_at=T0, received_at=T0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("scope", "dm", "in_g1", "in_g2"),
    [(None, True, False, False), ("dm", True, False, False), ("groups", False, True, True),
     (["g1"], False, True, False)],
)  # fmt: skip
def test_where_a_source_may_be_served(scope: Any, dm: bool, in_g1: bool, in_g2: bool) -> None:
    source = KnowledgeSource(wiki="ws", scope=scope)
    assert fits(source, _event(ConversationType.DM, "cid-dm")) is dm
    assert fits(source, _event(ConversationType.GROUP, "g1")) is in_g1
    assert fits(source, _event(ConversationType.GROUP, "g2")) is in_g2
    assert fits(None, _event(ConversationType.DM)) is False  # no longer configured


def test_a_source_names_one_target_and_needs_a_reader() -> None:
    from agent.config import Settings

    with pytest.raises(ValueError, match="exactly one"):
        KnowledgeSource(wiki="ws", doc="d1")
    with pytest.raises(ValueError, match="reader"):
        Settings(client_id="a", client_secret="b", knowledge_sources=[{"wiki": "ws"}])
    sources = [{"wiki": "ws", "reader": "x"}]
    ok = Settings(client_id="a", client_secret="b", knowledge_sources=sources)
    assert ok.knowledge_sources[0].key == "wiki:ws"


def test_doc_sections_are_found_among_the_folders() -> None:
    """The labelled doc set (lab/retrieval/docs/docs_set.json, written without the
    retriever) through the wire's parser and the sync's sections, ranked with the knowledge
    folder's: BM25 over bigrams keeps recall@3 at or above 0.85 (0.905 on 2026-12-07), and
    every label names a section the sync makes."""
    import json

    from lab import retrieval_docs

    docs_set = json.loads(retrieval_docs.DOCS_SET.read_text(encoding="utf-8"))
    keys = {
        (s.source, s.heading)
        for s in map(retrieval_docs.keyed, retrieval_docs.sections_of(docs_set))
    }
    for question in retrieval_docs.questions_of(docs_set):
        for wanted in question["expect"]:
            assert (wanted["file"], wanted["section"]) in keys, question
    figures = {f.retriever: f for f in retrieval_docs.run()}
    bm25 = figures["bm25-bigram"]
    assert bm25.answerable >= 40 and bm25.unanswerable >= 8
    assert bm25.recall_at_3 >= 0.85


async def test_dta_knowledge_status_names_each_source_its_problem_and_its_docs(store) -> None:
    import io

    from agent.cli.knowledge import status
    from agent.config import Settings

    clock = VirtualClock(T0)
    wire = Wire({"d1": _node("d1", "差旅制度", T0)}, {"d1": "住宿标准|每晚 600 元"})
    sync = _sync(store, wire, clock, wiki="ws")
    await sync.sync()
    settings = Settings(
        client_id="a",
        client_secret="b",
        knowledge_reader="r",
        knowledge_sources=[{"wiki": "ws"}, {"doc": "never"}],
    )
    out = io.StringIO()
    assert status(store, settings, out) == 0
    text = out.getvalue()
    assert "wiki:ws  1 doc(s)  last good sync 2026-01-01 08:00:00 +08:00" in text
    assert "d1  《差旅制度》 (doc) as of 2026-01-01 08:00:00 +08:00" in text
    assert "doc:never  not synced yet" in text
    wire.fail = "unavailable"
    await sync.sync()
    out = io.StringIO()
    assert status(store, settings, out) == 1 and "PROBLEM: unavailable" in out.getvalue()


async def test_a_tables_records_share_one_probe_and_a_failed_probe_is_not_a_no() -> None:
    from agent.contracts import Grounding, KnowledgeItem
    from agent.run.grounding import readable_only

    class Rights:
        def __init__(self, answer: bool | None) -> None:
            self.answer, self.asked = answer, []

        async def may_read(self, user_id: str, doc_id: str, modified_at: float | None):
            self.asked.append((doc_id, modified_at))
            return self.answer

    def item(n: int, as_of: float) -> KnowledgeItem:
        return KnowledgeItem(
            ref=f"dingtalk:base#{n}", kind="dingtalk", content=f"record {n}", sha256="x",
            doc_id="base", as_of_epoch=as_of,
        )  # fmt: skip

    grounding = Grounding(source="knowledge_dir", query="q", items=[item(1, T0), item(2, T0 + 5)])
    dm = _event(ConversationType.DM, "cid-dm")
    rights = Rights(False)
    denied = await readable_only(grounding, dm, rights)
    assert rights.asked == [("base", T0 + 5)]  # one probe, with the table's newest time
    assert (denied.items, denied.unreadable, denied.unchecked) == ([], 1, 0)
    unchecked = await readable_only(grounding, dm, Rights(None))
    assert (unchecked.items, unchecked.unreadable, unchecked.unchecked) == ([], 0, 1)
    kept = await readable_only(grounding, dm, Rights(True))
    assert len(kept.items) == 2
