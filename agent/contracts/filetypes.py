"""What a file's bytes say it is, and what DingTalk takes as an image or a file message.

The type of a file is read from its first bytes (a name proves nothing): inbound media is
described this way (``agent/run/media.py``), and so is an attachment a run sends out,
which the action gate checks before it may leave (``gates/attachments.py``). DingTalk's
media upload takes images as jpg, gif, png or bmp and files as doc, docx, xls, xlsx, ppt,
pptx, zip, pdf or rar, each up to 20 MB (``../shared/dingtalk-workspace-apis.md`` §8).

    sniff(b"\\x89PNG\\r\\n\\x1a\\n...")          # "image/png"
    outbound_form("image/png", "chart.png")   # OutboundForm("image", "png")
    outbound_form("application/zip", "q3.xlsx")  # OutboundForm("file", "xlsx")
    document_format(docx_bytes)               # "docx" (a zip with word/document.xml)

Which document a zip is (Word or Excel) is read from its members, not its name: the text
of PDF, Word and Excel files is read for the model (``agent/run/document_text.py``).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath
from typing import Literal, NamedTuple

# (prefix, offset, mime): the first bytes of the formats people send and robots send back
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"BM", 0, "image/bmp"),
    (b"%PDF-", 0, "application/pdf"),
    (b"PK\x03\x04", 0, "application/zip"),
    (b"Rar!\x1a\x07", 0, "application/vnd.rar"),
    # the compound file of Office 97-2003 (doc, xls, ppt)
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 0, "application/x-ole-storage"),
    (b"#!AMR", 0, "audio/amr"),
    (b"OggS", 0, "audio/ogg"),
    (b"ID3", 0, "audio/mpeg"),
    (b"ftyp", 4, "video/mp4"),
    (b"\x1aE\xdf\xa3", 0, "video/webm"),
)
_TEXT_SUFFIXES = {
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
}


def sniff(data: bytes, file_name: str | None = None) -> str:
    """The type the bytes show; text is recognised as UTF-8 without NUL bytes (its name's
    suffix then tells plain text from markdown, csv or json)."""
    for prefix, offset, mime in _MAGIC:
        if data[offset : offset + len(prefix)] == prefix:
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    head = data[:4096]
    if b"\x00" not in head:
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 3:  # not just a character cut at the window's end
                return "application/octet-stream"
        suffix = PurePosixPath(file_name or "").suffix.lower()
        return _TEXT_SUFFIXES.get(suffix, "text/plain")
    return "application/octet-stream"


def is_text(mime: str | None) -> bool:
    """Readable as text: the txt, md, csv and json files a colleague pastes around."""
    return bool(mime) and (mime.startswith("text/") or mime == "application/json")


DocumentFormat = Literal["pdf", "docx", "xlsx", "office-97"]
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def document_format(data: bytes) -> DocumentFormat | None:
    """Which document's text can be read from these bytes, by their content, never a name:
    ``%PDF-``; a zip whose members are a Word (``word/document.xml``) or an Excel
    (``xl/workbook.xml``) package; ``office-97``: the compound file of .doc/.xls (or of a
    password-protected .docx/.xlsx, which Office wraps the same way). None: none of those."""
    if data.startswith(b"%PDF-"):
        return "pdf"
    if data.startswith(_OLE):
        return "office-97"
    if not data.startswith(b"PK\x03\x04"):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        return None
    if "word/document.xml" in names:
        return "docx"
    if "xl/workbook.xml" in names:
        return "xlsx"
    return None


def encrypted_office(data: bytes) -> bool:
    """A compound file holding an encrypted Office package (the stream "EncryptedPackage",
    named in UTF-16 in the file's directory)."""
    return data.startswith(_OLE) and "EncryptedPackage".encode("utf-16-le") in data


OutboundKind = Literal["image", "file"]


class OutboundForm(NamedTuple):
    """How DingTalk carries an attachment: an ``image`` message or a ``file`` message, and
    the file type it is uploaded and named as (``fileType`` of ``sampleFile``)."""

    kind: OutboundKind
    file_type: str


# Images DingTalk shows in the chat, by sniffed type.
_IMAGES = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/bmp": "bmp"}
# Files by sniffed type: the container decides which names may stand for it (a docx and an
# xlsx are both zip archives; the name says which), the first is used when the name fits none.
_FILES: dict[str, tuple[str, ...]] = {
    "application/pdf": ("pdf",),
    "application/zip": ("zip", "docx", "xlsx", "pptx"),
    "application/vnd.rar": ("rar",),
    "application/x-ole-storage": ("doc", "xls", "ppt"),
}
# What DingTalk's media upload takes, for the refusal's words.
ACCEPTED_TYPES = (
    "images (png, jpg, gif, bmp) and files (pdf, zip, docx, xlsx, pptx, rar, doc, xls, ppt)"
)
# DingTalk's limit for an uploaded image or file (larger needs a chunked upload).
MAX_UPLOAD_BYTES = 20 * 1024 * 1024


def outbound_form(mime: str, name: str) -> OutboundForm | None:
    """The form an attachment of sniffed type ``mime`` goes in, or None when DingTalk's media
    upload does not take it (text, audio, video, webp, anything unknown)."""
    if mime in _IMAGES:
        return OutboundForm("image", _IMAGES[mime])
    types = _FILES.get(mime)
    if types is None:
        return None
    suffix = PurePosixPath(name).suffix.lower().lstrip(".")
    return OutboundForm("file", suffix if suffix in types else types[0])
