"""``dta run --record FILE``: every raw frame, appended as JSONL for ``dta lab replay``.

Session-webhook tokens are masked on the way in: a recording is for reproducing what
happened, and the replay re-points webhooks at the fake anyway.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agent.logs import redact


class FrameRecorder:
    def __init__(self, path: Path, secrets: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8", buffering=1)  # a line per frame, flushed
        self._secrets = secrets
        self._lock = threading.Lock()

    def __call__(self, raw: str, received_at: float) -> None:
        line = json.dumps(
            {"received_at": received_at, "frame": redact(raw, self._secrets)}, ensure_ascii=False
        )
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()
