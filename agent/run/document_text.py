"""The text of a PDF, Word or Excel file, read within bounds.

Pure functions of the bytes (no files, no network, no event loop): ``agent/run/documents.py``
runs them in a worker thread with a time limit. Every loop is bounded — pages, sheets, rows,
columns, characters kept and a deadline checked as it goes — so a 500-page PDF or a
million-row sheet costs what its first budget's worth costs, and what was not read is named
(``left_out``) rather than silently dropped. A file that cannot be read at all raises
``Unreadable`` with the reason as a code: a scan with no text layer, a password, corrupt
bytes, an Office 97-2003 file, a zip that unpacks to too much.

- PDF (pypdf): the text of each page; pages without text are named as such.
- Word .docx (python-docx): paragraphs and tables in order, split at headings; a table's
  rows one a line, cells separated by " | ".
- Excel .xlsx (openpyxl, read-only, cached values rather than formulas): each sheet's
  non-empty rows one a line, cells separated by " | ".
"""

from __future__ import annotations

import io
import re
import time
import zipfile
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from agent.contracts import DocumentProblem
from agent.contracts.filetypes import DocumentFormat, encrypted_office


@dataclass(frozen=True)
class ReadBounds:
    max_chars: int  # of text kept per file: reading stops once it is spent
    deadline: float  # time.monotonic() after which reading stops
    max_pages: int = 300
    max_sheets: int = 20
    max_rows: int = 5000  # per sheet, and per Word table
    max_columns: int = 50
    max_unpacked_bytes: int = 100 * 1024 * 1024  # a docx/xlsx's members, as declared


@dataclass
class Piece:
    """One page, sheet or section's text (exactly one of page, sheet, section-or-start)."""

    text: str
    page: int | None = None
    sheet: str | None = None
    section: str | None = None
    cut: bool = False
    length: int | None = None  # its whole length, when cut


@dataclass
class Reading:
    format: DocumentFormat
    pieces: list[Piece] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    pages: int | None = None
    sheets: list[str] = field(default_factory=list)
    cut: bool = False  # the character budget ran out before the end


class Unreadable(Exception):
    def __init__(self, problem: DocumentProblem, why: str) -> None:
        super().__init__(why)
        self.problem = problem
        self.why = why


class _Budget:
    """Characters left to keep of one file."""

    def __init__(self, chars: int) -> None:
        self.left = chars

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def take(self, text: str) -> tuple[str, bool]:
        kept = text[: max(self.left, 0)]
        self.left -= len(text)
        return kept, len(kept) < len(text)


_BLANKS = re.compile(r"\n{3,}")


def _tidy(text: str) -> str:
    lines = (line.rstrip() for line in text.replace("\r\n", "\n").split("\n"))
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


def read_document(data: bytes, kind: DocumentFormat, bounds: ReadBounds) -> Reading:
    """The text of ``data``, a file of ``kind`` (``filetypes.document_format``)."""
    if kind == "pdf":
        return _pdf(data, bounds)
    if kind == "docx":
        return _docx(data, bounds)
    if kind == "xlsx":
        return _xlsx(data, bounds)
    if encrypted_office(data):
        raise Unreadable(DocumentProblem.ENCRYPTED, "a password-protected Office file")
    raise Unreadable(
        DocumentProblem.UNSUPPORTED,
        "an Office 97-2003 file (.doc or .xls): only PDF, .docx and .xlsx are read",
    )


def _span(noun: str, first: int, last: int) -> str:
    return f"{noun} {first}" if first == last else f"{noun}s {first}-{last}"


def _numbers(noun: str, numbers: list[int]) -> str:
    """「pages 3-5, 9」 for [3, 4, 5, 9]."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    spans = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    return f"{noun}{'s' if len(numbers) > 1 else ''} {', '.join(spans)}"


TOOK_TOO_LONG = "not read (reading took too long)"


def _why_stopped(bounds: ReadBounds, budget: _Budget, over_count: bool, limit: str) -> str:
    if over_count:
        return f"not read (at most {limit} are read)"
    if budget.spent:
        return _over_budget(bounds)
    return TOOK_TOO_LONG


def _over_budget(bounds: ReadBounds) -> str:
    return f"not read (the {bounds.max_chars}-character budget for one file ran out)"


def _keep(
    reading: Reading, budget: _Budget, bounds: ReadBounds, piece: Piece, where: str | None
) -> None:
    """Keep what the budget allows of ``piece``; a cut is marked on it and named (``where``
    None: its reader has named where it stopped already)."""
    whole = piece.text
    piece.text, piece.cut = budget.take(whole)
    if piece.cut:
        piece.length = len(whole)
        reading.cut = True
    if piece.cut and where is not None:
        rest = f"{where} after its first {len(piece.text)} characters"
        reading.left_out.append(f"{rest}: {_over_budget(bounds)}")
    reading.pieces.append(piece)


# ------------------------------------------------------------------ PDF


def _pdf_reader(data: bytes) -> Any:
    from pypdf import PdfReader  # only for a PDF: the import costs a run that has none

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not _opened(reader):
            raise Unreadable(DocumentProblem.ENCRYPTED, "the PDF is protected by a password")
        len(reader.pages)  # the page tree: a broken one fails here, not midway
    except Unreadable:
        raise
    except Exception as exc:  # pypdf raises many kinds for broken bytes
        why = f"not a readable PDF ({type(exc).__name__})"
        raise Unreadable(DocumentProblem.CORRUPT, why) from None
    return reader


def _opened(reader: Any) -> bool:
    """An encrypted PDF that opens without a password (only editing is restricted)."""
    try:
        return bool(reader.decrypt(""))
    except Exception:  # an unknown cipher, or AES without the optional crypto library
        return False


def _pdf(data: bytes, bounds: ReadBounds) -> Reading:
    reader = _pdf_reader(data)
    count = len(reader.pages)
    reading = Reading("pdf", pages=count)
    budget = _Budget(bounds.max_chars)
    blank: list[int] = []
    broken: list[int] = []
    for number in range(1, count + 1):
        over = number > bounds.max_pages
        if over or budget.spent or time.monotonic() > bounds.deadline:
            why = _why_stopped(bounds, budget, over, f"{bounds.max_pages} pages")
            reading.left_out.append(f"{_span('page', number, count)}: {why}")
            break
        try:
            text = _tidy(reader.pages[number - 1].extract_text() or "")
        except Exception:  # one bad page: the others are still worth reading
            broken.append(number)
            continue
        if not text:
            blank.append(number)
            continue
        _keep(reading, budget, bounds, Piece(text, page=number), f"page {number}")
    if blank:
        reading.left_out.append(f"{_numbers('page', blank)}: no text layer (a scan, or blank)")
    if broken:
        reading.left_out.append(f"{_numbers('page', broken)}: could not be read")
    if not reading.pieces:
        _nothing_read(reading, blank, count)
    return reading


def _nothing_read(reading: Reading, blank: list[int], count: int) -> None:
    """A PDF with no text at all: said as what it is, never as an empty answer."""
    if count and len(blank) == count:
        raise Unreadable(
            DocumentProblem.NO_TEXT_LAYER,
            "the PDF has no text layer (a scanned image): its pages hold no readable text",
        )
    if reading.left_out and reading.left_out[0].endswith(TOOK_TOO_LONG):
        raise Unreadable(DocumentProblem.TIMEOUT, "reading the PDF took too long")
    if not blank:
        raise Unreadable(DocumentProblem.CORRUPT, "no page of the PDF could be read")
    raise Unreadable(DocumentProblem.NO_TEXT_LAYER, "the PDF's pages hold no readable text")


# ------------------------------------------------------------------ zip packages


def _unpacks_within(data: bytes, bounds: ReadBounds, what: str) -> None:
    """A docx or xlsx whose members declare more than may be unpacked is not opened (a zip
    reads no more of a member than it declares, so the declared sizes bound the work)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            total = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise Unreadable(DocumentProblem.CORRUPT, f"not a readable {what} ({exc})") from None
    if total > bounds.max_unpacked_bytes:
        raise Unreadable(
            DocumentProblem.TOO_LARGE,
            f"the {what} unpacks to {total // (1024 * 1024)} MB, more than may be read",
        )


# ------------------------------------------------------------------ Word


def _is_heading(paragraph: Any) -> bool:
    style = paragraph.style
    name = (style.name or "").lower() if style is not None else ""
    return name.startswith(("heading", "title", "标题"))


def _table_lines(table: Any, bounds: ReadBounds) -> list[str]:
    lines = []
    for index, row in enumerate(table.rows):
        if index >= bounds.max_rows:
            lines.append(f"(rows after {bounds.max_rows} not read)")
            break
        cells: list[str] = []
        previous = None
        for cell in row.cells[: bounds.max_columns]:
            if previous is not None and cell._tc is previous:  # a merged cell repeats
                continue
            previous = cell._tc
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            lines.append(" | ".join(cells))
    return lines


def _docx(data: bytes, bounds: ReadBounds) -> Reading:
    _unpacks_within(data, bounds, "Word file")
    from docx import Document  # only for a Word file
    from docx.table import Table

    try:
        document = Document(io.BytesIO(data))
    except Exception as exc:
        raise Unreadable(DocumentProblem.CORRUPT, f"not a readable Word file ({exc})") from None
    reading = Reading("docx")
    budget = _Budget(bounds.max_chars)
    section: str | None = None
    lines: list[str] = []

    def close() -> None:
        text = _tidy("\n".join(lines))
        if text and not budget.spent:
            where = f"section «{section}»" if section else "the beginning"
            _keep(reading, budget, bounds, Piece(text, section=section), where)
        lines.clear()

    for block in document.iter_inner_content():
        if budget.spent or time.monotonic() > bounds.deadline:
            where = f"after section «{section}»" if section else "after its beginning"
            why = _why_stopped(bounds, budget, False, "")
            reading.left_out.append(f"the rest of the document {where}: {why}")
            break
        if isinstance(block, Table):
            lines.extend(_table_lines(block, bounds))
        elif _is_heading(block) and block.text.strip():
            close()
            section = " ".join(block.text.split())
        else:
            lines.append(block.text)
        if sum(len(line) for line in lines) > budget.left:
            close()  # a long section is cut here, not read to its end first
    close()
    return reading


# ------------------------------------------------------------------ Excel


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else format(value, ".15g")
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == datetime.min.time() else str(value)
    if isinstance(value, date):
        return value.isoformat()
    return " ".join(str(value).split())


def _sheet_lines(
    sheet: Any, name: str, bounds: ReadBounds, budget: _Budget, left_out: list[str]
) -> tuple[list[str], bool]:
    """A sheet's non-empty rows, each a line, until a bound (where it stopped is named), and
    whether the character budget was what stopped it."""
    lines: list[str] = []
    used = 0
    for number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
        stop = None
        if number > bounds.max_rows:
            stop = f"not read (at most {bounds.max_rows} rows are read)"
        elif used >= budget.left:
            stop = _over_budget(bounds)
        elif time.monotonic() > bounds.deadline:
            stop = TOOK_TOO_LONG
        if stop is not None:
            left_out.append(f"sheet «{name}» from row {number}: {stop}")
            return lines, used >= budget.left
        cells = [_cell(value) for value in row[: bounds.max_columns]]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            lines.append(" | ".join(cells))
            used += len(lines[-1]) + 1
    return lines, False


def _xlsx(data: bytes, bounds: ReadBounds) -> Reading:
    _unpacks_within(data, bounds, "Excel file")
    from openpyxl import load_workbook  # only for a workbook

    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:
        raise Unreadable(DocumentProblem.CORRUPT, f"not a readable Excel file ({exc})") from None
    reading = Reading("xlsx", sheets=list(book.sheetnames))
    budget = _Budget(bounds.max_chars)
    try:
        for index, name in enumerate(reading.sheets):
            over = index >= bounds.max_sheets
            if over or budget.spent or time.monotonic() > bounds.deadline:
                why = _why_stopped(bounds, budget, over, f"{bounds.max_sheets} sheets")
                rest = "、".join(f"«{s}»" for s in reading.sheets[index:])
                reading.left_out.append(f"sheets {rest}: {why}")
                break
            sheet = book[name]
            if not hasattr(sheet, "iter_rows"):  # a chart sheet: no cells
                continue
            lines, ran_out = _sheet_lines(sheet, name, bounds, budget, reading.left_out)
            if not lines:
                reading.left_out.append(f"sheet «{name}»: empty")
                continue
            where = None if ran_out else f"sheet «{name}»"
            _keep(reading, budget, bounds, Piece("\n".join(lines), sheet=name), where)
            reading.cut = reading.cut or ran_out
    finally:
        book.close()  # read-only mode keeps the archive open until closed
    return reading
