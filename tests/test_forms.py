"""Ask-user forms: the contract a provider's ``ask`` carries (agent/contracts/forms.py), the
values checked and the numbered reply read (gates/form_values.py), the store's rows on both
engines (storage/forms.py), the clicks decided (agent/acts/forms.py), the asker's text reply
(agent/run/form_replies.py) and what the action gate makes of an ask with a form."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent.acts.clicks import ClickDesk
from agent.acts.forms import ERROR, NOTICE, ONLY_THE_ASKER, FormDesk
from agent.clock import VirtualClock
from agent.components import action_policy
from agent.contracts import (
    ActionKind,
    ActionRequest,
    CardClick,
    FormRecord,
    FormSpec,
    form_event_id,
    form_id_for,
)
from agent.run.form_replies import FormReplies
from gates.action import ActionFacts, ActionGate, RunTally
from gates.form_values import check_values, parse_reply, prompt_lines
from tests.factories import ROBOT, T0, built, event, run_for

FIELDS: list[dict[str, Any]] = [
    {"name": "name", "label": "姓名"},
    {"name": "days", "label": "天数", "type": "number"},
    {"name": "start", "label": "开始日期", "type": "date"},
    {
        "name": "kind",
        "label": "假别",
        "type": "single",
        "options": [{"value": "annual", "text": "年假"}, {"value": "sick", "text": "病假"}],
    },
    {
        "name": "notify",
        "label": "通知",
        "type": "multi",
        "required": False,
        "options": [{"value": "boss", "text": "主管"}, {"value": "hr", "text": "人事"}],
    },
]
SPEC = FormSpec.model_validate({"fields": FIELDS})
GOOD = {"name": "张三", "days": "3", "start": "2026-01-05", "kind": "annual"}
TYPED = {"name": "张三", "days": 3, "start": "2026-01-05", "kind": "annual"}


# ------------------------------------------------------------------ the contract


def test_an_ask_may_carry_a_form_and_only_an_ask():
    ask = ActionRequest.model_validate(
        {"kind": "ask", "text": "请填写", "form": {"fields": FIELDS}}
    )
    assert ask.form is not None and [f.type for f in ask.form.fields][1] == "number"
    with pytest.raises(ValidationError, match="only an ask carries a form"):
        ActionRequest.model_validate({"kind": "reply", "text": "好", "form": {"fields": FIELDS}})
    with pytest.raises(ValidationError):  # the question's words are still required
        ActionRequest.model_validate({"kind": "ask", "form": {"fields": FIELDS}})


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ([{"name": "a", "label": "A"}, {"name": "a", "label": "B"}], "unique"),
        ([{"name": "a", "label": "A", "options": [{"value": "x", "text": "X"}]}], "only a choice"),
        ([{"name": "a", "label": "A", "type": "single"}], "needs its options"),
        ([{"name": f"f{i}", "label": "F"} for i in range(11)], "at most 10"),
        ([], "at least 1"),
        ([{"name": "bad name", "label": "A"}], "pattern"),
        ([{"name": "a", "label": "A", "type": "file"}], "literal"),
    ],
)
def test_a_form_is_validated(fields, problem):
    with pytest.raises(ValidationError, match=problem):
        FormSpec.model_validate({"fields": fields})


# ------------------------------------------------------------------ values, checked


def test_good_values_come_back_typed_in_every_shape_a_card_sends():
    shapes = {**GOOD, "days": 3, "kind": {"index": 0, "value": "annual"}, "notify": ["boss"]}
    check = check_values(SPEC, shapes)
    assert check.ok and check.values == {**TYPED, "notify": ["boss"]}
    # an option by its text, a date in other spellings, a multi as one line
    other = {**GOOD, "kind": "年假", "start": "2026年1月5日", "notify": "主管，人事"}
    assert check_values(SPEC, other).values == {**TYPED, "notify": ["boss", "hr"]}
    assert check_values(SPEC, {**GOOD, "start": 1767571200000}).values["start"] == "2026-01-05"
    assert check_values(SPEC, {**GOOD, "days": "1.5"}).values["days"] == 1.5


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({**GOOD, "days": "abc"}, "days", "「天数」须为数字"),
        ({k: v for k, v in GOOD.items() if k != "name"}, "name", "「姓名」是必填项"),
        ({**GOOD, "name": "  "}, "name", "必填"),
        ({**GOOD, "kind": "maternity"}, "kind", "没有「maternity」这个选项"),
        ({**GOOD, "kind": ["annual", "sick"]}, "kind", "只能选一项"),
        ({**GOOD, "start": "next monday"}, "start", "须为日期"),
        ({**GOOD, "start": "2026-02-30"}, "start", "须为日期"),
        ({**GOOD, "extra": "x"}, "extra", "表单没有这一项：extra"),
        ({**GOOD, "days": True}, "days", "须为数字"),
    ],
)
def test_a_bad_value_names_its_field(values, field, words):
    check = check_values(SPEC, values)
    assert not check.ok and field in check.problems
    assert words in check.problems[field]
    assert words in check.said() or field == "extra"  # an unknown key is said after the fields


def test_the_numbered_reply_is_read_by_number_in_order_or_with_labels():
    numbered = parse_reply(SPEC, "1. 张三\n2、3\n3：2026/1/5\n4) 年假\n5. 主管、人事")
    assert numbered.ok and numbered.values == {**TYPED, "notify": ["boss", "hr"]}
    in_order = parse_reply(SPEC, "张三\n3\n2026-01-05\n年假")
    assert in_order.ok and in_order.values == TYPED
    labelled = parse_reply(SPEC, "姓名：张三\n天数: 3\n开始日期：2026-01-05\n假别：病假")
    assert labelled.values["kind"] == "sick" and labelled.values["name"] == "张三"
    short = parse_reply(SPEC, "1. 张三\n2. 三天")
    assert not short.ok and short.said().startswith("「天数」须为数字")
    assert "另有 2 处" in short.said()  # the date and the kind are missing too


def test_the_numbered_question_says_each_field_and_its_kind():
    text = prompt_lines(SPEC)
    assert text.splitlines() == [
        "请回复以下内容（每行一项）：",
        "1. 姓名（必填）",
        "2. 天数（必填；数字）",
        "3. 开始日期（必填；日期，如 2025-01-31）",
        "4. 假别（必填；选一项：年假/病假）",
        "5. 通知（可多选：主管/人事）",
    ]
    assert prompt_lines(SPEC, english=True).startswith("Please reply")


# ------------------------------------------------------------------ the store


def _record(ev_id: str = "m1", user: str = "u1", at: float = T0, **changes: Any) -> FormRecord:
    ev = event(msg_id=ev_id, user=user)
    return FormRecord(
        form_id=form_id_for(ev_id),
        event_id=ev_id,
        run_id=f"run_{ev_id}",
        thread_key=ev.thread_key,
        asker_id=user,
        conversation_id=ev.conversation.id,
        question="请假需要这些信息：",
        spec=SPEC,
        created_at=at,
        expires_at=at + 60,
        **changes,
    )


def test_forms_are_kept_one_live_per_thread_and_decided_once(store):
    first = _record("m1")
    assert store.forms.open_form(first) == []
    assert store.forms.open_form(first) == []  # a re-executed run finds its own
    second = _record("m2", at=T0 + 1, asked_with="card")
    cancelled = store.forms.open_form(second)
    assert [(f.form_id, f.status) for f in cancelled] == [(first.form_id, "cancelled")]
    assert store.forms.get_form(first.form_id).status == "cancelled"
    assert store.forms.pending_text_form(second.thread_key) is None  # asked on a card
    store.forms.set_form_asked(second.form_id, second.form_id, "card")
    assert store.forms.form_by_track(second.form_id).form_id == second.form_id
    assert [f.form_id for f in store.forms.due_forms(T0 + 61)] == [second.form_id]
    submitted = second.model_copy(
        update={
            "status": "submitted",
            "values": TYPED,
            "submitted_by": "u1",
            "answer_event_id": form_event_id(second.form_id),
            "decided_at": T0 + 5,
        }
    )
    assert store.forms.decide_form(submitted)
    assert not store.forms.decide_form(submitted.model_copy(update={"status": "expired"}))
    answered = store.forms.answered_by(form_event_id(second.form_id))
    assert answered is not None and answered.values == TYPED
    assert [f.form_id for f in store.forms.unsettled_forms()] == [second.form_id]
    assert store.forms.due_forms(T0 + 1000) == []
    assert [f.event_id for f in store.forms.all()] == ["m1", "m2"]


# ------------------------------------------------------------------ clicks


def _click(frame: str, by: str, values: dict[str, Any] | None = None, action: str = "submit"):
    return CardClick(
        frame_id=frame,
        out_track_id=form_id_for("m1"),
        user_id=by,
        action=action,
        received_at=T0 + 1,
        values=values or {},
    )


@pytest.fixture
def desk(store):
    ev = event(msg_id="m1", user="u1", group="cid-g1", at_bot=True)
    store.events.add_event(ev, ev.to_json())
    store.work.open_run(run_for(ev))
    record = _record(user="u1", asked_with="card").model_copy(
        update={"thread_key": ev.thread_key, "conversation_id": ev.conversation.id}
    )
    store.forms.open_form(record)
    store.forms.set_form_asked(record.form_id, record.form_id, "card")
    return FormDesk(store, VirtualClock(T0 + 1))


def _private(answer) -> dict[str, str]:
    return answer.response["userPrivateData"]["cardParamMap"]


def test_only_the_askers_valid_submit_counts_and_only_once(store, desk):
    clicks = ClickDesk(store, None, forms=desk)
    stranger = clicks.receive(_click("f1", "u2", GOOD))
    assert _private(stranger) == {"form_notice": ONLY_THE_ASKER} and stranger.event is None
    bad = clicks.receive(_click("f2", "u1", {**GOOD, "days": "abc"}))
    assert _private(bad)[ERROR] == "「天数」须为数字" and bad.event is None
    assert store.forms.get_form(form_id_for("m1")).status == "pending"
    good = clicks.receive(_click("f3", "u1", GOOD))
    assert good.response["cardData"]["cardParamMap"] == {"card_status": "submitted"}
    assert good.event is not None and good.event.event_id == form_event_id(form_id_for("m1"))
    assert good.event.scheduled.form_id == form_id_for("m1") and good.generation >= 1
    stored = store.events.get_event(good.event.event_id)
    assert stored is not None and stored.actor.user_id == "u1"
    again = clicks.receive(_click("f4", "u1", {**GOOD, "days": "9"}))
    assert _private(again) == {NOTICE: "已提交"} and again.event is None
    redelivered = clicks.receive(_click("f3", "u1", GOOD))  # the same frame once more
    assert "cardData" not in redelivered.response and redelivered.event is None
    record = store.forms.get_form(form_id_for("m1"))
    assert (record.status, record.values, record.submitted_by) == ("submitted", TYPED, "u1")


def test_a_cancel_ends_the_form_and_a_late_press_finds_it_expired(store, desk):
    cancel = desk.click(_click("f1", "u1", action="cancel_form"))
    assert cancel is not None and cancel.response["cardData"]["cardParamMap"] == {
        "card_status": "cancelled"
    }
    assert store.forms.get_form(form_id_for("m1")).status == "cancelled"
    other = _record("m1").model_copy(update={"form_id": "form_x", "expires_at": T0})
    store.forms.open_form(other)
    store.forms.set_form_asked("form_x", "form_x", "card")
    late = desk.click(_click("f2", "u1", GOOD).model_copy(update={"out_track_id": "form_x"}))
    assert late is not None and _private(late) == {NOTICE: "已过期"}
    assert store.forms.get_form("form_x").status == "expired"
    assert desk.click(_click("f3", "u1").model_copy(update={"out_track_id": "apv_1"})) is None


def test_expiry_ends_pending_forms_past_their_time(store, desk):
    desk.clock.advance_to(T0 + 120)  # type: ignore[attr-defined]
    assert desk.expire_due() == 1
    record = store.forms.get_form(form_id_for("m1"))
    assert record.status == "expired" and record.answer_event_id == form_event_id(record.form_id)
    assert store.events.get_event(record.answer_event_id) is not None
    assert desk.expire_due() == 0


# ------------------------------------------------------------------ the text reply


def test_the_askers_numbered_reply_submits_the_form_and_a_bad_one_is_told(store):
    record = _record("m1", user="u1")
    store.forms.open_form(record)
    replies = FormReplies(store, VirtualClock(T0 + 5))
    assert replies.take(event(msg_id="m2", user="u2", text="1. 李四")) is None  # not theirs
    line = replies.take(event(msg_id="m2", user="u1", text="1. 张三\n2. 三天"))
    assert line is not None and line.startswith("「天数」须为数字") and "请按编号重新回复" in line
    assert store.forms.get_form(record.form_id).status == "pending"
    assert (
        replies.take(event(msg_id="m3", user="u1", text="1. 张三\n2. 3\n3. 2026-1-5\n4. 年假"))
        is None
    )
    answered = store.forms.answered_by("m3")
    assert answered is not None and answered.values == TYPED and answered.submitted_by == "u1"
    assert replies.take(event(msg_id="m4", user="u1", text="再问一句")) is None  # none waits


def test_a_stop_cancels_the_numbered_form(store):
    record = _record("m1", user="u1")
    store.forms.open_form(record)
    assert FormReplies(store, VirtualClock(T0)).take(event(msg_id="m2", text="算了")) is None
    assert store.forms.get_form(record.form_id).status == "cancelled"


# ------------------------------------------------------------------ the action gate


def test_the_gate_sends_an_ask_with_a_form_as_a_card_or_as_a_numbered_question():
    gate = ActionGate(built(action_policy, robot_code=ROBOT))
    ev = event(msg_id="m1")
    run = run_for(ev, allowed=[ActionKind.ASK, ActionKind.REPLY])
    ask = {"kind": "ask", "text": "请假需要这些信息：", "form": {"fields": FIELDS}}
    facts = ActionFacts(now=T0, thread_generation=1, writes_last_minute=0, writes_last_day=0)
    card = gate.decide(ask, run, RunTally(), facts, form="form")
    assert card.intents[0].content.msgtype == "form"
    assert card.intents[0].content.text.startswith("请假需要这些信息：")
    assert "1. 姓名" not in card.intents[0].content.text
    words = gate.decide(ask, run, RunTally(), facts, form="text")
    assert words.intents[0].content.msgtype == "text"
    assert "1. 姓名（必填）" in words.intents[0].content.text
    plain = gate.decide({"kind": "ask", "text": "哪天？"}, run, RunTally(), facts, form="form")
    assert plain.intents[0].content.msgtype == "text"  # an ask without a form stays words


def test_trace_shows_the_form_asked_and_what_was_submitted(tmp_path) -> None:
    import asyncio
    from pathlib import Path

    from agent.cli.trace import trace_message
    from agent.cli.trace_text import render
    from lab.eval.cases import load_case
    from lab.eval.runner import CaseRun
    from storage import Store

    case = Path(__file__).resolve().parents[1] / (
        "lab/cases/task-lifecycle/forms/form-on-the-card-resumes-the-task.json"
    )
    assert asyncio.run(CaseRun(load_case(case), tmp_path).run()).passed
    with Store(tmp_path / "dta.db") as store:
        asked = "\n".join(render(trace_message(store, "m1", "Asia/Shanghai")))
        answered = trace_message(store, "form:form_ca0df2c95aa144c1d0ff", "Asia/Shanghai")
    assert "form form_ca0df2c95aa144c1d0ff (card: topic, people, day, room, needs)" in asked
    assert "submitted by u1 at 2026-01-01 08:00:10 +08:00: topic=季度复盘会, people=8" in asked
    assert "needs=tv、mic" in asked and "{'" not in asked
    assert answered.forms[0]["status"] == "submitted"


async def test_the_console_trace_page_shows_the_form(tmp_path) -> None:
    from pathlib import Path

    from agent.config import Settings
    from lab.eval.cases import load_case
    from lab.eval.runner import CaseRun
    from tests.console_pages import fetch

    case = Path(__file__).resolve().parents[1] / (
        "lab/cases/task-lifecycle/forms/form-on-the-card-resumes-the-task.json"
    )
    assert (await CaseRun(load_case(case), tmp_path).run()).passed
    store_path = tmp_path / "dta.db"
    (html,) = await fetch(store_path, Settings(store_path=store_path), "/trace/m1")
    assert 'data-form-status="submitted"' in html
    assert "topic=季度复盘会 · people=8" in html and "needs=tv、mic" in html
