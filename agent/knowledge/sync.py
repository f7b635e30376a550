"""Snapshots of the configured DingTalk sources, taken with the source's reader.

``KnowledgeSync.sync`` reads each source through the OpenAPI (``KnowledgeClient``: the
transport's host checks, retries and throttling) and keeps what it read in the store with
its provenance:

- a doc whose modified time is the one on record is only marked fetched; otherwise its
  blocks are read, made sections (headings, tables as rows) and, when their hash moved,
  replace the old ones in one transaction;
- an AI table's records are its sections (the configured fields as text, each record's
  modified time its own as-of);
- a doc deleted, no longer readable by the reader, or gone from its knowledge base is
  withdrawn (its row stays, with the reason; its sections go);
- a source that cannot be read now (throttled, unavailable, the reader lost access to the
  whole knowledge base) keeps its last good snapshot and is reported: its state's
  ``problem`` (``dta knowledge status``, ``dta doctor``, the console).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from typing import Any, Protocol

from agent.clock import Clock
from agent.config.parts import KnowledgeSource
from agent.contracts import canonical_json, sha256_text
from agent.contracts.knowledge import SnapshotDoc, SnapshotSection, SourceState
from storage import Store

log = logging.getLogger("dta.knowledge")
GONE = {"not_found": "deleted", "no_permission": "no longer readable by the reader"}


class KnowledgeReader(Protocol):
    """What sync needs of ``agent.dingtalk.knowledge_api.KnowledgeClient``."""

    async def workspace_nodes(self, workspace_id: str, operator: str) -> list[Any]: ...
    async def node(self, node_id: str, operator: str) -> Any: ...
    async def blocks(self, doc_id: str, operator: str) -> list[Any]: ...
    async def table_sheets(self, base_id: str, operator: str) -> list[tuple[str, str]]: ...
    async def table_records(self, base_id: str, sheet: str, operator: str) -> list[Any]: ...


def error_kind(exc: Exception) -> str | None:
    """A ``KnowledgeError``'s kind (matched by name: sync does not import the wire)."""
    return getattr(exc, "kind", None) if type(exc).__name__ == "KnowledgeError" else None


class KnowledgeSync:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        client: KnowledgeReader,
        sources: Sequence[KnowledgeSource],
        reader: str | None,
        to_sections: Any,  # blocks_to_sections(title, blocks) -> [(path, text)]
    ) -> None:
        self.store = store
        self.clock = clock
        self.client = client
        self.sources = list(sources)
        self.reader = reader
        self.to_sections = to_sections
        self.last: list[SourceState] = []  # the last sync's states (health reads them)

    async def sync(self) -> list[SourceState]:
        """Every source once; a source that fails never stops the others."""
        self.last = [await self.sync_source(source) for source in self.sources]
        return self.last

    async def sync_source(self, source: KnowledgeSource) -> SourceState:
        now = self.clock.now()
        reader = source.reader or self.reader or ""
        before = self.store.knowledge.source_states()
        last_ok = next((s.last_ok_at for s in before if s.source == source.key), None)
        try:
            nodes = await self._nodes(source, reader)
        except Exception as exc:
            kind = error_kind(exc)
            if kind is None:
                raise
            if source.kind in ("doc", "table") and kind in GONE:  # the one doc (table) is gone
                self.store.knowledge.withdraw(source.key, source.target, GONE[kind], now)
            return self._state(source, last_ok, now, str(exc))
        problems = []
        for node in nodes:
            try:
                await self._snapshot(source, node, reader, now)
            except Exception as exc:
                kind = error_kind(exc)
                if kind is None:
                    raise
                if kind in GONE:
                    self.store.knowledge.withdraw(source.key, node.node_id, GONE[kind], now)
                else:  # its last good snapshot stays
                    problems.append(f"{node.name}: {kind}")
        listed = {node.node_id for node in nodes}
        for doc in self.store.knowledge.docs(source.key):
            if doc.status == "active" and doc.doc_id not in listed:
                self.store.knowledge.withdraw(source.key, doc.doc_id, "gone from its source", now)
        problem = "; ".join(problems) or None
        return self._state(source, now if not problems else last_ok, now, problem)

    async def _nodes(self, source: KnowledgeSource, reader: str) -> list[Any]:
        if source.kind == "wiki":
            nodes = await self.client.workspace_nodes(source.target, reader)
            return [n for n in nodes if n.kind in ("doc", "table")]
        return [await self.client.node(source.target, reader)]

    async def _snapshot(self, source: KnowledgeSource, node: Any, reader: str, now: float) -> None:
        known = self.store.knowledge.doc(source.key, node.node_id)
        same_time = known is not None and known.modified_at == node.modified_at
        if same_time and known is not None and known.status == "active":
            self.store.knowledge.fetched(source.key, node.node_id, now)
            return
        if node.kind == "table" or source.kind == "table":
            sections = await self._records(source, node.node_id, reader)
            kind = "table"
        else:
            blocks = await self.client.blocks(node.node_id, reader)
            sections = [
                SnapshotSection(path=list(p), text=t)
                for p, t in self.to_sections(node.name, blocks)
            ]
            kind = "doc"
        content_hash = sha256_text(canonical_json([s.to_dict() for s in sections]))[:32]
        if known is not None and known.status == "active" and known.content_hash == content_hash:
            self.store.knowledge.fetched(source.key, node.node_id, now)
            return
        doc = SnapshotDoc(
            source=source.key, doc_id=node.node_id, kind=kind, title=node.name, url=node.url,
            modified_at=node.modified_at, content_hash=content_hash, fetched_at=now, changed_at=now,
        )  # fmt: skip
        self.store.knowledge.replace_doc(doc, sections)
        log.info(
            "knowledge doc snapshotted", extra={"doc": node.node_id, "sections": len(sections)}
        )

    async def _records(
        self, source: KnowledgeSource, base_id: str, reader: str
    ) -> list[SnapshotSection]:
        sections = []
        for sheet_id, sheet_name in await self.client.table_sheets(base_id, reader):
            for record in await self.client.table_records(base_id, sheet_id, reader):
                fields = {
                    k: v
                    for k, v in record.fields.items()
                    if not source.fields or k in source.fields
                }
                if not fields:
                    continue
                first = next(iter(fields.values()))
                text = "；".join(f"{name}：{_value(value)}" for name, value in fields.items())
                sections.append(
                    SnapshotSection(
                        path=[sheet_name, _value(first)], text=text, modified_at=record.modified_at
                    )
                )
        return sections

    def _state(
        self, source: KnowledgeSource, ok: float | None, now: float, problem: str | None
    ) -> SourceState:
        docs = sum(1 for d in self.store.knowledge.docs(source.key) if d.status == "active")
        state = SourceState(
            source=source.key, last_ok_at=ok, last_attempt_at=now, problem=problem, docs=docs
        )
        self.store.knowledge.source_synced(state)
        if problem:
            log.warning(
                "knowledge source kept its last snapshot",
                extra={"source": source.key, "problem": problem},
            )
        return state


def _value(value: Any) -> str:
    """An AI-table cell as text: a select's name, a list's items, a link's text."""
    if isinstance(value, dict):
        return str(value.get("name") or value.get("text") or value.get("value") or "")
    if isinstance(value, list):
        return "、".join(_value(v) for v in value)
    return "" if value is None else str(value)


async def sync_forever(sync: KnowledgeSync, clock: Clock, every_s: float) -> None:
    """The daemon's schedule: a sync at start, then every ``every_s`` with up to a tenth of
    it as jitter (replicas and restarts do not all ask DingTalk at the same second). A sync
    that fails is logged and met again at the next one; the last good snapshots stay."""
    while True:
        try:
            await sync.sync()
        except Exception:
            log.exception("knowledge sync failed")
        await clock.sleep(every_s + random.uniform(0, every_s / 10))
