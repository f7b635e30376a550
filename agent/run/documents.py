"""The text of the PDF, Word and Excel files among a run's media, as sourced items.

After the media are fetched (``agent/run/media.py``, after the response gate: a silenced
message costs no download and no reading either), each fetched file whose bytes are a PDF,
a Word or an Excel package is read by ``agent/run/document_text.py`` in a worker thread —
never on the event loop — within ``document_text_chars`` characters and
``document_read_timeout_s`` seconds. The result is one ``DocumentText`` per file: its
pages, sheets or sections, each naming where it is, what was left out and why; or, when
nothing could be read (a scan, a password, broken bytes), the reason. Reading never fails
the run: whatever goes wrong is said on the item.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent.contracts import (
    DocumentPart,
    DocumentProblem,
    DocumentText,
    MediaItem,
    MediaStatus,
)
from agent.contracts.filetypes import DocumentFormat, document_format
from agent.run.document_text import Piece, ReadBounds, Reading, Unreadable, read_document

log = logging.getLogger("dta.documents")

# what the media fetcher's sniffing calls the containers a document can be in
_CONTAINERS = frozenset({"application/pdf", "application/zip", "application/x-ole-storage"})
# the thread is given this long past its own deadline (it checks the deadline between
# pages and rows) before the run stops waiting for it
GRACE_S = 1.0


@dataclass(frozen=True)
class DocumentLimits:
    text_chars: int  # of each file's text given to a provider
    timeout_s: float  # to read one file


@dataclass(frozen=True)
class _Failed:
    """Nothing could be read: why, and what the bytes showed the file to be (if known)."""

    problem: DocumentProblem
    why: str
    kind: DocumentFormat | None = None


def _read_file(path: Path, limits: DocumentLimits) -> Reading | _Failed | None:
    """In the worker thread: the file's reading, why it has none, or None (not a document)."""
    data = path.read_bytes()
    kind = document_format(data)
    if kind is None:
        return None
    bounds = ReadBounds(limits.text_chars, time.monotonic() + limits.timeout_s)
    try:
        return read_document(data, kind, bounds)
    except Unreadable as exc:
        return _Failed(exc.problem, exc.why, kind)


class DocumentReader:
    """Reads the documents among a run's fetched media, one at a time, off the event loop."""

    def __init__(self, limits: DocumentLimits) -> None:
        self.limits = limits

    async def read(self, media: list[MediaItem]) -> list[DocumentText]:
        documents = []
        for item in media:
            document = await self._one(item)
            if document is not None:
                documents.append(document)
        return documents

    async def _one(self, item: MediaItem) -> DocumentText | None:
        if item.status is not MediaStatus.FETCHED or not item.stored_at:
            return None
        if item.mime not in _CONTAINERS:
            return None
        wait = self.limits.timeout_s + GRACE_S
        try:
            found = await asyncio.wait_for(
                asyncio.to_thread(_read_file, Path(item.stored_at), self.limits), wait
            )
        except TimeoutError:
            found = _Failed(DocumentProblem.TIMEOUT, "reading the file took too long")
        except Exception as exc:  # a reader's bug must not take the run down
            error = type(exc).__name__
            log.warning("document not read", extra={"media_id": item.media_id, "error": error})
            found = _Failed(DocumentProblem.CORRUPT, f"the file could not be read ({error})")
        if found is None:
            return None
        document = _as_item(item, found)
        log.info(
            "document read",
            extra={
                "media_id": item.media_id,
                "format": document.format,
                "parts": len(document.parts),
                "chars": sum(len(part.text) for part in document.parts),
                "problem": str(document.problem) if document.problem else None,
            },
        )
        return document


def _name(item: MediaItem) -> str:
    return item.file_name or PurePosixPath(item.path or item.media_id).name


def _as_item(item: MediaItem, found: Reading | _Failed) -> DocumentText:
    """The reading as the invocation's item: parts named by file and place."""
    name = _name(item)
    common = {
        "source": f"media:{item.media_id}",
        "media_id": item.media_id,
        "file_name": name,
        "part_of": item.part_of,
    }
    if isinstance(found, _Failed):  # nothing read: the reason
        kind = found.kind or _kind(item)
        return DocumentText(**common, format=kind, problem=found.problem, missing=found.why)
    return DocumentText(
        **common,
        format=found.format,
        pages=found.pages,
        sheets=found.sheets,
        parts=[_part(name, piece) for piece in found.pieces],
        left_out=found.left_out,
        truncated=found.cut,
    )


def _kind(item: MediaItem) -> DocumentFormat:
    """What a file that was never read seems to be (its type, else its name's suffix)."""
    if item.mime == "application/x-ole-storage":
        return "office-97"
    suffix = PurePosixPath(_name(item)).suffix.lower()
    return "docx" if suffix == ".docx" else "xlsx" if suffix == ".xlsx" else "pdf"


def _part(name: str, piece: Piece) -> DocumentPart:
    if piece.page is not None:
        ref = f"{name}#page={piece.page}"
    elif piece.sheet is not None:
        ref = f"{name}#sheet={piece.sheet}"
    else:
        ref = f"{name}#section={piece.section}" if piece.section else f"{name}#start"
    return DocumentPart(
        ref=ref,
        page=piece.page,
        sheet=piece.sheet,
        section=piece.section,
        text=piece.text,
        truncated=piece.cut,
        original_length=piece.length,
    )
