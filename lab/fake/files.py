"""The files the fake DingTalk serves for download codes, and the bytes they are made of.

A lab case declares them (``fixtures.files``: download code -> name, type and content);
callbacks the fake builds itself (a ``picture`` step without a code, say) get a small real
file of the right kind, so what the runtime downloads always sniffs as what it claims.
A code the fake does not know is answered as DingTalk answers an invalid code.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_FILE_KEYS = frozenset({"name", "type", "content", "base64", "fixture", "size"})
# ``fixture``: a file under lab/fixtures/ (its real bytes: the documents the cases read)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass(frozen=True)
class FakeFile:
    name: str
    mime: str
    data: bytes


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    """A valid RGB PNG of the given size (grey pixels), built by hand: no imaging library."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80\x80\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# Just enough of each container for a sniffer to recognise it.
_MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00" * 32
_AMR = b"#!AMR\n" + b"\x3c" + b"\x00" * 31


def default_file(kind: str, name: str | None, msg_id: str) -> FakeFile:
    """The file a callback of ``kind`` carries when the case did not declare one."""
    if kind == "picture":
        return FakeFile(name or "image.png", "image/png", tiny_png())
    if kind == "video":
        return FakeFile(name or "video.mp4", "video/mp4", _MP4)
    if kind == "audio":
        return FakeFile(name or "voice.amr", "audio/amr", _AMR)
    text = f"lab file for message {msg_id}\n"
    return FakeFile(name or "file.txt", "text/plain", text.encode("utf-8"))


def parse_files(spec: Any) -> dict[str, FakeFile]:
    """``fixtures.files`` checked whole: ``{code: {name, type, content | base64 | fixture,
    size}}``.

    ``content`` is text (UTF-8); ``base64`` is any bytes; ``fixture`` a file's path under
    ``lab/fixtures/`` (``documents/expense-policy.pdf``); ``type: image/png`` alone makes a
    small real PNG; ``size`` pads the content with spaces (a text file of that many bytes).
    """
    if not isinstance(spec, dict):
        raise ValueError(f"files must be an object of download code -> file, got {spec!r}")
    files: dict[str, FakeFile] = {}
    for code, entry in spec.items():
        if not isinstance(code, str) or not code or not isinstance(entry, dict):
            raise ValueError(f"files[{code!r}] must be an object with name, type and content")
        unknown = sorted(set(entry) - _FILE_KEYS)
        if unknown:
            raise ValueError(f"files[{code!r}]: unknown key(s) {unknown}")
        name, mime = entry.get("name"), entry.get("type", "application/octet-stream")
        if not isinstance(name, str) or not name or not isinstance(mime, str):
            raise ValueError(f"files[{code!r}]: 'name' and 'type' must be strings")
        if len({"content", "base64", "fixture"} & set(entry)) > 1:
            raise ValueError(f"files[{code!r}]: give one of 'content', 'base64' or 'fixture'")
        if isinstance(entry.get("fixture"), str):
            data = _fixture(code, entry["fixture"])
        elif isinstance(entry.get("content"), str):
            data = entry["content"].encode("utf-8")
        elif isinstance(entry.get("base64"), str):
            try:
                data = base64.b64decode(entry["base64"], validate=True)
            except ValueError:
                raise ValueError(f"files[{code!r}]: 'base64' is not base64") from None
        elif mime == "image/png":
            data = tiny_png()
        else:
            raise ValueError(f"files[{code!r}]: give 'content' (text) or 'base64'")
        size = entry.get("size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < len(data):
                raise ValueError(f"files[{code!r}]: 'size' must be bytes >= the content's")
            data = data + b" " * (size - len(data))
        files[code] = FakeFile(name, mime, data)
    return files


def _fixture(code: str, path: str) -> bytes:
    """The bytes of a file under lab/fixtures/, never outside it."""
    target = (FIXTURES / path).resolve()
    if not target.is_relative_to(FIXTURES) or not target.is_file():
        raise ValueError(f"files[{code!r}]: 'fixture' {path!r} is no file under lab/fixtures/")
    return target.read_bytes()
