"""``dta trace`` names the right one of the four "no reply" causes from the stored chain."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli.main import main
from agent.cli.trace import Cause, Query, search, trace_message
from agent.cli.trace_text import parse_when, render
from agent.contracts import RunState
from lab.eval.cases import Case, load_case
from lab.eval.runner import LAB_EPOCH, CaseRun
from storage import Store


def case(steps: list[dict[str, Any]], **extra: Any) -> Case:
    return Case.model_validate(
        {
            "schema": "dta.lab.case/1",
            "id": "trace",
            "category": "platform-reliability",
            "title": "trace",
            "steps": steps,
            "expect": {"processed": [s["send"]["msg"] for s in steps if "send" in s][:1]},
            **extra,
        }
    )


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store with each kind of story: answered, gate-silent, failed, uncertain, bad frame."""
    workdir = tmp_path_factory.mktemp("trace")
    steps = [
        {"at": 0, "send": {"msg": "dm1", "from": "u1", "text": "7 + 5 等于多少？"}},
        {"at": 1, "send": {"msg": "g1", "from": "u2", "group": "cid-g", "text": "大家好"}},
        {"at": 2, "fault": {"webhook": {"timeout": True, "times": 1}}},
        {"at": 2, "fault": {"openapi": {"timeout": True, "times": 9}}},
        {"at": 3, "send": {"msg": "dm2", "from": "u3", "text": "1 + 1 等于多少？"}},
        {"at": 4, "frame": '{"not": "a callback", "msgId": "bad1"}'},
        # three lines at once: the first two are answered together with the last
        {"at": 5, "send": {"msg": "b1", "from": "u4", "text": "帮我算一下"}},
        {"at": 5, "send": {"msg": "b2", "from": "u4", "text": "就是那个数"}},
        {"at": 5, "send": {"msg": "b3", "from": "u4", "text": "(3+4)×6"}},
    ]
    done = asyncio.run(CaseRun(case(steps), workdir).run())
    assert done.error is None, done.error
    return workdir / "dta.db"


@pytest.fixture
def store(store_path: Path):
    with Store(store_path) as opened:
        yield opened


def test_an_answered_message_shows_its_whole_chain(store):
    trace = trace_message(store, "dm1")
    assert trace.cause is Cause.ANSWERED
    assert trace.decision["verdict"] == "engage" and trace.decision["reason"] == "dm"
    assert trace.decision["checked"][-1] == "engage"
    assert trace.run["state"] == "done" and trace.run["provider"] == "rules"
    assert trace.intents and trace.intents[0]["attempts"][0]["outcome"] == "accepted"
    assert any(r["status"] == "accepted" for r in trace.receipts)
    text = "\n".join(render(trace))
    assert "cause: answered" in text and "12" in text and "receipt reply: accepted" in text


def test_a_group_line_without_an_at_is_silent_by_the_gate_a_pass(store):
    trace = trace_message(store, "g1")
    assert trace.cause is Cause.SILENT_BY_GATE
    assert "group_not_mentioned" in trace.summary and "@" in trace.summary
    assert "nothing is broken" in trace.next_step
    assert not trace.intents


def test_an_uncertain_send_is_uncertain_to_look_at_never_called_failed(store):
    trace = trace_message(store, "dm2")
    assert trace.cause is Cause.UNCERTAIN, trace.summary
    assert "may or may not" in trace.summary and "look in the conversation" in trace.next_step
    assert any(r["status"] == "uncertain" for r in trace.receipts)


def test_a_done_run_whose_answer_went_is_answered_though_a_prompt_is_in_doubt():
    from agent.cli.trace_cause import classify
    from tests.factories import event, run_for

    run = run_for(event()).model_copy(update={"state": RunState.DONE})
    receipts = [
        {"kind": "confirm", "status": "uncertain"},
        {"kind": "act", "status": "verified"},
        {"kind": "reply", "status": "accepted"},
    ]
    cause, summary = classify({}, None, run, receipts, [], [])
    assert cause is Cause.ANSWERED and "the confirm is uncertain" in summary
    receipts[2]["status"] = "uncertain"  # the answer itself in doubt
    assert classify({}, None, run, receipts, [], [])[0] is Cause.UNCERTAIN


def test_a_message_answered_together_with_a_later_one_says_so_and_names_it(store):
    for msg_id in ("b1", "b2"):
        trace = trace_message(store, msg_id)
        assert trace.run["state"] == "interrupted"
        assert trace.cause is Cause.ANSWERED, trace.summary
        assert "answered together with the later message b3" in trace.summary
        assert "(3+4)×6" in trace.summary
    assert trace_message(store, "b3").cause is Cause.ANSWERED


def test_an_unknown_message_never_arrived_and_a_quarantined_one_says_why(store):
    assert trace_message(store, "nope").cause is Cause.NEVER_ARRIVED
    bad = trace_message(store, "bad1")
    assert bad.cause is Cause.NEVER_ARRIVED and "quarantined" in bad.summary


def test_search_by_conversation_sender_text_and_window(store):
    assert [t.msg_id for t in search(store, Query(conversation="cid-g"))] == ["g1"]
    assert [t.msg_id for t in search(store, Query(sender="u1"))] == ["dm1"]
    assert [t.msg_id for t in search(store, Query(text="1 + 1"))] == ["dm2"]
    window = search(store, Query(since=LAB_EPOCH + 0.5, until=LAB_EPOCH + 1.5))
    assert [t.msg_id for t in window] == ["g1"]
    assert search(store, Query(text="100%_")) == []


def test_parse_when_reads_what_people_type():
    now = 1_000_000.0
    assert parse_when("15m", now) == now - 900
    assert parse_when("2h", now) == now - 7200
    assert parse_when("12345.5", now) == 12345.5
    assert parse_when("2026-01-31T09:30") > 0
    with pytest.raises(ValueError, match="not a time"):
        parse_when("yesterday-ish", now)


def test_the_command_prints_text_and_json(store_path, capsys):
    assert main(["--config", "/dev/null", "trace", "--store", str(store_path), "g1"]) == 0
    out = capsys.readouterr().out
    assert "cause: silent_by_gate" in out
    assert "decision: silent (group_not_mentioned); checked" in out
    assert "'" not in out.split("text:")[0], "no Python reprs"
    assert main(["trace", "--store", str(store_path), "--json", "--sender", "u1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "dta.trace/1"
    assert document["matches"][0]["cause"] == "answered"
    assert main(["trace", "--store", str(store_path), "missing-id"]) == 1
    assert "never_arrived" in capsys.readouterr().out


def test_trace_needs_something_to_look_for(store_path, capsys):
    assert main(["trace", "--store", str(store_path)]) == 2
    assert "msgId" in capsys.readouterr().err
    assert main(["trace", "--store", str(store_path), "--since", "soonish"]) == 2
    assert "not a time" in capsys.readouterr().err


APPROVAL_CASE = Path(__file__).resolve().parents[1] / (
    "lab/cases/workspace-and-artifacts/acts/colleague-todo-waits-for-the-askers-click.json"
)


@pytest.fixture(scope="module")
def acted_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A to-do for a colleague, approved on its card, created and read back."""
    workdir = tmp_path_factory.mktemp("trace-acts")
    done = asyncio.run(CaseRun(load_case(APPROVAL_CASE), workdir).run())
    assert done.passed, (done.error, [str(p) for p in done.problems])
    return workdir / "dta.db"


def test_an_acts_line_says_its_outcome_and_reads_its_arguments(acted_path):
    with Store(acted_path) as opened:
        trace = trace_message(opened, "m1")
    text = "\n".join(render(trace))
    assert "  act dingtalk.todo.create 「整理发票」 → done, read back" in text
    assert "    主题: 整理发票" in text and "    执行人: 张三" in text
    assert "approved by 李四" in text and "for 张三 (others) → done, read back" in text
    assert "\\u" not in text and "['" not in text and '["' not in text, "no reprs, no JSON"
    assert '{"subject"' not in text
    assert "received 2026-01-01 08:00:00 +08:00" in text, "in the default zone, Asia/Shanghai"


def test_the_json_keeps_the_raw_arguments_and_adds_the_outcome(acted_path, capsys):
    argv = ["--config", "/dev/null", "trace", "--store", str(acted_path), "--json", "m1"]
    assert main(argv) == 0
    match = json.loads(capsys.readouterr().out)["matches"][0]
    (act,) = [i for i in match["intents"] if i["kind"] == "act"]
    assert act["tool"] == "dingtalk.todo.create"
    assert act["arguments"] == {"subject": "整理发票", "executors": ["u2"]}
    assert act["outcome"] == "verified" and act["outcome_words"] == "done, read back"
    (approval,) = match["approvals"]
    assert approval["outcome"] == "verified" and approval["names"]["u2"] == "张三"
    assert match["event"]["received_at"] == "2026-01-01 08:00:00 +08:00"


def test_trace_times_are_in_the_configured_zone(acted_path, tmp_path, capsys):
    config = tmp_path / "dta.toml"
    config.write_text('timezone = "Europe/Berlin"\n')
    assert main(["--config", str(config), "trace", "--store", str(acted_path), "m1"]) == 0
    out = capsys.readouterr().out
    assert "received 2026-01-01 01:00:00 +01:00" in out and "+08:00" not in out
    with Store(acted_path) as opened:
        assert trace_message(opened, "m1", "UTC").event["received_at"].endswith(" +00:00")
