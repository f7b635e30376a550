"""A small, deterministic search over a folder of Markdown notes.

The rules provider answers FAQ-style questions from the team's own notes. It must work
offline, for Chinese without a word segmenter, and give the same answer for the same
files every time, so scoring is plain term overlap: Chinese character bigrams (plus
single characters at a low weight) and ASCII words, with the section heading counting
more than its body. A match is only used when it covers enough of the question;
otherwise the caller says it does not know.

Files are parsed once and re-parsed only when a file is added, removed or its mtime or
size changes, because the search runs for every message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

MIN_COVERAGE = 0.5  # share of the question's weighted terms a section must contain ...
MIN_BODY_COVERAGE = 0.75  # ... or this share, when no heading above the text matches
HEADING_BONUS = 0.5  # extra weight for terms that appear in the section's own heading
MAX_CONTENT_CHARS = 1200

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+")
# Removed (longest first) from both questions and notes: they can neither match nor dilute.
_CJK_STOPWORD_TEXT = """
请问 什么时候 什么 怎么 怎样 如何 为什么 哪些 哪里 哪个 哪天 哪儿 几点 何时 时候 多少
可以 能否 是否 需要 告诉 知道 一下 我们 你们 他们 这个 那个 一个 有没有 是不是
吗 呢 吧 啊 呀 嘛 么 的 了 是 我 你
"""
_CJK_STOPWORDS = sorted(_CJK_STOPWORD_TEXT.split(), key=len, reverse=True)
_CJK_STOP = re.compile("|".join(map(re.escape, _CJK_STOPWORDS)))
_ASCII_STOPWORD_TEXT = """
a an the is are was were be do does did how what which who where when why can could
i me my we our you your it its to of in on for and or with please tell about there this that
"""
_ASCII_STOPWORDS = frozenset(_ASCII_STOPWORD_TEXT.split())
BIGRAM_WEIGHT = 1.0
UNIGRAM_WEIGHT = 0.3
WORD_WEIGHT = 1.0


def terms(text: str) -> dict[str, float]:
    """Weighted search terms of a text: CJK bigrams and characters, and ASCII words."""
    found: dict[str, float] = {}
    lowered = text.lower()
    for run in _CJK_RUN.findall(_CJK_STOP.sub(" ", lowered)):
        for index in range(len(run) - 1):
            found[run[index : index + 2]] = BIGRAM_WEIGHT
        for char in run:
            found.setdefault(char, UNIGRAM_WEIGHT)
    for word in _WORD.findall(lowered):
        if word in _ASCII_STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]  # crude plural folding: "refunds" finds "refund"
        found[word] = WORD_WEIGHT
    return found


@dataclass(frozen=True)
class Section:
    """A heading and the text under it, up to the next heading of the same or higher level."""

    source: str  # path relative to the knowledge folder, e.g. "hr/leave.md"
    heading: str
    level: int  # 0 for the text before a file's first heading
    content: str
    heading_terms: frozenset[str]  # the section's own heading
    title_terms: frozenset[str]  # own heading, enclosing headings and the file name
    all_terms: frozenset[str]


@dataclass(frozen=True)
class Match:
    section: Section
    score: float
    coverage: float


def parse_sections(source: str, text: str) -> list[Section]:
    """Split Markdown into sections; headings inside fenced code blocks are ignored."""
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []  # (line index, level, title)
    fenced = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            headings.append((index, len(match.group(1)), match.group(2).strip()))

    title = Path(source).stem
    sections: list[Section] = []
    first = headings[0][0] if headings else len(lines)
    _add(sections, source, title, 0, lines[:first], [title])
    trail: list[tuple[int, str]] = []  # enclosing headings, for context terms
    for position, (start, level, heading) in enumerate(headings):
        end = len(lines)
        for later_start, later_level, _ in headings[position + 1 :]:
            if later_level <= level:
                end = later_start
                break
        trail = [(lvl, h) for lvl, h in trail if lvl < level]
        context = [title, *(h for _, h in trail)]
        _add(sections, source, heading, level, lines[start + 1 : end], context, heading)
        trail.append((level, heading))
    return sections


def _add(
    sections: list[Section],
    source: str,
    heading: str,
    level: int,
    body_lines: list[str],
    context: list[str],
    own_heading: str = "",
) -> None:
    content = "\n".join(body_lines).strip()
    if not content:
        return
    heading_terms = frozenset(terms(own_heading))
    title_terms = heading_terms | frozenset(terms(" ".join(context)))
    all_terms = title_terms | frozenset(terms(content))
    sections.append(Section(source, heading, level, content, heading_terms, title_terms, all_terms))


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


def excerpt(content: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """Trim long content at a line break so a reply stays readable."""
    if len(content) <= limit:
        return content
    cut = content.rfind("\n", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return content[:cut].rstrip() + "\n……"


class KnowledgeBase:
    """The Markdown files under one folder (recursively), parsed once and cached."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._sections: list[Section] = []
        self._file_count = 0

    @property
    def configured(self) -> bool:
        return self.root is not None

    def _files(self) -> list[Path]:
        root = self.root
        if root is None or not root.is_dir():
            return []
        return sorted(
            p
            for p in root.rglob("*.md")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
        )

    def refresh(self) -> None:
        """Re-parse only if the set of files or any mtime/size changed since last time."""
        stats: list[tuple[Path, int, int]] = []
        for path in self._files():
            try:
                stat = path.stat()
            except OSError:  # removed between listing and stat: treat as absent
                continue
            stats.append((path, stat.st_mtime_ns, stat.st_size))
        signature = tuple((p.as_posix(), mtime, size) for p, mtime, size in stats)
        if signature == self._signature:
            return
        sections: list[Section] = []
        count = 0
        for path, _, _ in stats:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            count += 1
            source = path.relative_to(self.root).as_posix() if self.root else path.name
            sections.extend(parse_sections(source, text))
        self._signature, self._sections, self._file_count = signature, sections, count

    @property
    def file_count(self) -> int:
        self.refresh()
        return self._file_count

    @property
    def sections(self) -> list[Section]:
        self.refresh()
        return list(self._sections)

    def search(self, question: str) -> Match | None:
        self.refresh()
        return best_match(question, self._sections)
