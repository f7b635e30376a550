"""``python -m lab.retrieval_recall``: how well each retriever finds the answering section.

Runs every question of ``lab/retrieval/questions.json`` against the knowledge folder beside
it with each retriever and reports, per retriever: recall@1 and recall@3 over the
answerable questions (a question counts when any section labelled as answering it is among
the first k hits), the mean reciprocal rank, how many hits an answerable question gets on
average, and over the unanswerable ones the share left with no hit at all (``abstained``:
a model handed nothing is told so and can say it does not know).

``rules`` is the rules provider's own single best section (its stricter cut-offs), for
comparison. ``--json`` prints the figures as JSON; ``--misses`` lists what BM25 missed;
``--questions lab/retrieval/heldout.json`` measures on the held-out set instead (written
from the folder alone, never used to choose or tune a retriever: the figure to quote).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skills.retrieval import Bm25Index, Hit
from skills.retrieval.folder import KnowledgeBase
from skills.retrieval.sections import Section
from skills.retrieval.strict import best_match
from skills.retrieval.trigram import TrigramIndex

HERE = Path(__file__).parent / "retrieval"
KNOWLEDGE = HERE / "knowledge"
QUESTIONS = HERE / "questions.json"

Search = Callable[[str], Sequence[Hit]]


@dataclass(frozen=True)
class Figures:
    retriever: str
    answerable: int
    unanswerable: int
    recall_at_1: float
    recall_at_3: float
    mrr: float
    mean_hits: float
    abstained: float  # share of unanswerable questions given no hit


def _wanted(question: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["file"], e["section"]) for e in question["expect"]}


def _key(section: Section) -> tuple[str, str]:
    return section.source, section.heading if section.level else ""


def measure(name: str, search: Search, questions: Sequence[dict[str, Any]]) -> Figures:
    answerable = [q for q in questions if q["expect"]]
    unanswerable = [q for q in questions if not q["expect"]]
    at1 = at3 = 0
    reciprocal = 0.0
    hits_total = 0
    for q in answerable:
        ranked = [_key(h.section) for h in search(q["question"])]
        hits_total += len(ranked)
        found = [i for i, key in enumerate(ranked) if key in _wanted(q)]
        if found:
            at1 += found[0] == 0
            at3 += found[0] < 3
            reciprocal += 1 / (found[0] + 1)
    abstained = sum(1 for q in unanswerable if not search(q["question"]))
    n = max(len(answerable), 1)
    return Figures(
        name,
        len(answerable),
        len(unanswerable),
        round(at1 / n, 3),
        round(at3 / n, 3),
        round(reciprocal / n, 3),
        round(hits_total / n, 2),
        round(abstained / max(len(unanswerable), 1), 3),
    )


def retrievers(sections: Sequence[Section]) -> dict[str, Search]:
    bm25 = Bm25Index(sections)
    trigram = TrigramIndex(sections)

    def rules(question: str) -> list[Hit]:
        match = best_match(question, sections)
        return [Hit(match.section, match.score, match.coverage)] if match else []

    return {"bm25-bigram": bm25.search, "fts5-trigram": trigram.search, "rules": rules}


def load(questions_path: Path = QUESTIONS) -> list[dict[str, Any]]:
    """The questions of a labelled set, in the tuning set's shape. The held-out set
    (``heldout.json``: ``answers`` as ``file#heading``) is read into the same shape."""
    data = json.loads(questions_path.read_text(encoding="utf-8"))
    if isinstance(data, list):
        return data
    questions = []
    for number, item in enumerate(data["questions"], 1):
        expect = []
        for answer in item["answers"]:
            file, _, section = answer.partition("#")
            expect.append({"file": file, "section": section})
        questions.append(
            {
                "id": f"h{number:03d}",
                "question": item["question"],
                "expect": expect,
                "style": item.get("style", ""),
            }
        )
    return questions


def run(knowledge: Path = KNOWLEDGE, questions_path: Path = QUESTIONS) -> list[Figures]:
    sections = KnowledgeBase(knowledge).sections
    questions = load(questions_path)
    return [measure(name, s, questions) for name, s in retrievers(sections).items()]


def misses(knowledge: Path = KNOWLEDGE, questions_path: Path = QUESTIONS) -> list[str]:
    index = Bm25Index(KnowledgeBase(knowledge).sections)
    lines = []
    for q in load(questions_path):
        got = [_key(h.section) for h in index.search(q["question"])]
        if (q["expect"] and not _wanted(q).intersection(got)) or (not q["expect"] and got):
            lines.append(f"{q['id']} {q['question']!r}: wanted {sorted(_wanted(q))}, got {got}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.retrieval_recall")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument(
        "--questions",
        type=Path,
        default=QUESTIONS,
        help="a labelled set (default: the tuning set; lab/retrieval/heldout.json was never"
        " used to choose or tune a retriever)",
    )
    args = parser.parse_args(argv)
    figures = run(questions_path=args.questions)
    if args.json:
        print(json.dumps([asdict(f) for f in figures], ensure_ascii=False, indent=2))
    else:
        print(f"{'retriever':<14} {'R@1':>6} {'R@3':>6} {'MRR':>6} {'hits':>5} {'abstain':>8}")
        for f in figures:
            print(
                f"{f.retriever:<14} {f.recall_at_1:>6.3f} {f.recall_at_3:>6.3f} {f.mrr:>6.3f}"
                f" {f.mean_hits:>5.2f} {f.abstained:>8.3f}"
            )
        print(f"({figures[0].answerable} answerable, {figures[0].unanswerable} unanswerable)")
    if args.misses:
        print("\n".join(misses(questions_path=args.questions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
