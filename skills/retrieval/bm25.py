"""BM25 over character bigrams: which knowledge sections answer a question, ranked.

Each section is one document. Its own heading counts ``HEADING_REPEAT`` times and the
enclosing headings and file name once, before the body, so a section titled 「病假」 beats a
paragraph that merely mentions sick leave. Query terms keep their weights from
``terms`` (a bigram or word 1.0, a lone Chinese character 0.3) times their inverse
document frequency.

A section is a hit only when it has real evidence: at least one bigram or word of the
question, ``MIN_COVERAGE`` of the question's terms by their own weights (not idf: in a
folder of three notes every absent word would weigh most), and a score of at least
``RELATIVE_CUTOFF`` of the best hit's. The cut-offs were set on the labelled questions in
``lab/retrieval/`` (``python -m lab.retrieval_recall``): stricter coverage costs recall
quickly (0.1 → 0.85 recall@3, 0.25 → 0.72) and buys little abstention, because a question
the notes do not answer still shares words with them (「公司有没有子女教育补贴」). Telling
those apart is the model's job, with the prompt's rule to answer only from what the items say.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skills.retrieval.sections import Section
from skills.retrieval.terms import UNIGRAM_WEIGHT, term_stream, terms

K1 = 1.2  # term-frequency saturation
B = 0.75  # length normalisation
HEADING_REPEAT = 2  # the section's own heading, as if written this many times
MIN_COVERAGE = 0.1
# 0.5 gave 2.03 items per answerable question for +0.012 recall@3; 0.7 gives 1.63
RELATIVE_CUTOFF = 0.7


@dataclass(frozen=True)
class Hit:
    section: Section
    score: float
    coverage: float  # share of the question's weighted terms the section holds


def _document(section: Section) -> Counter[str]:
    context = " ".join(section.trail)
    counts: Counter[str] = Counter(t for t, _ in term_stream(context))
    for _ in range(HEADING_REPEAT):
        counts.update(t for t, _ in term_stream(section.heading))
    counts.update(t for t, _ in term_stream(section.own))
    return counts


class Bm25Index:
    """An in-memory index of sections; build a new one when the sections change."""

    def __init__(self, sections: Sequence[Section]) -> None:
        # a heading with no text of its own (only subsections) is not a document
        self.sections = [s for s in sections if s.own]
        self._docs = [_document(s) for s in self.sections]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._docs else 0.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        self._df = frequency

    def idf(self, term: str) -> float:
        count = len(self._docs)
        df = self._df.get(term, 0)
        return math.log(1 + (count - df + 0.5) / (df + 0.5))

    def search(
        self, question: str, k: int = 3, visible: Callable[[Section], bool] | None = None
    ) -> list[Hit]:
        """Up to ``k`` sections that match, best first (fewer, or none, when fewer match);
        only ``visible`` ones are considered at all."""
        if not self._docs:  # nothing to search (no knowledge folder): the question unread
            return []
        weights = terms(question)
        wanted = {t: w * self.idf(t) for t, w in weights.items()}
        total = sum(weights.values())
        if total == 0:
            return []
        strong = {t for t, w in weights.items() if w > UNIGRAM_WEIGHT}
        hits: list[Hit] = []
        for section, doc, length in zip(self.sections, self._docs, self._lengths, strict=True):
            if visible is not None and not visible(section):
                continue
            matched = [t for t in wanted if t in doc]
            if not strong.intersection(matched):
                continue
            coverage = sum(weights[t] for t in matched) / total
            if coverage < MIN_COVERAGE:
                continue
            norm = K1 * (1 - B + B * length / self._average)
            score = sum(wanted[t] * doc[t] * (K1 + 1) / (doc[t] + norm) for t in matched)
            hits.append(Hit(section, score, coverage))
        if not hits:
            return []
        hits.sort(key=lambda h: (-h.score, h.section.source, h.section.heading))
        best = hits[0].score
        return [h for h in hits if h.score >= RELATIVE_CUTOFF * best][:k]
