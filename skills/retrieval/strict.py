"""The rules provider's search: the one section that covers enough of the question.

Scoring is plain term overlap with the section heading counting more than its body. A
match is only used when it covers enough of the question; otherwise the caller says it
does not know. (Models get ranked, possibly several, sections: ``bm25``.)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from skills.retrieval.sections import Section
from skills.retrieval.terms import UNIGRAM_WEIGHT, terms

MIN_COVERAGE = 0.5  # share of the question's weighted terms a section must contain ...
MIN_BODY_COVERAGE = 0.75  # ... or this share, when no heading above the text matches
HEADING_BONUS = 0.5  # extra weight for terms that appear in the section's own heading


@dataclass(frozen=True)
class Match:
    section: Section
    score: float
    coverage: float


def best_match(question: str, sections: Iterable[Section]) -> Match | None:
    """The best section for a question, or None when nothing covers enough of it.

    A section must contain at least one bigram or word of the question (single Chinese
    characters alone are too common to count as evidence), and cover MIN_COVERAGE of the
    question if one of those hits is in a heading above the text, else MIN_BODY_COVERAGE:
    a couple of words that merely occur somewhere in a paragraph are weak evidence. Ties
    go to the deeper, shorter section, which is the more specific answer; then to file and
    heading order.
    """
    wanted = terms(question)
    total = sum(wanted.values())
    if total == 0:
        return None
    best: Match | None = None
    best_key: tuple[float, int, int] | None = None
    for section in sections:
        matched = [t for t in wanted if t in section.all_terms]
        strong = [t for t in matched if wanted[t] > UNIGRAM_WEIGHT]
        if not strong:
            continue
        coverage = sum(wanted[t] for t in matched) / total
        titled = any(t in section.title_terms for t in strong)
        if coverage < (MIN_COVERAGE if titled else MIN_BODY_COVERAGE):
            continue
        in_heading = sum(wanted[t] for t in matched if t in section.heading_terms) / total
        score = coverage + HEADING_BONUS * in_heading
        key = (round(score, 9), section.level, -len(section.content))
        if best_key is None or key > best_key:
            best, best_key = Match(section, score, coverage), key
    return best
