"""No secret reaches a log line or a recording."""

import io
import json
import logging

from agent.logs import JsonFormatter, RedactingFilter, redact
from agent.recorder import FrameRecorder

SECRET = "s3cr3t-app-secret-value"


def capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter([SECRET]))
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("dta.test-logs")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_secret_masked_in_message_args_extra_and_exception():
    logger, stream = capture()
    logger.info("posting with %s", SECRET, extra={"run_id": "run_1", "body": {"k": SECRET}})
    try:
        raise ValueError(f"bad secret {SECRET}")
    except ValueError:
        logger.exception("failed")
    text = stream.getvalue()
    assert SECRET not in text
    first, second = (json.loads(line) for line in text.splitlines() if line.startswith("{"))
    assert first["run_id"] == "run_1" and first["body"] == {"k": "***"}
    assert first["msg"] == "posting with ***"
    assert "bad secret ***" in second["exc"]


def test_webhook_session_and_tokens_masked():
    line = redact(
        "POST https://oapi.dingtalk.com/robot/sendBySession?session=abcdef123 "
        "x-acs-dingtalk-access-token: tok_1234567890",
        [],
    )
    assert "abcdef123" not in line and "tok_1234567890" not in line


def test_recorder_masks_sessions_and_keeps_frames_parseable(tmp_path):
    path = tmp_path / "rec.jsonl"
    recorder = FrameRecorder(path, [SECRET])
    inner = json.dumps(
        {
            "sessionWebhook": "https://h/robot/sendBySession?session=zzz999",
            "text": {"content": SECRET},
        }
    )
    recorder(json.dumps({"type": "CALLBACK", "data": inner}), 1.5)
    recorder.close()
    (line,) = path.read_text().splitlines()
    item = json.loads(line)
    data = json.loads(json.loads(item["frame"])["data"])
    assert item["received_at"] == 1.5
    assert "zzz999" not in line and SECRET not in line
    assert data["sessionWebhook"].endswith("session=***")
