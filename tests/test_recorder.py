"""The ``--record`` writer: a recording is evidence, never a reason to stop ingest.

The connector calls the recorder before storing and acking each frame, so a recorder that
raised would drop every delivery. These pin that it never raises, counts its failures, logs
them without flooding, and keeps the recording readable around a failure.
"""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

from agent.daemon.recorder import FrameRecorder
from agent.logs import FailureLog
from lab.eval.replay import read_recording
from tests.environment import unavailable

DEV_FULL = Path("/dev/full")


def test_a_full_disk_is_counted_not_raised(caplog) -> None:
    if not DEV_FULL.exists():
        unavailable("needs /dev/full (Linux)")
    recorder = FrameRecorder(DEV_FULL, [])
    with caplog.at_level(logging.WARNING, logger="dta.recorder"):
        for n in range(50):
            recorder('{"type": "SYSTEM"}', float(n))
    recorder.close()
    assert recorder.failures == 50
    warnings = [r for r in caplog.records if r.name == "dta.recorder"]
    assert len(warnings) == 1 and warnings[0].error == "OSError"  # the first, not fifty


def test_a_closed_file_is_counted_not_raised(tmp_path) -> None:
    recorder = FrameRecorder(tmp_path / "rec.jsonl", [])
    recorder.close()
    recorder("{}", 1.0)
    recorder.close()  # twice is fine
    assert recorder.failures == 1


class _FlakyFile:
    """Takes part of the first line and then fails, as a disk filling up mid-write does."""

    def __init__(self, real, fail_after: int) -> None:
        self.real, self.fail_after, self.calls = real, fail_after, 0

    def write(self, data) -> int:
        self.calls += 1
        if self.calls == 1:
            return self.real.write(bytes(data[: self.fail_after]))
        if self.calls == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.real.write(data)

    def close(self) -> None:
        self.real.close()


def test_a_torn_line_does_not_swallow_the_next_frame(tmp_path) -> None:
    path = tmp_path / "rec.jsonl"
    recorder = FrameRecorder(path, [])
    recorder._file = _FlakyFile(recorder._file, fail_after=10)  # type: ignore[assignment]
    recorder('{"n": 1}', 1.0)
    recorder('{"n": 2}', 2.0)
    recorder.close()
    assert recorder.failures == 1
    torn, kept = path.read_text().splitlines()
    assert len(torn) == 10 and json.loads(kept) == {"received_at": 2.0, "frame": '{"n": 2}'}


def test_bytes_are_recorded_readably_and_redacted(tmp_path) -> None:
    path = tmp_path / "rec.jsonl"
    recorder = FrameRecorder(path, ["s3cret-value"])
    recorder(b'{"text": "s3cret-value \xff"}', 1.0)
    recorder('{"ok": "好"}'.encode(), 2.0)
    recorder.close()
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert first["not_utf8"] is True and "s3cret-value" not in first["frame"]
    assert "\ufffd" in first["frame"]
    assert second == {"received_at": 2.0, "frame": '{"ok": "好"}'}
    assert [f.raw for f in read_recording(path)] == [first["frame"], second["frame"]]


def test_failure_log_summarises_once_per_interval(caplog) -> None:
    now = [0.0]
    failures = FailureLog(logging.getLogger("dta.test"), "sink failed", 60.0, lambda: now[0])
    with caplog.at_level(logging.INFO, logger="dta.test"):
        for second in range(0, 150):
            now[0] = float(second)
            failures.failed(OSError("disk full"))
        failures.succeeded()
        failures.succeeded()
    lines = [(r.levelname, getattr(r, "since_last_log", None)) for r in caplog.records]
    assert lines == [("WARNING", 1), ("WARNING", 60), ("WARNING", 60), ("INFO", None)]
    assert failures.failures == 150
