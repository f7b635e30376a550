"""What the rules provider says from the PDF, Word and Excel files a person sent.

The host has read them already (``invocation.documents``, ``agent/run/documents.py``); this
only words what was read, with no I/O of its own:

- ``about_document``: one line for a file sent without a question — what it is and how it
  begins, or, when nothing could be read, why, plainly (a scan has no text layer; a
  password; broken bytes) instead of pretending;
- ``answer_from_documents``: a question answered from the file's own lines, naming the
  file and the page, sheet or section (「根据你发的《报销标准.pdf》第 2 页：…」), with the
  knowledge folder's strict matcher: enough of the question must be covered, or nothing.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from agent.contracts import DocumentPart, DocumentProblem, DocumentText, EnrichedInvocation
from skills.providers.base import reply
from skills.retrieval.folder import excerpt
from skills.retrieval.sections import Section
from skills.retrieval.strict import best_match
from skills.retrieval.terms import terms

EXCERPT_CHARS = 300

_UNREAD_ZH = {
    DocumentProblem.NO_TEXT_LAYER: "这个 PDF 是扫描件，里面没有可读取的文字，我读不了它的内容。",
    DocumentProblem.ENCRYPTED: "这个文件设了密码，我打不开，读不了它的内容。",
    DocumentProblem.CORRUPT: "这个文件好像已经损坏了，我打不开，读不了它的内容。",
    DocumentProblem.UNSUPPORTED: (
        "这是旧版 Office 格式（.doc / .xls），我只能读 PDF、.docx 和 .xlsx；"
        "另存为新格式再发我就行。"
    ),
    DocumentProblem.TOO_LARGE: "这个文件解压后太大了，我没有读它的内容。",
    DocumentProblem.TIMEOUT: "这个文件太大，读取超时了，我没能读到它的内容。",
}
_UNREAD_EN = {
    DocumentProblem.NO_TEXT_LAYER: (
        "this PDF is a scan: it has no text layer, so I can't read what it says."
    ),
    DocumentProblem.ENCRYPTED: "it is password-protected, so I can't open it.",
    DocumentProblem.CORRUPT: "it seems to be damaged, so I can't open it.",
    DocumentProblem.UNSUPPORTED: (
        "it is an old Office format (.doc / .xls); I can read PDF, .docx and .xlsx — save it"
        " in a newer format and send it again."
    ),
    DocumentProblem.TOO_LARGE: "it unpacks to far too much, so I didn't read it.",
    DocumentProblem.TIMEOUT: "it took too long to read, so I couldn't get its content.",
}
_WHOSE_ZH = {"message": "你发的", "quote": "引用的", "earlier": "你刚才发的"}


def unread_line(document: DocumentText, english: bool) -> str:
    """Why nothing of the file could be read, in one plain line."""
    problem = document.problem or DocumentProblem.CORRUPT
    if english:
        return f'I couldn\'t read "{document.file_name}": {_UNREAD_EN[problem]}'
    return f"《{document.file_name}》{_UNREAD_ZH[problem]}"


def _what(document: DocumentText, english: bool) -> str:
    if document.format == "pdf":
        pages = document.pages or 0
        return f"PDF, {pages} pages" if english else f"PDF，共 {pages} 页"
    if document.format == "xlsx":
        names = "、".join(document.sheets)
        count = len(document.sheets)
        return (
            f"Excel, sheets: {', '.join(document.sheets)}"
            if english
            else (f"Excel，{count} 个工作表：{names}")
        )
    return "Word" if english else "Word 文档"


def about_document(document: DocumentText, english: bool) -> str:
    """The line for a file sent on its own: what it is and how it begins, or why not."""
    if document.problem is not None or not document.parts:
        return unread_line(document, english)
    text = "\n".join(part.text for part in document.parts).strip()
    begins = text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")
    partly = document.truncated or any("not read" in note for note in document.left_out)
    if english:
        note = " (It is long: I read only part of it.)" if partly else ""
        return (
            f'I read "{document.file_name}" ({_what(document, True)}){note}; it begins:\n{begins}'
        )
    whose = _WHOSE_ZH[document.part_of]
    note = "（文件较长，我只读了一部分。）" if partly else ""
    what = _what(document, False)
    return f"我读了{whose}《{document.file_name}》（{what}）{note}，开头是：\n{begins}"


def _place(part: DocumentPart, english: bool) -> str:
    if part.page is not None:
        return f"page {part.page}" if english else f"第 {part.page} 页"
    if part.sheet is not None:
        return f'sheet "{part.sheet}"' if english else f"“{part.sheet}”工作表"
    if part.section:
        return f'section "{part.section}"' if english else f"“{part.section}”一节"
    return "the beginning" if english else "开头"


# a PDF's line that reads as a heading: short, and not a sentence (no closing punctuation)
_HEADING_LINE = re.compile(r"^[^。.;；,，:：!！?？]{1,30}$")


def _sections(document: DocumentText) -> list[tuple[Section, DocumentPart]]:
    """Each line of each part as a section the strict matcher can weigh, under its heading:
    a Word heading, a sheet's name and header row, or a PDF's last heading-like line."""
    found = []
    stem = PurePosixPath(document.file_name).stem
    for part in document.parts:
        lines = [line.strip() for line in part.text.split("\n") if line.strip()]
        header = lines[0] if part.sheet is not None and len(lines) > 1 else None
        above = part.section or part.sheet or ""
        for line in lines[1:] if header else lines:
            if part.page is not None and _HEADING_LINE.match(line):
                above = line  # what follows on the page is under it
            heading = " ".join(x for x in (above, header) if x)
            content = f"{header}\n{line}" if header else line
            own = frozenset(terms(heading))
            titled = own | frozenset(terms(stem))
            section = Section(
                document.file_name,
                heading,
                1,
                content,
                own,
                titled,
                titled | frozenset(terms(content)),
                (stem,),
                own=content,
            )
            found.append((section, part))
    return found


def answer_from_documents(
    invocation: EnrichedInvocation, text: str, english: bool
) -> dict[str, Any] | None:
    """The reply that answers ``text`` from the documents' own lines, or None."""
    readable = [d for d in invocation.documents if d.parts]
    if not text or not readable:
        return None
    candidates = [
        (section, part, document) for document in readable for section, part in _sections(document)
    ]
    match = best_match(text, (section for section, _, _ in candidates))
    if match is None:
        return None
    _, part, document = next(c for c in candidates if c[0] is match.section)
    content = excerpt(match.section.content)
    place = _place(part, english)
    if english:
        return reply(f'From the "{document.file_name}" you sent, {place}:\n{content}')
    whose = "引用的" if document.part_of == "quote" else "你发的"
    return reply(f"根据{whose}《{document.file_name}》{place}：\n{content}")


def not_in_documents(invocation: EnrichedInvocation, english: bool) -> str:
    """「我读了你发的《x》，里面没有找到…」 before an answer that found nothing, or ""."""
    names = [d.file_name for d in invocation.documents if d.parts]
    if not names:
        return ""
    if english:
        return f"I read {', '.join(repr(n) for n in names)} and found nothing on this there. "
    return f"我读了{'、'.join(f'《{n}》' for n in names)}，里面没有找到相关内容。"
