"""Proactive work's pure parts: reading reminders, what is due when, and the gates' say."""

from zoneinfo import ZoneInfo

import pytest

from agent.components import action_policy, response_policy, schedule_policy
from agent.config import ConfigError, Settings, validate_settings
from agent.contracts import (
    Origin,
    Scheduled,
    SilentReason,
    TaskCheckpoint,
    TaskStatus,
    Verdict,
)
from agent.contracts.quiet_hours import parse_quiet_hours
from agent.proactive.heartbeat import BEAT_ACTOR
from agent.proactive.reminders import cancelled_text, is_cancel, reminder_text
from agent.proactive.schedule import beat_slot, due_item
from gates.action import ActionFacts, ActionGate, Approval, Refusal, RunTally
from gates.response import ResponseGate
from skills.providers.reminders import reminder_reply
from tests.factories import ROBOT, T0, built, event, run_for

TZ = ZoneInfo("Asia/Shanghai")
MORNING = 1_767_225_600.0  # 2026-01-01 08:00 in Shanghai


@pytest.mark.parametrize(
    ("text", "english", "at", "what"),
    [
        ("明天上午10点提醒我交报销", False, "2026-01-02T10:00:00+08:00", "交报销"),
        ("提醒我明天下午3点半开会", False, "2026-01-02T15:30:00+08:00", "开会"),
        ("后天晚上8点提醒我给妈妈打电话", False, "2026-01-03T20:00:00+08:00", "给妈妈打电话"),
        ("10分钟后提醒我喝水", False, "2026-01-01T08:10:00+08:00", "喝水"),
        ("七点提醒我下班", False, "2026-01-01T19:00:00+08:00", "下班"),  # a waking hour
        ("remind me tomorrow at 10am to submit expenses", True, "2026-01-02T10:00:00+08:00",
         "submit expenses"),
        ("remind me in 2 hours to stretch", True, "2026-01-01T10:00:00+08:00", "stretch"),
        ("remind me to call Bob at 3pm", True, "2026-01-01T15:00:00+08:00", "call Bob"),
    ],
)  # fmt: skip
def test_reminders_are_read_in_the_time_zone_and_confirmed_saying_when(text, english, at, what):
    answer = reminder_reply(text, MORNING, TZ, english)
    assert answer["reminder"] == {"at": at, "text": what}
    assert answer["kind"] == "reply" and what in answer["text"]
    assert ("tomorrow" in answer["text"] or "明天" in answer["text"]) == ("02T" in at)


AFTERNOON = MORNING + 6 * 3600  # 2026-01-01 14:00 in Shanghai


@pytest.mark.parametrize(
    ("text", "english", "sent", "at", "what"),
    [
        # An hour without 上午/下午 is a waking hour: today's 15:00, not tomorrow's 03:00.
        ("3点提醒我开会", False, AFTERNOON, "2026-01-01T15:00:00+08:00", "开会"),
        ("提醒我3点开会", False, MORNING, "2026-01-01T15:00:00+08:00", "开会"),
        ("10点提醒我开会", False, AFTERNOON, "2026-01-02T10:00:00+08:00", "开会"),
        ("明天3点提醒我开会", False, MORNING, "2026-01-02T15:00:00+08:00", "开会"),
        ("12点提醒我吃饭", False, MORNING, "2026-01-01T12:00:00+08:00", "吃饭"),
        ("中午1点提醒我吃饭", False, MORNING, "2026-01-01T13:00:00+08:00", "吃饭"),
        ("晚上8点提醒我复盘", False, MORNING, "2026-01-01T20:00:00+08:00", "复盘"),
        # 晚上12点 / 凌晨12点 are midnight, not noon
        ("晚上12点提醒我睡觉", False, MORNING, "2026-01-02T00:00:00+08:00", "睡觉"),
        ("今晚12点提醒我睡觉", False, MORNING, "2026-01-02T00:00:00+08:00", "睡觉"),
        ("凌晨12点提醒我抢票", False, MORNING, "2026-01-02T00:00:00+08:00", "抢票"),
        ("明天凌晨3点提醒我抢票", False, MORNING, "2026-01-02T03:00:00+08:00", "抢票"),
        ("明早8点提醒我带伞", False, MORNING, "2026-01-02T08:00:00+08:00", "带伞"),
        ("明晚8点提醒我带伞", False, MORNING, "2026-01-02T20:00:00+08:00", "带伞"),
        # a day said before 提醒我 counts; one in what to be reminded of does not
        ("明天提醒我10点开会", False, MORNING, "2026-01-02T10:00:00+08:00", "开会"),
        ("下午3点提醒我准备明天的会", False, MORNING, "2026-01-01T15:00:00+08:00",
         "准备明天的会"),
        # relative times as a whole, not their last number
        ("一个半小时后提醒我喝水", False, MORNING, "2026-01-01T09:30:00+08:00", "喝水"),
        ("1.5小时后提醒我喝水", False, MORNING, "2026-01-01T09:30:00+08:00", "喝水"),
        ("1小时30分钟后提醒我喝水", False, MORNING, "2026-01-01T09:30:00+08:00", "喝水"),
        ("半小时后提醒我喝水", False, MORNING, "2026-01-01T08:30:00+08:00", "喝水"),
        ("remind me in 1 hour 30 minutes to stretch", True, MORNING,
         "2026-01-01T09:30:00+08:00", "stretch"),
        ("remind me at 10am tomorrow to call Bob", True, MORNING, "2026-01-02T10:00:00+08:00",
         "call Bob"),
        ("remind me tomorrow at 3 to call Bob", True, MORNING, "2026-01-02T15:00:00+08:00",
         "call Bob"),
        ("remind me at 12am to call Bob", True, MORNING, "2026-01-02T00:00:00+08:00", "call Bob"),
    ],
)  # fmt: skip
def test_reminder_times_are_read_as_a_person_means_them(text, english, sent, at, what):
    answer = reminder_reply(text, sent, TZ, english)
    assert answer.get("reminder") == {"at": at, "text": what}, answer["text"]


@pytest.mark.parametrize(
    ("text", "english", "sent"),
    [
        ("提醒我多喝一点水", False, MORNING),  # 一点 is "a little", not one o'clock
        ("提醒我下周一10点开会", False, MORNING),  # a day it does not count: not today
        ("周五上午10点提醒我交周报", False, MORNING),
        ("大后天上午10点提醒我交周报", False, MORNING),
        ("每天上午10点提醒我打卡", False, MORNING),  # not a one-off
        ("3天后上午10点提醒我续费", False, MORNING),
        ("上午15点提醒我开会", False, MORNING),  # the hour and the part of day disagree
        ("晚上2点提醒我收衣服", False, MORNING),  # which night?
        ("25点提醒我开会", False, MORNING),
        ("10点70分提醒我开会", False, MORNING),
        ("remind me on Monday at 10am to call Bob", True, MORNING),
        ("remind me at 10am next week to call Bob", True, MORNING),
        ("remind me the day after tomorrow at 10am to call Bob", True, MORNING),
        ("remind me at 13pm to call Bob", True, MORNING),
        ("remind me at 10:75am to call Bob", True, MORNING),
    ],
)
def test_a_time_that_cannot_be_read_for_certain_is_asked_for(text, english, sent):
    answer = reminder_reply(text, sent, TZ, english)
    assert "reminder" not in answer, answer["text"]
    assert ("When should I" in answer["text"]) if english else ("什么时候" in answer["text"])


def test_a_time_that_has_passed_is_said_to_have_passed():
    for text, english in (("今天上午7点提醒我开会", False), ("remind me today at 7am to x", True)):
        answer = reminder_reply(text, MORNING, TZ, english)
        assert "reminder" not in answer
        assert ("passed" in answer["text"]) if english else ("已经过了" in answer["text"])


def test_a_reminder_without_a_time_is_asked_for_never_guessed():
    answer = reminder_reply("提醒我交报销", MORNING, TZ, False)
    assert "reminder" not in answer and "什么时候" in answer["text"]
    assert reminder_reply("明天上午10点交报销", MORNING, TZ, False) is None  # no 提醒我


def test_cancel_words_and_the_replies():
    for text in ("取消提醒", "帮我取消所有提醒", "cancel my reminder"):
        assert is_cancel(text)
    assert not is_cancel("取消") and not is_cancel("提醒我取消会议")
    task = _reminder(due_at=MORNING + 7200)
    assert "10:00 喝水" in cancelled_text([task], MORNING, TZ, False)
    assert "没有待发的提醒" in cancelled_text([], MORNING, TZ, False)
    assert reminder_text(task, 0, False) == "提醒：喝水"
    assert "晚了 25 分钟" in reminder_text(task, 1500, False)


def _reminder(**changes: object) -> TaskCheckpoint:
    task = TaskCheckpoint(
        task_id="rem_1",
        scope_id="cid|u1",
        status=TaskStatus.SCHEDULED,
        revision=1,
        goal="喝水",
        updated_by_run="run_1",
        created_at=MORNING,
        updated_at=MORNING,
        kind="reminder",
        due_at=MORNING + 600,
    )
    return task.model_copy(update=changes)


def _waiting(**changes: object) -> TaskCheckpoint:
    task = _reminder(kind="task", status=TaskStatus.WAITING, due_at=None, waiting_since=MORNING)
    origin = Origin(conversation_id="cid", conversation_type="dm", user_id="u1")
    return task.model_copy(update={"origin": origin, **changes})


def test_a_reminder_is_due_at_its_time_and_never_followed_up_or_expired():
    policy = built(schedule_policy, interval_s=60, follow_up_after_s=60, task_expiry_s=60)
    assert due_item(_reminder(), MORNING + 599, policy) is None
    item = due_item(_reminder(), MORNING + 600, policy)
    assert item is not None and item.kind == "reminder"
    assert item.event_id == f"reminder:rem_1:{int(MORNING + 600)}"
    assert due_item(_reminder(status=TaskStatus.CANCELLED), MORNING + 9999, policy) is None


def test_follow_ups_count_from_the_last_word_then_the_task_expires():
    policy = built(schedule_policy, interval_s=60, follow_up_after_s=300, max_follow_ups=2)
    assert due_item(_waiting(), MORNING + 299, policy) is None
    first = due_item(_waiting(), MORNING + 300, policy)
    assert first is not None and first.kind == "follow_up"
    second = due_item(_waiting(follow_ups=1, waiting_since=MORNING + 300), MORNING + 600, policy)
    assert second is not None and second.kind == "follow_up"
    assert second.event_id != first.event_id
    last = due_item(_waiting(follow_ups=2, waiting_since=MORNING + 600), MORNING + 900, policy)
    assert last is not None and last.kind == "expiry"
    off = built(schedule_policy, interval_s=60)
    assert due_item(_waiting(), MORNING + 10**6, off) is None
    expiring = built(schedule_policy, interval_s=60, task_expiry_s=3600)
    item = due_item(_waiting(status=TaskStatus.WORKING), MORNING + 3600, expiring)
    assert item is not None and item.kind == "expiry"


def test_quiet_hours_cross_midnight_and_bad_ones_stop_start_up():
    night = parse_quiet_hours("22:00-08:00")
    assert night is not None
    assert night.contains(MORNING - 3600, TZ)  # 07:00
    assert not night.contains(MORNING, TZ)  # 08:00
    assert night.contains(MORNING + 15 * 3600, TZ)  # 23:00
    for bad in ("22-08", "25:00-08:00", "08:00-08:00"):
        assert parse_quiet_hours(bad) is None
        with pytest.raises(ConfigError, match="quiet_hours"):
            validate_settings({"quiet_hours": bad}, "test")
    for bad in ("Mars/Olympus", "Asia", ""):  # "Asia" is a folder of zones, not one
        with pytest.raises(ConfigError, match="timezone"):
            validate_settings({"timezone": bad}, "test")
    assert Settings().heartbeat_interval_s is None  # off unless set
    orphans = ({"follow_up_after_s": 600}, {"task_expiry_s": 86400}, {"quiet_hours": "22:00-08:00"})
    for orphan in orphans:
        with pytest.raises(ConfigError, match="heartbeat_interval_s"):
            validate_settings(orphan, "test")
        validate_settings({**orphan, "heartbeat_interval_s": 60}, "test")


def test_every_replica_names_a_beat_the_same_way():
    assert beat_slot(MORNING + 59, 60) == MORNING == beat_slot(MORNING, 60)
    assert beat_slot(MORNING + 61, 60, anchor=MORNING + 30) == MORNING + 30


# ------------------------------------------------------------------ the gates


def _scheduled(kind: str, **fields: object) -> object:
    return event().model_copy(update={"scheduled": Scheduled(kind=kind, **fields)})  # type: ignore[arg-type]


def test_the_response_gate_on_beats_items_and_operator_sends():
    gate = ResponseGate(built(response_policy, robot_code=ROBOT, allow_users=frozenset({"u1"})))
    beat = _scheduled("beat").model_copy(update={"actor": event().actor.model_copy(
        update={"user_id": BEAT_ACTOR})})  # fmt: skip
    assert gate.decide(beat, T0).reason is SilentReason.HEARTBEAT_IDLE
    due = beat.model_copy(update={"scheduled": Scheduled(kind="beat", items=["x"])})
    assert gate.decide(due, T0).reason is SilentReason.HEARTBEAT_DUE
    quiet = beat.model_copy(update={"scheduled": Scheduled(kind="beat", postponed=1)})
    assert gate.decide(quiet, T0).reason is SilentReason.QUIET_HOURS
    # A due item in a group engages without an @, and an old task is not a stale event.
    group = event(group="cid-g").model_copy(update={"scheduled": Scheduled(kind="reminder")})
    assert gate.decide(group, T0 + 10**6).verdict is Verdict.ENGAGE
    assert gate.decide(group, T0).reason.value == "scheduled"
    stranger = group.model_copy(update={"actor": group.actor.model_copy(update={"user_id": "u9"})})
    assert gate.decide(stranger, T0).reason is SilentReason.NOT_ALLOWED
    assert gate.decide(_scheduled("operator"), T0).reason.value == "operator"
    paused = ResponseGate(built(response_policy, paused=True))
    assert paused.decide(due, T0).reason is SilentReason.PAUSED


def _decide(reminder: dict, *, reminders: bool = True, now: float = T0) -> Approval | Refusal:
    gate = ActionGate(
        built(action_policy, robot_code=ROBOT, reminders=reminders, max_reminder_days=7)
    )
    facts = ActionFacts(now=now, thread_generation=1, writes_last_minute=0, writes_last_day=0)
    raw = {"kind": "reply", "text": "好的", "reminder": reminder}
    return gate.decide(raw, run_for(event(user="u1")), RunTally(), facts)


def test_the_action_gate_keeps_reminders_to_the_asker_and_within_limits():
    ok = _decide({"at": "2025-10-10T10:00:00", "text": "x"})  # T0 is 2025-10-09 16:53 UTC
    assert isinstance(ok, Approval)
    assert ok.reminder_due == pytest.approx(T0 + 63_980, abs=3600)  # naive: read in Shanghai
    assert isinstance(_decide({"at": "2025-10-10T10:00:00+08:00", "text": "x", "user_id": "u1"}),
                      Approval)  # fmt: skip
    for reminder, why in [
        ({"at": "2025-10-10T10:00:00+08:00", "text": "x", "user_id": "u2"}, "person"),
        ({"at": "2025-10-10T10:00:00+08:00", "text": "x", "conversation_id": "c9"}, "conversation"),
        ({"at": "2020-01-01T10:00:00+08:00", "text": "x"}, "passed"),
        ({"at": "2025-12-31T10:00:00+08:00", "text": "x"}, "days ahead"),
        ({"at": "next tuesday", "text": "x"}, "unreadable"),
    ]:
        refused = _decide(reminder)
        assert isinstance(refused, Refusal) and refused.reason.value == "reminder_not_allowed"
        assert why in refused.detail
    off = _decide({"at": "2025-10-10T10:00:00+08:00", "text": "x"}, reminders=False)
    assert isinstance(off, Refusal) and "heartbeat" in off.detail


def test_a_reminder_that_would_say_something_unsayable_is_refused_when_it_is_set():
    at = "2025-10-10T10:00:00+08:00"
    everyone = _decide({"at": at, "text": "@所有人 开会"})
    assert isinstance(everyone, Refusal) and everyone.reason.value == "at_all"
    gate = ActionGate(
        built(action_policy, robot_code=ROBOT, reminders=True, secrets=("s3cr3t-key",))
    )
    facts = ActionFacts(now=T0, thread_generation=1, writes_last_minute=0, writes_last_day=0)
    raw = {"kind": "reply", "text": "好的", "reminder": {"at": at, "text": "key: s3cr3t-key"}}
    secret = gate.decide(raw, run_for(event(user="u1")), RunTally(), facts)
    assert isinstance(secret, Refusal) and secret.reason.value == "secret_in_content"
