"""What `dta dev` prints per message: each outbound form says what it is, and idle beats
are counted rather than printed."""

from __future__ import annotations

from agent.cli.trace import Cause, Trace
from agent.cli.trace_records import form_of
from lab.dev.view import Watcher, idle_own_event, intent_line, story


def _intent(kind: str, msgtype: str | None, text: str) -> dict:
    return {
        "kind": kind,
        "msgtype": msgtype,
        "form": form_of(kind, msgtype),
        "target": "cid-dm-u1",
        "text": text,
        "chunk": "1/1",
        "attempts": [{"outcome": "accepted"}],
    }


def _trace(msg_id: str, sender: str, intents: list[dict]) -> Trace:
    event = {"sender": sender, "conversation": "cid-dm-u1", "scene": "dm", "text": "hi"}
    return Trace(msg_id, Cause.ANSWERED, "", "", event=event, intents=intents)


def test_an_act_a_card_and_a_reaction_are_not_printed_as_words():
    act = _intent("act", None, "act dingtalk.todo.create 「周五前交季度报告」 → done, read back")
    assert intent_line(act) == "  act dingtalk.todo.create 「周五前交季度报告」 → done, read back"
    card = intent_line(_intent("confirm", "approval", "需要你确认"))
    assert card.startswith("  approval card → cid-dm-u1: ")
    reaction = intent_line(_intent("ack", "reaction", "🤔 — recalled (1 try)"))
    assert reaction == "  reaction on the message: 🤔 — recalled (1 try)"
    words = intent_line(_intent("reply", "text", "7 + 5 = 12"), " @u1")
    assert words == "  robot → cid-dm-u1 @u1: 7 + 5 = 12"
    lines = story(_trace("m1", "u1", [act]))
    assert not any("robot →" in line for line in lines)


def test_idle_heartbeats_are_counted_not_printed_unless_verbose(tmp_path):
    said: list[str] = []
    idle = _trace("beat:123", "dta-heartbeat", [])
    busy = _trace("beat:124", "dta-heartbeat", [_intent("reply", "text", "提醒：开会")])
    assert idle_own_event(idle) and not idle_own_event(busy)
    assert not idle_own_event(_trace("m2", "u1", []))  # a person's silence is shown
    watcher = Watcher(tmp_path / "none.db", said.append)
    watcher._count_idle()
    watcher._count_idle()
    assert watcher.idle == 2
    assert len(said) == 1 and "--verbose" in said[0]  # said once, not per beat


def _args(**given):
    from argparse import Namespace

    base = dict(file=None, picture=None, richtext=None, quote=None)
    return Namespace(**{**base, **given})


def test_media_go_as_dingtalks_own_types_and_bad_ones_are_said(tmp_path):
    import base64

    import pytest

    from lab.dev.media import prompt_argv, shape_send
    from lab.fake.files import parse_files, tiny_png

    png = tmp_path / "chart.png"
    png.write_bytes(tiny_png())
    doc = tmp_path / "notes.txt"
    doc.write_text("周五截止", encoding="utf-8")

    send, files = shape_send({"msg": "d1", "from": "u1", "text": ""}, _args(file=doc))
    assert send["msgtype"] == "file" and send["attach"] == ["dev-d1"]
    served = parse_files(files)["dev-d1"]
    assert served.name == "notes.txt" and served.data == "周五截止".encode()
    send, _ = shape_send({"msg": "d2", "from": "u1", "text": ""}, _args(picture=png))
    assert send["msgtype"] == "picture"
    send, files = shape_send({"msg": "d3", "from": "u1", "text": "看图"}, _args(picture=png))
    assert send["msgtype"] == "richText"  # a picture with words is one richText message
    assert base64.b64decode(files["dev-d3"]["base64"]) == png.read_bytes()
    send, files = shape_send({"msg": "d4", "from": "u1", "text": "这个呢"}, _args(quote="d1"))
    assert send["quote"] == {"msg": "d1"} and "msgtype" not in send and files == {}
    for wrong, said in (
        (_args(picture=doc), "not a picture"),
        (_args(file=tmp_path / "missing.pdf"), "no such file"),
        (_args(file=doc, picture=png), "one of"),
        (_args(richtext=png), "needs words"),
    ):
        with pytest.raises(ValueError, match=said):
            shape_send({"msg": "d5", "from": "u1", "text": ""}, wrong)
    with pytest.raises(ValueError, match="goes alone"):
        shape_send({"msg": "d6", "from": "u1", "text": "看看"}, _args(file=doc))
    assert prompt_argv("/quote dev-1 这个文件说了什么") == ["--quote", "dev-1", "这个文件说了什么"]
    assert prompt_argv("/richtext a.png 看图") == ["--richtext", "a.png", "看图"]
    assert prompt_argv("你好") is None and prompt_argv("/quote dev-1") is None


def test_what_the_robot_sends_as_a_file_is_saved_once(tmp_path):
    from types import SimpleNamespace

    from lab.dev.media import SentBack

    upload = SimpleNamespace(name="report.csv", data=b"a,b\n1,2\n")
    message = SimpleNamespace(media_id="@lA1", msgtype="file")
    words = SimpleNamespace(media_id=None, msgtype="text")
    platform = SimpleNamespace(received=[words, message], media={"@lA1": upload})
    saved = SentBack(platform, tmp_path)
    lines = saved.new_lines()
    assert len(lines) == 1 and "report.csv" in lines[0]
    path = tmp_path / "received" / "001-report.csv"
    assert path.read_bytes() == b"a,b\n1,2\n" and str(path) in lines[0]
    assert saved.new_lines() == []  # each once
