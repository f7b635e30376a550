"""``python -m lab.retrieval_docs``: how well retrieval finds DingTalk doc sections among
the knowledge folder's.

The labelled set ``lab/retrieval/docs/docs_set.json`` (docs in DingTalk's block form — tables,
long sections, headings as blocks —, AI tables, and questions labelled ``<doc id>#<heading>``
or ``<base id>#<first field>``; written from the docs alone, without the retriever) goes the
way a synced doc goes: its blocks through the wire's parser and ``blocks_to_sections``, a
table's records as the sync makes them, each section as the index reads it
(``agent/knowledge/sections.py``). They are ranked together with the knowledge folder of
``lab/retrieval/`` (its sections are distractors here), by the runtime's retriever (BM25
over bigrams) and, for comparison, the rules provider's single best section.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from agent.contracts.knowledge import SnapshotDoc, SnapshotSection
from agent.dingtalk.knowledge_records import blocks_to_sections, doc_block
from agent.knowledge.sections import as_section
from lab.fake.docs_state import wire_blocks
from lab.retrieval_recall import KNOWLEDGE, Figures, measure, retrievers
from skills.retrieval.folder import KnowledgeBase
from skills.retrieval.sections import Section

DOCS_SET = Path(__file__).parent / "retrieval" / "docs" / "docs_set.json"


def _doc_sections(doc: dict[str, Any]) -> list[Section]:
    blocks = [doc_block(b) for b in wire_blocks(doc["blocks"], doc["id"])]
    snapshot = SnapshotDoc(
        source="wiki:eval", doc_id=doc["id"], kind="doc", title=doc["title"],
        content_hash="-", fetched_at=0.0, changed_at=0.0,
    )  # fmt: skip
    return [
        as_section(snapshot, SnapshotSection(path=path, text=text))
        for path, text in blocks_to_sections(doc["title"], blocks)
    ]


def _table_sections(table: dict[str, Any]) -> list[Section]:
    snapshot = SnapshotDoc(
        source="table:eval", doc_id=table["id"], kind="table", title=table["name"],
        content_hash="-", fetched_at=0.0, changed_at=0.0,
    )  # fmt: skip
    sections = []
    for record in table["records"]:
        fields = record["fields"]
        first = str(next(iter(fields.values())))
        text = "；".join(f"{name}：{value}" for name, value in fields.items())
        record_section = SnapshotSection(path=[table["name"], first], text=text)
        sections.append(as_section(snapshot, record_section))
    return sections


def sections_of(docs_set: dict[str, Any]) -> list[Section]:
    made = [s for doc in docs_set["docs"] for s in _doc_sections(doc)]
    return made + [s for table in docs_set.get("tables", []) for s in _table_sections(table)]


def questions_of(docs_set: dict[str, Any]) -> list[dict[str, Any]]:
    """The set's questions in the shape ``lab.retrieval_recall.measure`` reads: a doc
    section's key is (doc id, heading), as ``_key`` makes it from its ``source``."""
    out = []
    for number, item in enumerate(docs_set["questions"], 1):
        expect = []
        for answer in item["answers"]:
            doc_id, _, heading = answer.partition("#")
            expect.append({"file": doc_id, "section": heading})
        out.append({"id": f"d{number:03d}", "question": item["question"], "expect": expect,
                    "style": item.get("style", "")})  # fmt: skip
    return out


def keyed(section: Section) -> Section:
    """A doc section under its doc's id (the folder's stay under their file)."""
    if section.doc is None:
        return section
    return replace(section, source=section.doc.doc_id, level=max(section.level, 1))


def run(path: Path = DOCS_SET) -> list[Figures]:
    docs_set = json.loads(path.read_text(encoding="utf-8"))
    sections = [keyed(s) for s in [*KnowledgeBase(KNOWLEDGE).sections, *sections_of(docs_set)]]
    questions = questions_of(docs_set)
    return [measure(name, search, questions) for name, search in retrievers(sections).items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.retrieval_docs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--set", type=Path, default=DOCS_SET)
    args = parser.parse_args(argv)
    figures = run(args.set)
    if args.json:
        print(json.dumps([asdict(f) for f in figures], ensure_ascii=False, indent=2))
        return 0
    print(f"{'retriever':<14} {'R@1':>6} {'R@3':>6} {'MRR':>6} {'hits':>5} {'abstain':>8}")
    for f in figures:
        print(
            f"{f.retriever:<14} {f.recall_at_1:>6.3f} {f.recall_at_3:>6.3f} {f.mrr:>6.3f}"
            f" {f.mean_hits:>5.2f} {f.abstained:>8.3f}"
        )
    print(f"({figures[0].answerable} answerable, {figures[0].unanswerable} unanswerable)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
