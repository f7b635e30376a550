"""SQLite FTS5 with its trigram tokenizer: the measured alternative to ``bm25``.

The sections go into an in-memory FTS5 table (heading and body as two columns, the heading
weighted up in ``bm25()``); a question becomes an OR of its three-character pieces (after
the same stop words are removed), so 「差旅住宿标准」 finds 「国内差旅住宿标准」. Two-character
words — most of everyday Chinese (差旅, 病假, 工位) — have no trigram at all and cannot be
found alone, which is why the labelled set chose bigram BM25; this module stays so the
comparison can be run again (``python -m lab.retrieval_recall``).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from skills.retrieval.bm25 import RELATIVE_CUTOFF, Hit
from skills.retrieval.sections import Section
from skills.retrieval.terms import without_stopwords

HEADING_WEIGHT = 3.0
_PIECE = re.compile(r"[\w\u3400-\u9fff]{3,}")


def trigrams(question: str) -> list[str]:
    """The question's distinct three-character pieces, in order."""
    found: dict[str, None] = {}
    for run in _PIECE.findall(without_stopwords(question)):
        for index in range(len(run) - 2):
            found.setdefault(run[index : index + 3], None)
    return list(found)


class TrigramIndex:
    """The same interface as ``Bm25Index``, over SQLite FTS5 ``tokenize='trigram'``."""

    def __init__(self, sections: Sequence[Section]) -> None:
        self.sections = list(sections)
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE s USING fts5(heading, body, tokenize='trigram')")
        self._db.executemany(
            "INSERT INTO s(rowid, heading, body) VALUES (?, ?, ?)",
            [(i, " ".join((*s.trail, s.heading)), s.content) for i, s in enumerate(self.sections)],
        )

    def search(self, question: str, k: int = 3) -> list[Hit]:
        pieces = trigrams(question)
        if not pieces:
            return []
        query = " OR ".join('"' + p.replace('"', '""') + '"' for p in pieces)
        rows = self._db.execute(
            "SELECT rowid, -bm25(s, ?, 1.0) FROM s WHERE s MATCH ? ORDER BY bm25(s, ?, 1.0)"
            " LIMIT ?",
            (HEADING_WEIGHT, query, HEADING_WEIGHT, k),
        ).fetchall()
        if not rows:
            return []
        best = rows[0][1]
        return [
            Hit(self.sections[rowid], score, 1.0)
            for rowid, score in rows
            if score >= RELATIVE_CUTOFF * best
        ]
