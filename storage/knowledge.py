"""Knowledge snapshots from DingTalk (migration 19): each source's docs with provenance and
their sections, each source's last sync, and askers' rights to read a doc.

A doc's sections are replaced with its row in one transaction, so retrieval never sees half
of an edit; a withdrawn doc keeps its row (with the reason) and loses its sections. Every
such change moves one generation counter in its own transaction: the index over the
sections is rebuilt when it moves (``signature``).
"""

from __future__ import annotations

import json
from typing import Any

from agent.contracts.knowledge import SnapshotDoc, SnapshotSection, SourceState
from storage.base import Family

_DOC = (
    "source, doc_id, kind, title, url, modified_at, content_hash, fetched_at, changed_at,"
    " status, reason"
)


def _doc(row: tuple) -> SnapshotDoc:
    keys = [k.strip() for k in _DOC.split(",")]
    return SnapshotDoc.model_validate(dict(zip(keys, row, strict=True)))


def _moved(conn: Any) -> None:
    conn.execute("UPDATE knowledge_generation SET generation = generation + 1 WHERE one = 1")


class KnowledgeRecords(Family):
    def replace_doc(self, doc: SnapshotDoc, sections: list[SnapshotSection]) -> None:
        """The doc as read now, its sections in place of the old ones: all or nothing."""
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM knowledge_sections WHERE source = ? AND doc_id = ?",
                (doc.source, doc.doc_id),
            )
            conn.execute(
                "DELETE FROM knowledge_docs WHERE source = ? AND doc_id = ?",
                (doc.source, doc.doc_id),
            )
            conn.execute(
                f"INSERT INTO knowledge_docs ({_DOC}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (doc.source, doc.doc_id, doc.kind, doc.title, doc.url, doc.modified_at,
                 doc.content_hash, doc.fetched_at, doc.changed_at, doc.status, doc.reason),
            )  # fmt: skip
            _moved(conn)
            for position, section in enumerate(sections):
                conn.execute(
                    "INSERT INTO knowledge_sections (source, doc_id, position, path, text,"
                    " modified_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (doc.source, doc.doc_id, position, json.dumps(section.path, ensure_ascii=False),
                     section.text, section.modified_at),
                )  # fmt: skip

    def fetched(self, source: str, doc_id: str, at: float) -> None:
        """Read again and unchanged: only when it was last looked at moves."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE knowledge_docs SET fetched_at = ? WHERE source = ? AND doc_id = ?",
                (at, source, doc_id),
            )

    def withdraw(self, source: str, doc_id: str, reason: str, at: float) -> bool:
        """No longer served (deleted, unreadable, gone from its source); False if it was not."""
        with self._tx() as conn:
            cursor = conn.execute(
                "UPDATE knowledge_docs SET status = 'withdrawn', reason = ?, changed_at = ?"
                " WHERE source = ? AND doc_id = ? AND status = 'active'",
                (reason, at, source, doc_id),
            )
            conn.execute(
                "DELETE FROM knowledge_sections WHERE source = ? AND doc_id = ?",
                (source, doc_id),
            )
            if cursor.rowcount == 1:
                _moved(conn)
            return cursor.rowcount == 1

    def doc(self, source: str, doc_id: str) -> SnapshotDoc | None:
        row = self.db.conn.execute(
            f"SELECT {_DOC} FROM knowledge_docs WHERE source = ? AND doc_id = ?",
            (source, doc_id),
        ).fetchone()
        return _doc(row) if row else None

    def docs(self, source: str | None = None) -> list[SnapshotDoc]:
        sql, params = f"SELECT {_DOC} FROM knowledge_docs", ()
        if source is not None:
            sql, params = sql + " WHERE source = ?", (source,)
        rows = self.db.conn.execute(sql + " ORDER BY source, title, doc_id", params).fetchall()
        return [_doc(row) for row in rows]

    def sections(self) -> list[tuple[SnapshotDoc, SnapshotSection]]:
        """Every active doc's sections, in order: what retrieval indexes."""
        docs = {(d.source, d.doc_id): d for d in self.docs() if d.status == "active"}
        rows = self.db.conn.execute(
            "SELECT source, doc_id, path, text, modified_at FROM knowledge_sections"
            " ORDER BY source, doc_id, position"
        ).fetchall()
        out = []
        for source, doc_id, path, text, modified_at in rows:
            doc = docs.get((source, doc_id))
            if doc is not None:
                section = SnapshotSection(path=json.loads(path), text=text, modified_at=modified_at)
                out.append((doc, section))
        return out

    def signature(self) -> int:
        """Moves whenever a doc's sections or status change (in the same transaction, so
        on every replica and whatever the clocks say): the index's cue to rebuild."""
        return int(self._scalar("SELECT generation FROM knowledge_generation WHERE one = 1"))

    # ------------------------------------------------------------------ sources

    def source_synced(self, state: SourceState) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM knowledge_sources WHERE source = ?", (state.source,))
            conn.execute(
                "INSERT INTO knowledge_sources (source, last_ok_at, last_attempt_at, problem,"
                " docs) VALUES (?, ?, ?, ?, ?)",
                (state.source, state.last_ok_at, state.last_attempt_at, state.problem, state.docs),
            )

    def source_states(self) -> list[SourceState]:
        rows = self.db.conn.execute(
            "SELECT source, last_ok_at, last_attempt_at, problem, docs FROM knowledge_sources"
            " ORDER BY source"
        ).fetchall()
        keys = ("source", "last_ok_at", "last_attempt_at", "problem", "docs")
        return [SourceState.model_validate(dict(zip(keys, row, strict=True))) for row in rows]

    # ------------------------------------------------------------------ who may read

    def read_right(self, union_id: str, doc_id: str) -> tuple[bool, float | None, float] | None:
        """(allowed, the doc's modified time then, when asked), as DingTalk last said."""
        row = self.db.conn.execute(
            "SELECT allowed, modified_at, checked_at FROM knowledge_reads"
            " WHERE union_id = ? AND doc_id = ?",
            (union_id, doc_id),
        ).fetchone()
        return (bool(row[0]), row[1], float(row[2])) if row else None

    def remember_read_right(
        self, union_id: str, doc_id: str, allowed: bool, modified_at: float | None, at: float
    ) -> None:
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM knowledge_reads WHERE union_id = ? AND doc_id = ?",
                (union_id, doc_id),
            )
            conn.execute(
                "INSERT INTO knowledge_reads (union_id, doc_id, modified_at, allowed, checked_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (union_id, doc_id, modified_at, int(allowed), at),
            )
