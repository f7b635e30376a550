"""The heartbeat on a real store (SQLite and PostgreSQL): beats once per slot across
replicas, idle beats send nothing, due reminders go once by the OpenAPI, a pause holds them."""

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.config import Settings
from agent.contracts import Origin, ReceiptStatus, SilentReason, TaskCheckpoint, TaskStatus
from agent.runtime import Runtime
from tests.factories import T0, callback, frame

API = "https://api.test"
HOOK = "https://oapi.example/robot/sendBySession"
START = T0 - T0 % 60  # on a beat


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
        heartbeat_interval_s=60,
        follow_up_after_s=600,
    )


@pytest.fixture
def platform():
    """The parts of DingTalk a reminder touches; each route counts its calls."""
    with respx.mock(assert_all_called=False) as mock:
        routes = {
            "token": mock.post(f"{API}/v1.0/oauth2/accessToken").mock(
                return_value=httpx.Response(200, json={"accessToken": "tok", "expireIn": 7200})
            ),
            "oto": mock.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
                return_value=httpx.Response(
                    200,
                    json={
                        "processQueryKey": "pqk",
                        "invalidStaffIdList": [],
                        "flowControlledStaffIdList": [],
                    },
                )
            ),
            "webhook": mock.post(url__startswith=HOOK).mock(
                return_value=httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})
            ),
        }
        yield routes


async def booted(settings, clock):
    runtime = Runtime(settings, clock=clock)
    await runtime.start()
    return runtime


async def test_an_idle_beat_is_recorded_and_calls_nobody(settings, platform):
    clock = VirtualClock(START + 60)
    runtime = await booted(settings, clock)
    beat = runtime.heartbeat.beat()
    await runtime.drain_store()
    assert beat is not None and beat.event_id == f"beat:{int(START + 60)}"
    (receipt,) = runtime.store.actions.receipts(beat.event_id)
    assert (receipt.status, receipt.reason) == (ReceiptStatus.SILENT, "heartbeat_idle")
    assert all(route.call_count == 0 for route in platform.values())
    assert runtime.heartbeat.beat() is None  # the same slot, again: nothing
    await runtime.aclose()


async def test_a_reminder_goes_once_whichever_replica_beats(settings, platform):
    clock = VirtualClock(START)
    first = await booted(settings, clock)
    first.ingest(frame(callback(text="10分钟后提醒我喝水", created_at=START)), START)
    await first.drain_store()
    (task,) = first.store.context.tasks()
    assert (task.kind, task.status, task.due_at) == ("reminder", TaskStatus.SCHEDULED, START + 600)
    assert task.origin is not None and task.origin.user_id == "u1"

    clock.advance_to(START + 600)
    second = Runtime(settings, clock=clock)  # a replica on the same store, in the same slot
    beat = first.heartbeat.beat()
    assert beat is not None
    assert beat.scheduled.items == [f"reminder:{task.task_id}:{int(START + 600)}"]
    assert second.heartbeat.beat() is None
    await first.drain_store()
    clock.advance_to(START + 660)
    assert second.heartbeat.beat() is not None  # the next slot: nothing due any more
    await second.drain_store()

    assert platform["oto"].call_count == 1
    sent = platform["oto"].calls.last.request
    assert b'"userIds":["u1"]' in sent.content and "喝水".encode() in sent.content
    (done,) = first.store.context.tasks()
    assert done.status is TaskStatus.COMPLETED and done.evidence
    await second.aclose()
    await first.aclose()


async def test_a_pause_holds_due_work_and_a_later_beat_sends_it(settings, platform):
    clock = VirtualClock(START)
    runtime = await booted(settings, clock)
    runtime.ingest(frame(callback(text="1分钟后提醒我喝水", created_at=START)), START)
    await runtime.drain_store()
    await runtime.aclose()

    clock.advance_to(START + 120)
    paused = await booted(settings.with_overrides({"paused": True}), clock)
    beat = paused.heartbeat.beat()
    await paused.drain_store()
    assert beat is not None and beat.scheduled.items == []
    (receipt,) = paused.store.actions.receipts(beat.event_id)
    assert receipt.reason == SilentReason.PAUSED.value
    await paused.aclose()

    clock.advance_to(START + 180)
    resumed = await booted(settings, clock)
    assert resumed.heartbeat.beat() is not None
    await resumed.drain_store()
    assert platform["oto"].call_count == 1
    assert "晚了" in platform["oto"].calls.last.request.content.decode()  # 2 min late
    await resumed.aclose()


async def test_a_follow_up_goes_to_the_tasks_origin_by_the_openapi(settings, platform):
    clock = VirtualClock(START)
    runtime = await booted(settings, clock)
    runtime.ingest(frame(callback(text="帮我算一下", created_at=START)), START)
    await runtime.drain_store()
    (task,) = runtime.store.context.tasks()
    assert task.status is TaskStatus.WAITING and task.waiting_since == START
    clock.advance_to(START + 600)
    runtime.heartbeat.beat()
    await runtime.drain_store()
    assert platform["webhook"].call_count == 1  # the question, on the session webhook
    assert platform["oto"].call_count == 1  # the follow-up, by the OpenAPI
    (moved,) = runtime.store.context.tasks()
    assert (moved.status, moved.follow_ups, moved.waiting_since) == (
        TaskStatus.WAITING,
        1,
        START + 600,
    )
    # The person answers: the task resumes and completes as before; nothing more follows.
    runtime.ingest(frame(callback(msg_id="m2", text="3*4", created_at=START + 700)), START + 700)
    await runtime.drain_store()
    clock.advance_to(START + 1800)
    runtime.heartbeat.beat()
    await runtime.drain_store()
    assert platform["oto"].call_count == 1
    assert runtime.store.context.tasks()[0].status is TaskStatus.COMPLETED
    await runtime.aclose()


async def test_a_message_from_the_person_does_not_supersede_their_due_reminder(settings, platform):
    clock = VirtualClock(START)
    runtime = await booted(settings, clock)
    runtime.ingest(frame(callback(text="10分钟后提醒我喝水", created_at=START)), START)
    await runtime.drain_store()
    clock.advance_to(START + 600)
    assert runtime.heartbeat.beat() is not None  # the reminder's event is stored and queued
    # The person writes before the reminder's run acts: a newer message in the thread.
    runtime.ingest(frame(callback(msg_id="m2", text="你好", created_at=START + 600)), START + 600)
    await runtime.drain_store()
    assert platform["oto"].call_count == 1
    assert "喝水".encode() in platform["oto"].calls.last.request.content
    reminder = next(t for t in runtime.store.context.tasks() if t.kind == "reminder")
    assert reminder.status is TaskStatus.COMPLETED
    await runtime.aclose()


async def test_a_cancel_in_a_group_cancels_only_the_askers_reminders_there(settings, platform):
    clock = VirtualClock(START)
    runtime = await booted(settings, clock)
    asks = [
        ("m1", "u1", "cid-g1", "10分钟后提醒我喝水"),
        ("m2", "u2", "cid-g1", "10分钟后提醒我开会"),
        ("m3", "u1", "cid-g2", "10分钟后提醒我交报销"),
    ]
    for msg, user, group, text in asks:
        data = callback(msg_id=msg, user=user, group=group, at_bot=True, text=text)
        runtime.ingest(frame(data), START)
    await runtime.drain_store()
    cancel = callback(msg_id="m4", user="u1", group="cid-g1", at_bot=True, text="取消提醒")
    runtime.ingest(frame(cancel), START + 1)
    await runtime.drain_store()
    status = {t.goal: t.status for t in runtime.store.context.tasks()}
    assert status == {
        "喝水": TaskStatus.CANCELLED,
        "开会": TaskStatus.SCHEDULED,  # someone else's, in the same group
        "交报销": TaskStatus.SCHEDULED,  # the same person's, in another group
    }
    await runtime.aclose()


def test_due_reminders_come_before_follow_ups_within_a_beats_limit(store):
    """Quiet hours hold follow-ups back beat after beat: they must not fill the beat's
    window and keep a reminder that came later from being found."""
    origin = Origin(conversation_id="cid", conversation_type="dm", user_id="u1")
    for n in range(3):
        store.context.save_task(
            TaskCheckpoint(
                task_id=f"t{n}", scope_id="cid|u1", status=TaskStatus.WAITING, revision=1,
                goal="g", updated_by_run="r", created_at=START, updated_at=START,
                origin=origin, waiting_since=START,
            )
        )  # fmt: skip
    store.context.save_task(
        TaskCheckpoint(
            task_id="rem", scope_id="cid|u1", status=TaskStatus.SCHEDULED, revision=1,
            goal="喝水", updated_by_run="r", created_at=START, updated_at=START,
            kind="reminder", origin=origin, due_at=START + 60,
        )
    )  # fmt: skip
    (first,) = store.schedule.due_tasks(START + 900, START + 300, None, limit=1)
    assert first.task_id == "rem"
    assert len(store.schedule.due_tasks(START + 900, START + 300, None)) == 4


def test_tasks_from_before_the_heartbeat_can_still_expire(store_target, monkeypatch):
    """Migration 7 fills in when each open task began, so a task left open by an older dta
    expires after ``task_expiry_s`` like any other."""
    import storage.schema
    from storage import Store

    where, schema = store_target
    migrations = storage.schema.MIGRATIONS
    monkeypatch.setattr(storage.schema, "MIGRATIONS", migrations[:6])
    old = Store(where, schema=schema)
    task = TaskCheckpoint(
        task_id="t-old", scope_id="cid|u1", status=TaskStatus.WORKING, revision=1, goal="g",
        updated_by_run="r", created_at=START, updated_at=START,
    )  # fmt: skip
    old.conn.execute(
        "INSERT INTO tasks (task_id, scope_id, status, revision, updated_at, task_json)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (task.task_id, task.scope_id, task.status.value, 1, START, task.to_json()),
    )
    old.close()
    monkeypatch.undo()
    new = Store(where, schema=schema)
    try:
        (found,) = new.schedule.due_tasks(START + 7200, None, START + 3600)
        assert found.task_id == "t-old"
    finally:
        new.close()
