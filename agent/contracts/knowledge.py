"""Knowledge snapshotted from DingTalk: a doc (or an AI table) of a source as the store keeps
it, with its provenance, its sections, and each source's state (``agent/knowledge/``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.contracts.base import Contract


class SnapshotDoc(Contract):
    source: str  # the source's key: "doc:<id>", "wiki:<workspace>", "table:<base>"
    doc_id: str
    kind: Literal["doc", "table"]
    title: str
    url: str | None = None
    modified_at: float | None = None  # as DingTalk says; the sections' "as of"
    content_hash: str
    fetched_at: float
    changed_at: float  # when this row last changed (its content, or its withdrawal)
    status: Literal["active", "withdrawn"] = "active"
    reason: str | None = None  # why withdrawn: deleted, no longer readable, gone from its source


class SnapshotSection(Contract):
    path: list[str] = Field(default_factory=list)  # headings (a table: its sheet and record)
    text: str
    modified_at: float | None = None  # a table record's own; a doc's sections share the doc's


class SourceState(Contract):
    source: str
    last_ok_at: float | None = None
    last_attempt_at: float
    problem: str | None = None  # the last sync's, when it failed (the last good snapshot stays)
    docs: int = 0
