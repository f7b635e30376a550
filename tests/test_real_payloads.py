"""The real-payload corpus: published DingTalk callbacks (lab/recordings/real-payloads.jsonl,
sources in lab/recordings/SOURCES.md), each read the way a colleague would read it.

Every line is checked for what dta made of it — text, attachments, quote, decision — and
the whole recording is replayed through the pipeline against the fake DingTalk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.clock import VirtualClock
from agent.components import invocation_limits, response_policy
from agent.config import Settings
from agent.contracts import Verdict
from agent.dingtalk.callback import FRAME_TIME
from agent.dingtalk.ingest import FrameKind, parse_frame
from agent.run.invocation import InvocationBuilder
from gates.response import ResponseGate
from lab.eval.replay import read_recording, replay_frames
from storage import Store
from tests.factories import built

CORPUS = Path(__file__).resolve().parents[1] / "lab" / "recordings" / "real-payloads.jsonl"
ROBOT_USER = "$:LWCP_v1:$ROBOT_USER_0001=="
EXTERNAL = "$:LWCP_v1:$EXTERNAL_X00000=="

# msgId -> what dta must make of it. "media": (kind, part_of) of each attachment, in order;
# "quote": the quoted text (None: no text), "robot": from_robot, "missing": a reason is given.
EXPECTED: dict[str, dict[str, Any]] = {
    "msgR01": {"text": "hello", "reason": "dm"},
    "msgR02": {"text": "", "media": [("picture", "message")], "reason": "dm"},
    "msgR03": {"text": "abc", "media": [("picture", "message")], "reason": "dm"},
    "msgR04": {"text": "", "media": [("file", "message")], "file": "一种方法及装置"},
    "msgR05": {"text": "?", "reason": "dm"},
    "msgR06": {"text": "你好", "reason": "mentioned", "at": [ROBOT_USER]},
    "msgR07": {"text": "大家好", "reason": "group_not_mentioned"},
    "msgR08": {"text": "帮忙看下", "reason": "mentioned", "at": [ROBOT_USER, "0300000000000002"]},
    "msgR09": {"text": "这张图里是什么", "media": [("picture", "message")], "reason": "mentioned"},
    "msgR10": {"text": "你好", "media": [("picture", "message")]},
    "msgR11": {"text": "明天下午三点开会", "media": [("audio", "message")]},
    "msgR12": {"text": "", "media": [("video", "message")], "reason": "dm"},
    "msgR13": {"text": "当前消息", "quote": "被引用文字", "robot": False},
    "msgR14": {"text": "这个对吗", "quote": "周五前交周报", "robot": False},
    "msgR15": {"quote": None, "media": [("picture", "quote")], "missing": False},
    "msgR16": {"quote": None, "media": [("file", "quote")], "file": "report.pdf"},
    "msgR17": {"quote": None, "media": [("audio", "quote")], "missing": False},
    "msgR18": {"quote": None, "media": [("video", "quote")], "missing": False},
    "msgR19": {"quote": "@同事甲测试11111", "media": [("picture", "quote")], "robot": False},
    "msgR20": {"quote": None, "robot": True, "missing": True},
    "msgR21": {"quote": None, "robot": False, "missing": True},
    "msgR22": {"quote": None, "robot": False, "missing": True, "quote_id": "msgQ22"},
    "msgR23": {"text": "输出123", "quote": "输出123", "media": [("picture", "quote")]},
    "msgR24": {"text": "同意", "quote": "旧格式的引用", "robot": False},
    "msgR25": {"text": "在吗", "reason": "mentioned", "external": True},
    "msgR26": {"text": "7 + 5 等于多少", "reason": "dm", "frame_time": True},
    "msgR27": {"text": "", "media": [], "reason": "dm", "msgtype": "interactiveCard"},
}


def _lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]


def test_the_corpus_has_every_shape_with_its_source():
    lines = _lines()
    assert len(lines) >= 20
    ids = []
    sources = (CORPUS.parent / "SOURCES.md").read_text(encoding="utf-8")
    for line in lines:
        data = json.loads(json.loads(line["frame"])["data"])
        ids.append(data["msgId"])
        assert line["shape"] and line["source"]
        for source in line["source"].replace(" ", "").split(","):
            if source.startswith("S"):
                assert f"**{source}**" in sources, source
    assert ids == list(EXPECTED)
    types = {json.loads(json.loads(line["frame"])["data"])["msgtype"] for line in lines}
    assert {"text", "richText", "picture", "file", "video", "audio"} <= types


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "dta.db")
    yield s
    s.close()


@pytest.mark.parametrize("line", _lines(), ids=lambda line: line["shape"][:60])
def test_each_shape_is_read(line, store):
    parsed = parse_frame(line["frame"], line["received_at"])
    assert parsed.kind is FrameKind.EVENT, parsed.error
    event = parsed.event
    want = EXPECTED[event.event_id]
    if "text" in want:
        assert event.text == want["text"]
    if "media" in want:
        assert [(a["kind"], a["part_of"]) for a in event.attachments] == want["media"]
        assert all(a.get("downloadCode") for a in event.attachments)
    if "file" in want:
        assert want["file"] in [a.get("fileName") for a in event.attachments]
    if "at" in want:
        assert event.at_users == want["at"]
    if "msgtype" in want:
        assert event.msgtype == want["msgtype"]
    assert event.actor.has_staff_id is not want.get("external", False)
    if want.get("external"):
        assert event.actor.user_id == EXTERNAL
    frame_time = json.loads(line["frame"])["headers"]["time"]
    if want.get("frame_time"):
        assert event.created_at_source == FRAME_TIME
        assert event.created_at == int(frame_time) / 1000
    else:
        assert event.created_at_source is None
    quote = InvocationBuilder(
        store, VirtualClock(event.received_at), None, built(invocation_limits)
    ).quote(event)
    if "quote" in want:
        assert quote is not None
        assert quote.text == want["quote"]
        assert quote.from_robot is want.get("robot", False)
        assert (quote.missing is not None) is want.get("missing", False)
        if quote.missing and not quote.from_robot:
            assert "robot" not in quote.missing
        if "quote_id" in want:
            assert quote.msg_id == want["quote_id"]
    else:
        assert quote is None
    decision = ResponseGate(built(response_policy)).decide(event, event.received_at)
    if "reason" in want:
        assert decision.reason.value == want["reason"]
    # Nothing real that was addressed to the robot is left unanswered for its type.
    if event.addressed:
        assert decision.verdict is Verdict.ENGAGE


async def test_the_corpus_replays_through_the_pipeline(tmp_path):
    frames = read_recording(CORPUS)
    transcript = await replay_frames(frames, Settings(), tmp_path)
    engaged = [m for m, want in EXPECTED.items() if want.get("reason") != "group_not_mentioned"]
    assert len(transcript.platform) == len(engaged)  # one answer each, silence for the rest
    external = [m for m in transcript.platform if m.get("at_dingtalk_ids")]
    assert [m["at_dingtalk_ids"] for m in external] == [[EXTERNAL]]
    assert all(not m["at_all"] for m in transcript.platform)
