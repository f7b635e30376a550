"""No secret reaches a log line or a recording."""

import io
import json
import logging

import pytest

from agent.daemon.recorder import FrameRecorder
from agent.logs import JsonFormatter, RedactingFilter, redact

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


TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    "line",
    [
        f"x-acs-dingtalk-access-token: {TOKEN}",
        f"X-Acs-Dingtalk-Access-Token={TOKEN}",
        f"GET https://oapi.dingtalk.com/topapi/v2/user/get?access_token={TOKEN}&lang=zh",
        f'{{"accessToken": "{TOKEN}", "expireIn": 7200}}',
        f'{{"accessToken":"{TOKEN}"}}',
        f'{{"access_token": "{TOKEN}"}}',
        f"{{'accessToken': '{TOKEN}'}}",
        json.dumps({"data": json.dumps({"accessToken": TOKEN})}),  # JSON inside a JSON string
        f"headers=[(b'x-acs-dingtalk-access-token', b'{TOKEN}')]",
        f"AccessToken={TOKEN}",
        f"params=access_token%3D{TOKEN}",
    ],
)
def test_access_token_masked_in_every_shape(line):
    masked = redact(line, [])
    assert TOKEN not in masked and "***" in masked


def test_token_names_without_a_value_are_left_alone():
    text = "refreshing accessTokenExpiry; access_token missing; accessToken: null"
    assert redact(text, []) == text


def test_camel_case_token_masked_through_the_log_filter():
    """Under a token's name in a dict, and when only the rendered message shows it."""
    logger, stream = capture()
    logger.info(
        "token answer",
        extra={
            "body": {"accessToken": TOKEN, "expireIn": 7200},
            "headers": {"X-Acs-Dingtalk-Access-Token": "short"},
            "raw": f'"accessToken":"{TOKEN}"',
        },
    )
    logger.info('got {"accessToken": "%s"}', TOKEN)
    text = stream.getvalue()
    assert TOKEN not in text and "short" not in text
    first = json.loads(text.splitlines()[0])
    assert first["body"] == {"accessToken": "***", "expireIn": 7200}
