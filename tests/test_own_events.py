"""The runtime's own events, routed by one table (agent/run/own_events.py, its rows in
order in agent/components/own_events.py): each own event finds its row, an ordinary message
none (it goes straight to the answering path, never into agent/proactive/), and an approval's
event a previous version stored — its id in ``Scheduled.task_id`` — is still carried out."""

from __future__ import annotations

import json

import httpx
import pytest
import respx

from agent.acts.approvals import ApprovalDesk, settle_event
from agent.clock import VirtualClock
from agent.components.own_events import build_jobs, build_own_events, build_proactive
from agent.config import Settings
from agent.contracts import ActionIntent, Event, ReceiptStatus, RunState, Scheduled
from agent.proactive.work import ProactiveWork
from agent.runtime import Runtime
from tests.factories import T0, act_intent, callback, event, frame, run_for

API = "https://api.test"
HOOK = "https://oapi.example/robot/sendBySession"
ARGS = {"subject": "整理发票", "executors": ["u2"]}


@pytest.fixture
def settings(store_settings):
    return Settings(
        **store_settings,
        openapi_base_url=API,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        identity_lookup=False,
        webhook_origins=["https://oapi.example"],
        tools=["dingtalk.todo.create"],
    )


def _own(scheduled: Scheduled, text: str = "") -> Event:
    return event(text=text).model_copy(update={"scheduled": scheduled})


def test_scheduled_reads_the_ids_an_earlier_version_kept_in_task_id():
    old = Scheduled.model_validate({"kind": "approval", "task_id": "apv_1"})
    assert (old.approval_id, old.task_id) == ("apv_1", None)
    checked = Scheduled.model_validate_json('{"kind": "act_checked", "task_id": "int_1"}')
    assert (checked.intent_id, checked.task_id) == ("int_1", None)
    # written now: the id in its own field, read back as written
    new = Scheduled(kind="approval", approval_id="apv_2")
    assert json.loads(new.to_json()) == {
        "kind": "approval",
        "approval_id": "apv_2",
        "items": [],
        "postponed": 0,
    }
    assert Scheduled.model_validate_json(new.to_json()) == new
    # a due item's task stays a task
    due = Scheduled.model_validate({"kind": "reminder", "task_id": "rem_1", "due_at": T0})
    assert (due.task_id, due.approval_id) == ("rem_1", None)


async def test_every_own_event_finds_its_row_and_an_ordinary_message_none(settings):
    runtime = Runtime(settings, clock=VirtualClock(T0))
    table = runtime.pipeline.own  # as the runtime assembles it
    await runtime.aclose()
    assert [r.name for r in table.routes] == [
        "operator",
        "approval",
        "act_checked",
        "job_run",
        "form",
        "due_item",
        "cancel",
        "job_words",
        "job_list",
        "job_cancel",
        "code_reply",
    ]
    cases = {
        "operator": _own(Scheduled(kind="operator"), "hello"),
        "approval": _own(Scheduled(kind="approval", approval_id="apv_1")),
        "act_checked": _own(Scheduled(kind="act_checked", intent_id="int_1")),
        "form": _own(Scheduled(kind="form", form_id="form_1")),
        "due_item": _own(Scheduled(kind="reminder", task_id="rem_1", due_at=T0)),
        "job_run": _own(Scheduled(kind="job", job_id="job_1", due_at=T0)),
        "cancel": event(text="取消提醒"),
        "job_words": event(text="每周一早上9点把我本周的待办汇总发我"),
        "job_list": event(text="我有哪些定时任务"),
        "job_cancel": event(text="取消每周汇总"),
        "code_reply": event(text="确认 4F2A"),
    }
    for name, own in cases.items():
        route = table.route(own)
        assert route is not None and route.name == name, name
        assert table.held(own) is (name in ("approval", "act_checked", "form")), name
    for words in ("2 + 2 等于几", "帮我看下这个文件", "我确认 4F2A 没问题吧"):
        assert table.route(event(text=words)) is None, words


def test_without_a_write_tool_there_is_no_code_reply_row(settings, store):
    clock = VirtualClock(T0)
    work = build_proactive(settings, store, clock)
    table = build_own_events(work, build_jobs(settings, store, clock), store, clock, None)
    assert [r.name for r in table.routes][-1] == "job_cancel"
    assert table.route(event(text="确认 4F2A")) is None  # an ordinary message
    # an approval's event from before still waits out a pause, and ends as before
    assert table.held(_own(Scheduled(kind="approval", approval_id="apv_1")))


@respx.mock
async def test_an_ordinary_message_never_enters_proactive_work(settings, monkeypatch):
    hook = respx.post(url__startswith=HOOK).mock(
        return_value=httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})
    )

    def entered(*args, **kwargs):
        raise AssertionError("an ordinary message entered agent/proactive/")

    for name in ("operator", "item", "cancel"):
        monkeypatch.setattr(ProactiveWork, name, entered)
    runtime = Runtime(settings, clock=VirtualClock(T0))
    await runtime.start()
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    await runtime.drain()
    assert hook.call_count == 1
    assert runtime.store.actions.receipts("m1")[-1].status is ReceiptStatus.ACCEPTED
    await runtime.aclose()


def _intent(runtime: Runtime, run) -> ActionIntent:
    tool = "dingtalk.todo.create"
    assert runtime.acts is not None
    spec = runtime.acts.runner.catalog.spec(tool)
    assert spec is not None
    return act_intent(run, spec, ARGS)


@pytest.mark.parametrize("written_by", ["previous", "current"])
@respx.mock
async def test_an_approval_event_a_previous_version_stored_is_carried_out(settings, written_by):
    """The store of the version before ``Scheduled.approval_id``: the decided approval's
    event carries its id in ``task_id``. The runtime started on it carries the decision
    out as it does one it wrote itself."""
    hook = respx.post(url__startswith=HOOK).mock(
        return_value=httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})
    )
    clock = VirtualClock(T0)
    runtime = Runtime(settings, clock=clock)
    store = runtime.store
    asked = run_for(event(user="u1"))
    desk = ApprovalDesk(store, clock, timeout_s=600, cards=False)
    record, _ = desk.open(asked, _intent(runtime, asked))
    decided = desk.decide(record, "u1", "deny").record
    assert decided is not None
    stored = settle_event(decided, asked, T0)
    if written_by == "previous":  # exactly the JSON the previous version wrote
        legacy = Scheduled.model_construct(kind="approval", task_id=decided.approval_id)
        stored = stored.model_copy(update={"scheduled": legacy})
    store.events.add_event(stored, stored.to_json(), supersedes=False)
    (raw,) = store.conn.execute(
        "SELECT event_json FROM events WHERE event_id = ?", (stored.event_id,)
    ).fetchone()
    scheduled = json.loads(raw)["scheduled"]
    where = "task_id" if written_by == "previous" else "approval_id"
    assert scheduled == {
        "kind": "approval",
        where: decided.approval_id,
        "items": [],
        "postponed": 0,
    }

    assert await runtime.start() == 1
    await runtime.drain()
    read = store.events.get_event(stored.event_id)
    assert read is not None and read.scheduled is not None
    assert read.scheduled.approval_id == decided.approval_id
    run = store.events.get_run(stored.event_id)
    assert run is not None and run.state is RunState.DONE
    (receipt,) = [r for r in store.actions.receipts(stored.event_id) if r.intent_id]
    assert receipt.status is ReceiptStatus.ACCEPTED
    assert hook.call_count == 1
    said = json.loads(hook.calls[0].request.content)
    assert "整理发票" in json.dumps(said, ensure_ascii=False)  # the asker told of the denial
    await runtime.aclose()
