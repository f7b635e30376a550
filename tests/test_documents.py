"""The documents among a run's media as the invocation's sourced items: read off the event
loop within a time limit, never failing the run; what a provider sees; the answer's grounds;
and what the rules provider says from them."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import pytest

from agent.contracts import (
    ActionKind,
    AgentDefinition,
    DocumentProblem,
    DocumentText,
    EnrichedInvocation,
    MediaItem,
    MediaStatus,
)
from agent.contracts.filetypes import sniff
from agent.run import documents as reading
from agent.run.answering import _sources
from agent.run.documents import DocumentLimits, DocumentReader
from lab.fake.files import tiny_png
from lab.fixtures.documents.make import HERE
from skills.providers.rules import RulesProvider
from tests.test_rules_provider import make_invocation

LIMITS = DocumentLimits(text_chars=20_000, timeout_s=5.0)


def fetched(tmp_path: Path, fixture: str, name: str, part_of: str = "message") -> MediaItem:
    """A media item as the fetcher leaves it: stored, sniffed, named by the sender."""
    target = tmp_path / f"{len(list(tmp_path.iterdir())) + 1}-{fixture}"
    shutil.copy(HERE / fixture, target)
    data = target.read_bytes()
    return MediaItem(
        media_id=f"ev-{target.name}#1",
        kind="file",
        part_of=part_of,  # type: ignore[arg-type]
        status=MediaStatus.FETCHED,
        file_name=name,
        mime=sniff(data, name),
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        path=f"media/{target.name}",
        stored_at=str(target),
    )


async def test_each_document_becomes_an_item_naming_its_file_and_places(tmp_path):
    items = [
        fetched(tmp_path, "expense-policy.pdf", "报销标准.pdf"),
        fetched(tmp_path, "budget.xlsx", "预算.xlsx", part_of="quote"),
        fetched(tmp_path, "handbook.docx", "员工手册.docx", part_of="earlier"),
    ]
    pdf, xlsx, docx = await DocumentReader(LIMITS).read(items)
    assert pdf.file_name == "报销标准.pdf" and pdf.format == "pdf" and pdf.pages == 2
    assert pdf.source == f"media:{items[0].media_id}" and pdf.media_id == items[0].media_id
    assert [part.ref for part in pdf.parts] == ["报销标准.pdf#page=1", "报销标准.pdf#page=2"]
    assert (xlsx.part_of, xlsx.sheets) == ("quote", ["差旅", "办公用品"])
    assert xlsx.parts[0].ref == "预算.xlsx#sheet=差旅" and xlsx.parts[0].sheet == "差旅"
    assert docx.part_of == "earlier" and docx.parts[1].ref == "员工手册.docx#section=考勤制度"
    assert not any(d.truncated or d.left_out or d.problem for d in (pdf, xlsx, docx))


async def test_pictures_text_files_and_missing_media_are_not_documents(tmp_path):
    picture = tmp_path / "1-a.png"
    picture.write_bytes(tiny_png())
    notes = tmp_path / "2-a.txt"
    notes.write_text("报销流程", encoding="utf-8")
    items = [
        MediaItem(
            media_id="p",
            kind="picture",
            status=MediaStatus.FETCHED,
            mime="image/png",
            stored_at=str(picture),
        ),
        MediaItem(
            media_id="t",
            kind="file",
            status=MediaStatus.FETCHED,
            mime="text/plain",
            stored_at=str(notes),
        ),
        MediaItem(media_id="m", kind="file", status=MediaStatus.MISSING, missing="timeout"),
    ]
    assert await DocumentReader(LIMITS).read(items) == []


async def test_a_scan_is_an_item_with_its_reason_and_no_parts(tmp_path):
    (scan,) = await DocumentReader(LIMITS).read([fetched(tmp_path, "scanned.pdf", "合同.pdf")])
    assert scan.problem is DocumentProblem.NO_TEXT_LAYER and scan.parts == []
    assert "no text layer" in (scan.missing or "")


async def test_the_budget_is_the_configured_one_and_its_cut_is_disclosed(tmp_path):
    limits = DocumentLimits(text_chars=1000, timeout_s=5.0)
    (long,) = await DocumentReader(limits).read([fetched(tmp_path, "long-report.pdf", "r.pdf")])
    assert long.truncated and long.pages == 12
    assert sum(len(part.text) for part in long.parts) == 1000
    assert long.left_out[-1].endswith("not read (the 1000-character budget for one file ran out)")


@pytest.mark.timeout(30)
async def test_a_reader_that_hangs_is_left_behind_with_a_timeout(tmp_path, monkeypatch):
    def stuck(data, kind, bounds):
        time.sleep(1.0)  # in the worker thread: the event loop is not held
        raise AssertionError("the run stopped waiting long before this")

    monkeypatch.setattr(reading, "read_document", stuck)
    monkeypatch.setattr(reading, "GRACE_S", 0.0)
    limits = DocumentLimits(text_chars=1000, timeout_s=0.05)
    (item,) = await DocumentReader(limits).read([fetched(tmp_path, "budget.xlsx", "b.xlsx")])
    assert item.problem is DocumentProblem.TIMEOUT and item.format == "xlsx"


async def test_a_reader_that_crashes_does_not_fail_the_run(tmp_path, monkeypatch):
    def broken(data, kind, bounds):
        raise RuntimeError("a bug in a parser")

    monkeypatch.setattr(reading, "read_document", broken)
    (item,) = await DocumentReader(LIMITS).read([fetched(tmp_path, "handbook.docx", "h.docx")])
    assert item.problem is DocumentProblem.CORRUPT
    assert item.missing == "the file could not be read (RuntimeError)"


async def test_a_file_gone_from_disk_is_said_too(tmp_path):
    item = fetched(tmp_path, "expense-policy.pdf", "报销标准.pdf")
    Path(item.stored_at or "").unlink()
    (document,) = await DocumentReader(LIMITS).read([item])
    assert document.problem is DocumentProblem.CORRUPT and document.format == "pdf"


async def read_into(
    tmp_path: Path, text: str, *files: tuple[str, str], part_of: str = "earlier"
) -> EnrichedInvocation:
    """The invocation of ``text`` with these files (by default sent just before it, the
    way DingTalk carries a file and a question: two messages)."""
    media = [fetched(tmp_path, fixture, name, part_of) for fixture, name in files]
    documents = await DocumentReader(LIMITS).read(media)
    return make_invocation(text).model_copy(update={"media": media, "documents": documents})


async def test_a_provider_sees_the_parts_and_never_where_the_file_is_kept(tmp_path):
    invocation = await read_into(tmp_path, "看看", ("expense-policy.pdf", "报销标准.pdf"))
    shown = invocation.for_provider()
    (document,) = shown["documents"]
    assert document["parts"][1]["page"] == 2 and "600 元" in document["parts"][1]["text"]
    assert str(tmp_path) not in str(shown)


async def test_the_documents_text_is_what_an_answer_may_quote_and_take_figures_from(tmp_path):
    invocation = await read_into(tmp_path, "住宿多少", ("budget.xlsx", "预算.xlsx"))
    sources = _sources(invocation)
    assert any("住宿（一线城市） | 600 | 每晚" in source for source in sources)


@pytest.fixture
def rules() -> RulesProvider:
    return RulesProvider(AgentDefinition(), None)


async def test_rules_answers_from_the_page_and_names_it(tmp_path, rules):
    invocation = await read_into(
        tmp_path, "一线城市住宿费每晚最多多少？", ("expense-policy.pdf", "报销标准.pdf")
    )
    answer = rules.answer_invocation(invocation)
    assert answer["text"].startswith("根据你发的《报销标准.pdf》第 2 页：\n一线城市")
    assert "600 元" in answer["text"]


async def test_rules_answers_from_the_sheet_and_names_it(tmp_path, rules):
    invocation = await read_into(tmp_path, "墨盒单价多少", ("budget.xlsx", "预算.xlsx"))
    assert "《预算.xlsx》“办公用品”工作表" in rules.answer_invocation(invocation)["text"]


async def test_rules_says_when_the_file_holds_nothing_on_it(tmp_path, rules):
    invocation = await read_into(tmp_path, "公司年会在哪里办？", ("handbook.docx", "手册.docx"))
    text = rules.answer_invocation(invocation)["text"]
    assert text.startswith("我读了《手册.docx》，里面没有找到相关内容。这个我不知道")


async def test_rules_says_a_scan_plainly(tmp_path, rules):
    invocation = await read_into(tmp_path, "", ("scanned.pdf", "合同.pdf"), part_of="message")
    text = rules.answer_invocation(invocation)["text"]
    assert text.splitlines()[0].startswith(
        "《合同.pdf》这个 PDF 是扫描件，里面没有可读取的文字，我读不了它的内容。"
    )
    assert "开头是" not in text


async def test_rules_reads_a_file_sent_alone_and_says_when_it_read_only_part(tmp_path, rules):
    media = [fetched(tmp_path, "long-report.pdf", "报告.pdf")]
    documents = await DocumentReader(DocumentLimits(1000, 5.0)).read(media)
    invocation = make_invocation("").model_copy(update={"media": media, "documents": documents})
    text = rules.answer_invocation(invocation)["text"]
    assert text.startswith(
        "我读了你发的《报告.pdf》（PDF，共 12 页）（文件较长，我只读了一部分。）"
    )


def test_rules_says_why_a_locked_file_was_not_read_in_english(rules, tmp_path):
    media = fetched(tmp_path, "expense-policy.pdf", "policy.pdf", part_of="earlier")
    locked = DocumentText(
        source=f"media:{media.media_id}",
        media_id=media.media_id,
        file_name="policy.pdf",
        part_of="earlier",
        format="pdf",
        problem=DocumentProblem.ENCRYPTED,
        missing="the PDF is protected by a password",
    )
    invocation = make_invocation("can you read this file?").model_copy(
        update={"media": [media], "documents": [locked]}
    )
    text = rules.answer_invocation(invocation)["text"]
    assert text.startswith('I couldn\'t read "policy.pdf": it is password-protected')
    assert ActionKind.REPLY in invocation.allowed_actions


async def test_a_command_provider_reads_them_in_context_md(tmp_path):
    from agent.contracts import SkillSnapshot
    from skills.rundir import prepare_run_dir

    (tmp_path / "media").mkdir()
    media = [
        fetched(tmp_path / "media", "long-report.pdf", "r.pdf"),
        fetched(tmp_path / "media", "scanned.pdf", "s.pdf"),
    ]
    documents = await DocumentReader(DocumentLimits(400, 5.0)).read(media)
    invocation = make_invocation("看看").model_copy(update={"media": media, "documents": documents})
    prepare_run_dir(tmp_path / "run", invocation, [], SkillSnapshot())
    context = (tmp_path / "run" / "CONTEXT.md").read_text(encoding="utf-8")
    assert "`r.pdf#page=2` (cut from 315 characters)" in context
    assert "- left out of `r.pdf`: pages 3-12: not read" in context
    assert "`s.pdf`: not readable (no_text_layer:" in context
