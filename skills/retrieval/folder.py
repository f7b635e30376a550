"""The knowledge folder: every Markdown file under it (recursively), parsed once.

Files are re-parsed only when a file is added, removed or its mtime or size changes —
checked at every search, so an edited note is used at the next message without a
restart — and the BM25 index is rebuilt from the new sections on the next retrieval.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path

from skills.retrieval.bm25 import Bm25Index, Hit
from skills.retrieval.sections import Section, parse_sections
from skills.retrieval.strict import Match, best_match

MAX_CONTENT_CHARS = 1200


def excerpt(content: str, limit: int = MAX_CONTENT_CHARS) -> str:
    """Trim long content at a line break so a reply stays readable."""
    if len(content) <= limit:
        return content
    cut = content.rfind("\n", 0, limit)
    cut = cut if cut > limit // 2 else limit
    return content[:cut].rstrip() + "\n……"


class KnowledgeBase:
    """The Markdown files under one folder (recursively), parsed once and cached."""

    def __init__(
        self,
        root: Path | None,
        extra: Callable[[], tuple[Hashable, list[Section]]] | None = None,
    ) -> None:
        self.root = root
        # Sections kept elsewhere (DingTalk docs snapshotted into the store), with a
        # signature that moves when they change: indexed beside the folder's.
        self.extra = extra
        self._extra_signature: Hashable = None
        self._extra: list[Section] = []
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._sections: list[Section] = []
        self._index: Bm25Index | None = None
        self._file_count = 0

    @property
    def configured(self) -> bool:
        return self.root is not None or self.extra is not None

    @property
    def doc_count(self) -> int:
        """The DingTalk docs and tables among the sections (snapshots)."""
        self.refresh()
        return len({(s.doc.source, s.doc.doc_id) for s in self._extra if s.doc is not None})

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
        """Re-parse only if the set of files or any mtime/size changed since last time (and
        take the snapshots again only when their signature moved)."""
        if self.extra is not None:
            signature, extra = self.extra()
            if signature != self._extra_signature:
                self._extra_signature, self._extra = signature, extra
                self._index = None
        self._refresh_folder()

    def _refresh_folder(self) -> None:
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
        self._index = None  # rebuilt on the next retrieval, from the new sections

    @property
    def file_count(self) -> int:
        self.refresh()
        return self._file_count

    @property
    def sections(self) -> list[Section]:
        self.refresh()
        return [*self._sections, *self._extra]

    def search(
        self, question: str, visible: Callable[[Section], bool] | None = None
    ) -> Match | None:
        """The rules provider's one best section (its stricter cut-offs), among the visible."""
        self.refresh()
        every = [*self._sections, *self._extra]
        sections = every if visible is None else filter(visible, every)
        return best_match(question, sections)

    def retrieve(
        self, question: str, k: int, visible: Callable[[Section], bool] | None = None
    ) -> list[Hit]:
        """Up to ``k`` matching sections for a model's grounding (BM25 over bigrams)."""
        self.refresh()
        if self._index is None:
            self._index = Bm25Index([*self._sections, *self._extra])
        return self._index.search(question, k, visible)
