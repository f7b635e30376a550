"""``dta lab replay``: a recording is driven through the pipeline against the fake."""

import io
import json
from pathlib import Path

from lab.eval.replay import RecordingError, read_recording, replay

SAMPLE = Path(__file__).resolve().parents[1] / "lab" / "recordings" / "sample.jsonl"


def test_sample_recording_replays_with_dedupe_and_quarantine():
    out = io.StringIO()
    assert replay(SAMPLE, out=out) == 0
    text = out.getvalue()
    assert "frame quarantined (not_json)" in text
    assert "r1 from u1 in dm cid-dm-u1: “7 + 5 等于多少” (delivered 2x)" in text
    assert "decision: silent (group_not_mentioned)" in text
    assert text.count("platform got via") == 2
    assert "to cid-ops @u2: “(3 + 4) × 6 = 42”" in text
    # the recorded webhooks pointed at DingTalk; the replay re-pointed them at the fake
    assert "oapi.dingtalk.com" not in text


def test_bad_recording_is_refused_with_line_number(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"received_at": 1, "frame": "{}"}) + "\nnot json\n")
    try:
        read_recording(path)
    except RecordingError as exc:
        assert f"{path}:2" in str(exc)
    else:
        raise AssertionError("expected RecordingError")
    out = io.StringIO()
    assert replay(path, out=out) == 2
    assert "cannot replay" in out.getvalue()
