"""What a careful colleague says about pictures, files and message types it received.

Used two ways:

- ``host_reply`` by the pipeline, before any provider: a file DingTalk refused to hand over
  (an expired or invalid download code) gets one short ask to send it again, and a message
  of a type dta cannot read at all gets a short honest reply — the same whichever provider
  is configured, because neither needs judgement, only honesty;
- ``about_media`` and ``wants_file`` by the ``rules`` provider: it can read text files and
  the text the host read from PDF, Word and Excel files (``skills/documents.py``), but not
  pictures, video or speech-less audio, and says exactly what it received, what it read
  and what it could not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.contracts import (
    MEDIA_MSGTYPES,
    TEXT_MSGTYPES,
    ActionKind,
    DocumentText,
    EnrichedInvocation,
    MediaItem,
    MediaStatus,
)
from skills import documents
from skills.providers.base import ask, reply

FILE_GOAL = "查看对方发来的文件或图片"
FILE_DONE = "已就收到的文件或图片答复对方"
EXCERPT_CHARS = 300
_KIND_ZH = {"picture": "图片", "file": "文件", "video": "视频", "audio": "语音"}
_KIND_EN = {"picture": "picture", "file": "file", "video": "video", "audio": "voice message"}
# "帮我看下这个文件 / 这张图 / 附件" — a request about a file that must come with it
_WANTS_FILE = re.compile(
    r"(?:看|瞧|检查|审|读|分析|识别|总结|处理)[^，,。！!？?]{0,8}?"
    r"(?:文件|附件|图片|这张图|截图|照片|图|文档|表格|pdf|PDF)"
    r"|(?i:\b(?:look at|check|read|review|open)\b.{0,20}\b(?:file|attachment|picture|image|"
    r"screenshot|photo|pdf)\b)"
)


# why a file could not be had, in the person's words (the invocation keeps the details)
_WHY = {
    "too_large": ("it is larger than I may download", "超过了我能下载的大小"),
    "timeout": ("the download timed out", "下载超时了"),
    "refused": ("DingTalk would not hand it over", "钉钉没有给出文件"),
    "no_code": ("the message carried no file", "消息里没有文件"),
    "failed": ("the download failed", "下载失败了"),
}


def file_task() -> dict[str, Any]:
    return {"goal": FILE_GOAL, "waiting_for": "文件或图片", "done_when": [FILE_DONE]}


_LABELS = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
    "image/bmp": "BMP",
    "application/pdf": "PDF",
    "application/zip": "ZIP",
    "application/json": "JSON",
    "text/plain": "TXT",
    "text/markdown": "Markdown",
    "text/csv": "CSV",
    "video/mp4": "MP4",
    "video/webm": "WEBM",
    "audio/amr": "AMR",
    "audio/ogg": "OGG",
    "audio/mpeg": "MP3",
}


def _size(size: int | None) -> str:
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def describe(item: MediaItem, english: bool = False) -> str:
    """「图片（PNG，12 KB）」: what it is, from its sniffed type, never its claimed name."""
    kind = (_KIND_EN if english else _KIND_ZH).get(item.kind, item.kind)
    details = [d for d in (item.file_name, _LABELS.get(item.mime or "", "")) if d]
    if item.size is not None:
        details.append(_size(item.size))
    if item.duration_ms:
        seconds = f"{item.duration_ms / 1000:.0f}"
        details.append(f"{seconds} s" if english else f"{seconds} 秒")
    if not details:
        return kind
    return f"{kind} ({', '.join(details)})" if english else f"{kind}（{'，'.join(details)}）"


def _own(invocation: EnrichedInvocation) -> list[MediaItem]:
    return [m for m in invocation.media if m.part_of == "message"]


def host_reply(invocation: EnrichedInvocation) -> dict[str, Any] | None:
    """The honest answer the host gives without a provider, or None to ask the provider."""
    allowed = set(invocation.allowed_actions)
    refused = [m for m in _own(invocation) if m.refused]
    if refused and ActionKind.ASK in allowed:
        what = "、".join(dict.fromkeys(_KIND_ZH.get(m.kind, "文件") for m in refused))
        return {
            **ask(f"你发的{what}我这边没能下载下来（链接可能已经过期），能再发一次吗？"),
            "task": file_task(),
        }
    msgtype = invocation.event.msgtype
    known = msgtype in TEXT_MSGTYPES or msgtype in MEDIA_MSGTYPES
    unreadable = not known and not invocation.text.strip() and not _own(invocation)
    if unreadable and ActionKind.REPLY in allowed:
        return reply(
            f"这条消息（{msgtype} 类型）我这边读不到内容，不想乱猜。"
            "能把需要我处理的内容用文字或图片、文件直接发给我吗？"
        )
    return None


def pictures_only(invocation: EnrichedInvocation) -> bool:
    """The message's own media are only what this provider cannot read (pictures, video):
    nothing among them it could quote back, so its words are what it can answer (a
    document is never a picture: what was read of it, or why not, is said)."""
    own = _own(invocation)
    return bool(own) and all(
        _read_text(item) is None and _document_of(invocation, item) is None for item in own
    )


def _document_of(invocation: EnrichedInvocation, item: MediaItem) -> DocumentText | None:
    return next((d for d in invocation.documents if d.media_id == item.media_id), None)


def picture_note(invocation: EnrichedInvocation, english: bool) -> str:
    """One line on the media it could not look at, for an answer that could use them."""
    what = "、".join(dict.fromkeys(_KIND_ZH.get(m.kind, "文件") for m in _own(invocation)))
    if english:
        kinds = ", ".join(dict.fromkeys(_KIND_EN.get(m.kind, "file") for m in _own(invocation)))
        return (
            f"(I can't look at the {kinds} you sent; if the answer depends on what it shows,"
            " tell me the key details in words.)"
        )
    return f"（你发的{what}我看不了内容；如果问题的关键在{what}里，请把要点用文字告诉我。）"


def wants_file(text: str) -> bool:
    """A request about a file or picture ("帮我看下这个文件")."""
    return bool(_WANTS_FILE.search(text))


def _read_text(item: MediaItem) -> str | None:
    if item.status is not MediaStatus.FETCHED or not item.stored_at:
        return None
    if not ((item.mime or "").startswith("text/") or item.mime == "application/json"):
        return None
    try:
        return Path(item.stored_at).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


_WHOSE_EN = {"message": "", "quote": "quoted ", "earlier": "earlier "}
_WHOSE_ZH = {"message": "", "quote": "引用的", "earlier": "你刚才发的"}


def about_media(invocation: EnrichedInvocation, english: bool) -> dict[str, Any] | None:
    """What the rules provider can honestly say about the media it received, if any."""
    items = [m for m in invocation.media if m.kind != "audio" or not m.recognition]
    if not items:
        return None
    lines: list[str] = []
    for item in items:
        what = describe(item, english)
        whose = _WHOSE_EN[item.part_of] if english else _WHOSE_ZH[item.part_of]
        if item.status is MediaStatus.MISSING:
            why_en, why_zh = _WHY.get(item.problem or "", _WHY["failed"])
            lines.append(
                f"I couldn't get the {whose}{what} ({why_en}), so I haven't seen it."
                if english
                else f"{whose}{what}我这边没能下载下来（{why_zh}），没看到内容。"
            )
            continue
        document = _document_of(invocation, item)
        if document is not None:  # a PDF, Word or Excel file the host read
            lines.append(documents.about_document(document, english))
            continue
        text = _read_text(item)
        if text is not None:
            excerpt = text.strip()[:EXCERPT_CHARS]
            more = "…" if len(text.strip()) > EXCERPT_CHARS else ""
            lines.append(
                f"I read the {whose}{what}; it begins:\n{excerpt}{more}"
                if english
                else f"我读了{whose}{what}，开头是：\n{excerpt}{more}"
            )
        else:
            lines.append(
                f"I received the {whose}{what}, but I can only read text, not its content."
                if english
                else f"收到了{whose}{what}，不过我只能读文字，看不了它的内容。"
            )
    tail = (
        " Tell me in words what you need and I'll help."
        if english
        else "需要我做什么，用文字告诉我就好。"
    )
    apart = len(lines) > 1 or "\n" in lines[-1]  # not glued to an excerpt's last line
    return reply("\n".join(lines) + ("\n" if apart else "") + tail)
