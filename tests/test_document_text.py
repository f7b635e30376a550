"""Reading a PDF, Word or Excel file's text: each format, the type from the bytes, the
character budget and what it leaves out, scans, passwords, broken bytes, and the bounds on
pages, rows, unpacked size and time."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from agent.contracts import DocumentProblem
from agent.contracts.filetypes import document_format, encrypted_office
from agent.run.document_text import ReadBounds, Unreadable, read_document
from lab.fixtures.documents import make
from lab.fixtures.documents.make import HERE


def bounds(chars: int = 20_000, seconds: float = 10.0, **more: int) -> ReadBounds:
    return ReadBounds(chars, time.monotonic() + seconds, **more)


def fixture(name: str) -> bytes:
    return (HERE / name).read_bytes()


def read(data: bytes, **limits: int):
    kind = document_format(data)
    assert kind is not None
    return read_document(data, kind, bounds(**limits))


def test_the_committed_fixtures_are_what_the_generator_makes():
    for name, data in make.all_documents().items():
        assert fixture(name) == data, f"{name}: run python lab/fixtures/documents/make.py"


def test_the_type_comes_from_the_bytes_not_the_name():
    assert document_format(fixture("expense-policy.pdf")) == "pdf"
    assert document_format(fixture("budget.xlsx")) == "xlsx"
    assert document_format(fixture("handbook.docx")) == "docx"
    assert document_format(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100) == "office-97"
    plain_zip = io.BytesIO()
    with zipfile.ZipFile(plain_zip, "w") as archive:
        archive.writestr("notes/readme.txt", "hello")
    assert document_format(plain_zip.getvalue()) is None
    assert document_format(b"PK\x03\x04 but not a zip") is None
    assert document_format("报销标准.pdf".encode()) is None


def test_a_pdf_is_read_page_by_page():
    reading = read(fixture("expense-policy.pdf"))
    assert reading.format == "pdf" and reading.pages == 2
    assert [piece.page for piece in reading.pieces] == [1, 2]
    assert "住宿费每晚不超过 600 元" in reading.pieces[1].text
    assert not reading.cut and reading.left_out == []


def test_a_workbook_is_read_sheet_by_sheet_with_values():
    reading = read(fixture("budget.xlsx"))
    assert reading.sheets == ["差旅", "办公用品"]
    assert [piece.sheet for piece in reading.pieces] == ["差旅", "办公用品"]
    assert reading.pieces[0].text.splitlines()[1] == "住宿（一线城市） | 600 | 每晚"
    assert "墨盒 | 180 | 1440" in reading.pieces[1].text  # integers, not 180.0


def test_a_formula_cell_gives_its_cached_value_not_the_formula():
    from openpyxl import Workbook

    book = Workbook()
    book.active.append(("a", 2, "=B1*3"))
    out = io.BytesIO()
    book.save(out)
    text = read(out.getvalue()).pieces[0].text
    assert "=B1" not in text  # openpyxl wrote no cached value: the cell reads empty
    assert text == "a | 2"


def test_a_word_file_is_read_by_heading_with_its_tables():
    reading = read(fixture("handbook.docx"))
    sections = [piece.section for piece in reading.pieces]
    assert sections == ["员工手册", "考勤制度", "年假"]
    leave = reading.pieces[2].text
    assert "5 天带薪年假" in leave
    assert "工龄 | 年假天数" in leave and "10-20 年 | 10 天" in leave


def test_the_budget_cuts_and_names_what_was_left_out():
    reading = read(fixture("long-report.pdf"), chars=1000)
    assert reading.cut
    assert sum(len(piece.text) for piece in reading.pieces) == 1000
    assert reading.pieces[-1].cut and reading.pieces[-1].length > len(reading.pieces[-1].text)
    last = reading.pieces[-1].page
    assert reading.left_out[-1] == (
        f"pages {last + 1}-12: not read (the 1000-character budget for one file ran out)"
    )
    assert any(note.startswith(f"page {last} after its first") for note in reading.left_out)


def test_the_budget_stops_a_workbook_and_a_word_file_too():
    sheets = read(fixture("budget.xlsx"), chars=60)
    assert sheets.cut and any("办公用品" in note for note in sheets.left_out)
    words = read(fixture("handbook.docx"), chars=40)
    assert words.cut and words.left_out
    assert sum(len(piece.text) for piece in words.pieces) <= 40


def test_a_scan_has_no_text_layer():
    with pytest.raises(Unreadable) as caught:
        read(fixture("scanned.pdf"))
    assert caught.value.problem is DocumentProblem.NO_TEXT_LAYER


def test_a_page_without_text_among_others_is_named():
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(fixture("expense-policy.pdf"))).pages:
        writer.add_page(page)
    writer.insert_blank_page(index=1)
    out = io.BytesIO()
    writer.write(out)
    reading = read(out.getvalue())
    assert [piece.page for piece in reading.pieces] == [1, 3]
    assert "page 2: no text layer (a scan, or blank)" in reading.left_out


def encrypted(password: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(fixture("expense-policy.pdf"))))
    writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_pdf_with_a_password_is_said_so():
    with pytest.raises(Unreadable) as caught:
        read(encrypted("secret"))
    assert caught.value.problem is DocumentProblem.ENCRYPTED


def test_a_pdf_only_restricted_from_editing_is_read():
    reading = read(encrypted(""))
    assert "600 元" in reading.pieces[1].text


def test_broken_bytes_are_corrupt_not_a_crash():
    for data in (
        b"%PDF-1.4\n" + b"garbage" * 50,
        fixture("expense-policy.pdf")[:300],
        fixture("budget.xlsx")[:400],  # a zip cut short
    ):
        kind = document_format(data) or "xlsx"
        with pytest.raises(Unreadable) as caught:
            read_document(data, kind, bounds())
        assert caught.value.problem is DocumentProblem.CORRUPT


def test_a_word_package_with_a_broken_document_is_corrupt():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("word/document.xml", "<not xml")
    with pytest.raises(Unreadable) as caught:
        read(out.getvalue())
    assert caught.value.problem is DocumentProblem.CORRUPT


def test_office_97_and_encrypted_office_files_are_said_so():
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 200
    with pytest.raises(Unreadable) as caught:
        read(ole)
    assert caught.value.problem is DocumentProblem.UNSUPPORTED
    locked = ole + "EncryptedPackage".encode("utf-16-le")
    assert encrypted_office(locked)
    with pytest.raises(Unreadable) as caught:
        read(locked)
    assert caught.value.problem is DocumentProblem.ENCRYPTED


def test_a_package_that_unpacks_too_large_is_not_opened():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
        archive.writestr("xl/sharedStrings.xml", b" " * (2 * 1024 * 1024))
    with pytest.raises(Unreadable) as caught:
        read(out.getvalue(), max_unpacked_bytes=1024 * 1024)
    assert caught.value.problem is DocumentProblem.TOO_LARGE


def test_pages_sheets_and_rows_are_bounded():
    pages = read(fixture("long-report.pdf"), max_pages=3)
    assert [piece.page for piece in pages.pieces] == [1, 2, 3]
    assert pages.left_out == ["pages 4-12: not read (at most 3 pages are read)"]
    sheets = read(fixture("budget.xlsx"), max_sheets=1, max_rows=2)
    assert [piece.sheet for piece in sheets.pieces] == ["差旅"]
    assert sheets.pieces[0].text.count("\n") == 1  # two rows
    assert "sheet «差旅» from row 3: not read (at most 2 rows are read)" in sheets.left_out
    assert "sheets «办公用品»: not read (at most 1 sheets are read)" in sheets.left_out


def test_a_deadline_already_passed_reads_nothing_and_says_why():
    with pytest.raises(Unreadable) as caught:
        read(fixture("long-report.pdf"), seconds=-1)
    assert caught.value.problem is DocumentProblem.TIMEOUT
    sheets = read(fixture("budget.xlsx"), seconds=-1)
    assert sheets.pieces == []
    assert sheets.left_out == ["sheets «差旅»、«办公用品»: not read (reading took too long)"]


def test_a_case_names_a_fixture_file_under_lab_fixtures_only():
    from lab.fake.files import parse_files

    files = parse_files(
        {"d": {"name": "a.pdf", "type": "application/pdf", "fixture": "documents/scanned.pdf"}}
    )
    assert files["d"].data == fixture("scanned.pdf")
    for wrong in ("../cases/README.md", "documents/absent.pdf", "/etc/hostname"):
        with pytest.raises(ValueError, match="no file under lab/fixtures/"):
            parse_files({"d": {"name": "a", "fixture": wrong}})
    with pytest.raises(ValueError, match="one of"):
        parse_files({"d": {"name": "a", "fixture": "documents/scanned.pdf", "content": "x"}})


def test_the_budget_and_time_limit_are_settings_with_bounds():
    from pydantic import ValidationError

    from agent.config import Settings

    settings = Settings()
    assert (settings.document_text_chars, settings.document_read_timeout_s) == (20_000, 10)
    for wrong in ({"document_text_chars": 10}, {"document_read_timeout_s": 0}):
        with pytest.raises(ValidationError):
            Settings(**wrong)
