"""``dta run --record FILE``: every raw frame, appended as JSONL for ``dta lab replay``.

Session-webhook tokens are masked on the way in: a recording is for reproducing what
happened, and the replay re-points webhooks at the fake anyway.

A recording is evidence, never a reason to stop ingest: a write that fails (disk full, a
file closed under us) is counted and logged without flooding the log, and the recorder
never raises to its caller. The file is written unbuffered, so a failed write leaves
nothing behind to be flushed later; a line cut short by one is ended before the next line,
so one torn line never swallows the frames after it.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from agent.logs import FailureLog, redact

log = logging.getLogger("dta.recorder")


class FrameRecorder:
    def __init__(self, path: Path, secrets: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("ab", buffering=0)
        self._secrets = secrets
        self._lock = threading.Lock()
        self._torn = False  # the last write may have left part of a line
        self._failures = FailureLog(log, "frame recorder failed; frames are still ingested")

    @property
    def failures(self) -> int:
        """Frames that could not be recorded (for metrics); ingest went on regardless."""
        return self._failures.failures

    def __call__(self, raw: str | bytes, received_at: float) -> None:
        """Append one frame. Never raises: the caller is about to store and ack it."""
        try:
            line = self._line(raw, received_at)
            with self._lock:
                self._write(("\n" if self._torn else "") + line + "\n")
        except Exception as exc:
            self._failures.failed(exc)
        else:
            self._failures.succeeded()

    def _line(self, raw: str | bytes, received_at: float) -> str:
        item: dict[str, object] = {"received_at": received_at}
        if isinstance(raw, bytes):
            # Not UTF-8 (or over the size limit): a readable, redactable form, marked as such.
            # Base64 would keep it faithfully, but could carry a secret past redaction.
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", errors="replace")
                item["not_utf8"] = True
        else:
            text = raw
        item["frame"] = redact(text, self._secrets)
        return json.dumps(item, ensure_ascii=False)

    def _write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        self._torn = True
        while data:
            written = self._file.write(data)
            if not written:
                raise OSError("the recording file took no bytes")
            data = data[written:]
        self._torn = False

    def close(self) -> None:
        with self._lock:
            self._file.close()
