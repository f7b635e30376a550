"""Recurring jobs: schedules read from words, slots planned, the store family on both
engines, declared jobs kept, the beat's dispatch and pause, and ``dta jobs``."""

from __future__ import annotations

import io
from zoneinfo import ZoneInfo

import pytest

from agent.cli.jobs import change_job, list_jobs, show_job
from agent.clock import VirtualClock
from agent.config.parts import JobEntry
from agent.contracts import (
    ConversationType,
    Job,
    JobRun,
    JobStatus,
    Origin,
    ResponseDecision,
    SilentReason,
    Verdict,
)
from agent.contracts.codes import EngageReason
from agent.proactive.job_beat import JobBeat
from agent.proactive.job_config import REMOVED, keep_declared_jobs
from agent.proactive.job_times import MISSED, PAST_CATCH_UP, next_runs, plan_slots
from agent.proactive.job_words import cancel_words, describe, is_list, read_job
from agent.proactive.jobs import _chosen, facts_digest
from agent.proactive.schedule import SchedulePolicy
from agent.run.outcome import RunOutcome

TZ = ZoneInfo("Asia/Shanghai")
T0 = 1_767_225_600.0  # Thu 2026-01-01 08:00 in Shanghai
HOUR, DAY = 3600.0, 86400.0


@pytest.mark.parametrize(
    ("text", "cron", "instruction"),
    [
        ("每周一早上9点把我本周的待办汇总发我", "0 9 * * 1", "把我本周的待办汇总发我"),
        ("每个工作日18:00看看这个群有没有@我没回的", "0 18 * * 1-5", "看看这个群有没有@我没回的"),
        ("每天下班前看看这个群有没有@我没回的", "30 17 * * *", "看看这个群有没有@我没回的"),
        ("每天晚上九点半提醒我写日报", "30 21 * * *", "提醒我写日报"),
        ("每周一和周三上午10点汇总周报", "0 10 * * 1,3", "汇总周报"),
        ("每周一到周五下午3点15分 看一下待办", "15 15 * * 1-5", "看一下待办"),
        ("每月1号早上9点，发我月报", "0 9 1 * *", "发我月报"),
        ("每天中午12点提醒我吃饭", "0 12 * * *", "提醒我吃饭"),
        ("每天早上8点告诉我今天有什么会？", "0 8 * * *", "告诉我今天有什么会？"),
        ("every Monday at 9am summarise my to-dos", "0 9 * * 1", "summarise my to-dos"),
        ("every weekday at 6:30 pm check the group", "30 18 * * 1-5", "check the group"),
    ],
)
def test_a_schedule_is_read_from_words(text: str, cron: str, instruction: str) -> None:
    words = read_job(text)
    assert words is not None and (words.schedule, words.instruction) == (cron, instruction)


@pytest.mark.parametrize(
    "text",
    [
        "10分钟后提醒我喝水",
        "每天吃饭",
        "每天早上9点",
        "明天9点开会",
        "每天25点做点什么",
        "2+3",
        "每天早上9点上班对吗？",
        "每周一早上9点开例会吗",
    ],
)
def test_words_without_a_schedule_and_a_task_are_no_job(text: str) -> None:
    assert read_job(text) is None


@pytest.mark.parametrize(
    ("text", "cron"),
    [
        ("每周一到周日早上9点发我晨报", "0 9 * * 1-7"),
        ("每周五到周一早上9点发我晨报", "0 9 * * 5-6,0-1"),
        ("每天晚上12点备份一下", "0 0 * * *"),
    ],
)
def test_ranges_over_sunday_and_midnight_are_read_right(text: str, cron: str) -> None:
    words = read_job(text)
    assert words is not None and words.schedule == cron


def test_a_schedule_cron_cannot_take_is_no_job() -> None:
    assert read_job("每月32号早上9点发我月报") is None
    assert read_job("每月0号早上9点发我月报") is None


def test_schedules_are_said_as_people_say_them() -> None:
    assert describe("0 9 * * 1") == "每周一 09:00"
    assert describe("0 18 * * 1-5") == "每个工作日 18:00"
    assert describe("0 10 * * 1,3") == "每周一、周三 10:00"
    assert describe("30 8 1 * *") == "每月 1 日 08:30"
    assert describe("*/5 * * * *") == "cron */5 * * * *"
    assert describe("0 9 * * 1", english=True) == "every Mon at 09:00"
    assert describe("0 9 * * 1-7") == "每天 09:00"
    assert describe("0 9 * * 5-6,0-1") == "每周五、周六、周日、周一 09:00"


def test_list_and_cancel_words() -> None:
    assert is_list("我有哪些定时任务") and is_list("list my jobs") and not is_list("我有哪些待办")
    assert cancel_words("取消每周汇总") == "每周汇总"
    assert cancel_words("今天天气如何") is None


def _job(schedule: str = "0 9 * * 1", **changes: object) -> Job:
    origin = Origin(conversation_id="cid1", conversation_type=ConversationType.DM, user_id="u1")
    fields = {
        "job_id": "job_1",
        "schedule": schedule,
        "instruction": "把我本周的待办汇总发我",
        "origin": origin,
        "created_by": "m1",
        "created_at": T0,
        "next_due_at": T0 + 4 * DAY + HOUR,  # Monday 09:00
        "updated_at": T0,
    }
    return Job.model_validate({**fields, **changes})


def test_cancel_names_a_job_by_its_words_or_its_number() -> None:
    weekly = _job()
    daily = _job("0 18 * * *", job_id="job_2", instruction="告诉我 7*6 等于几")
    assert _chosen("每周汇总", [weekly, daily]) == [weekly]
    assert _chosen("第2个定时任务", [weekly, daily]) == [daily]
    assert _chosen("定时任务", [weekly, daily]) == []  # which one?
    assert _chosen("定时任务", [daily]) == [daily]
    assert _chosen("会议", [weekly, daily]) is None  # names no job: not the runtime's
    meeting = _job("0 9 * * *", job_id="job_3", instruction="汇总今天的会议")
    assert _chosen("明天下午的会议", [meeting]) is None  # a few shared characters are no name


def test_the_next_runs_are_cron_slots_in_the_zone() -> None:
    runs = next_runs("0 9 * * 1", T0, TZ)
    assert [(r - T0) / HOUR for r in runs] == [97.0, 265.0, 433.0]


def test_a_slot_on_time_runs_and_the_job_moves_on() -> None:
    due = T0 + 4 * DAY + HOUR
    plan = plan_slots("0 9 * * 1", due, due + 60, TZ, 3600)
    assert (plan.run, plan.skipped, plan.next_due_at) == (due, [], due + 7 * DAY)
    assert plan_slots("0 9 * * 1", due, due - 1, TZ, 3600).run is None  # never early


def test_after_downtime_only_the_latest_slot_runs_and_only_within_the_window() -> None:
    first = T0 + HOUR  # daily 09:00
    within = plan_slots("0 9 * * *", first, first + 2 * DAY + 1800, TZ, 3600)
    assert within.run == first + 2 * DAY
    assert within.skipped == [(first, MISSED), (first + DAY, MISSED)]
    late = plan_slots("0 9 * * *", first, first + 2 * DAY + 5400, TZ, 3600)
    assert late.run is None
    assert late.skipped[-1] == (first + 2 * DAY, PAST_CATCH_UP)
    assert late.next_due_at == first + 3 * DAY


def test_quiet_hours_hold_a_slot_and_the_time_held_is_not_counted() -> None:
    slot = T0 + 14 * HOUR  # 22:00
    quiet = lambda moment: slot <= moment < slot + 10 * HOUR  # noqa: E731 (22:00-08:00)
    held = plan_slots("0 22 * * *", slot, slot + HOUR, TZ, 1800, quiet)
    assert held.held and held.run is None
    after = plan_slots("0 22 * * *", slot, slot + 10 * HOUR + 600, TZ, 1800, quiet)
    assert after.run == slot  # 10 h after its time, but only 10 min after the quiet hours


def test_the_facts_not_the_words_decide_nothing_new() -> None:
    same = RunOutcome()
    same.grounds.results = ['{"todos": ["a", "b"]}']
    first = facts_digest(same, [{"kind": "reply", "text": "你有 a 和 b"}])
    assert first == facts_digest(same, [{"kind": "reply", "text": "两件：b、a"}])
    changed = RunOutcome()
    changed.grounds.results = ['{"todos": ["a", "b", "c"]}']
    assert facts_digest(changed, [{"kind": "reply", "text": "你有 a 和 b"}]) != first
    # with nothing to rest on, the words are all there is (their spacing aside)
    bare = RunOutcome()
    assert facts_digest(bare, [{"kind": "reply", "text": "2 + 3 = 5"}]) == facts_digest(
        bare, [{"kind": "reply", "text": "2+3=5"}]
    )


def test_jobs_are_stored_moved_once_and_their_slots_recorded_once(store) -> None:
    job = _job()
    assert store.jobs.add(job) and not store.jobs.add(job)
    assert store.jobs.due(T0) == [] and store.jobs.due(T0 + 5 * DAY) == [job]
    moved = store.jobs.move(job, next_due_at=T0 + 11 * DAY, updated_at=T0 + 5 * DAY)
    assert moved is not None and moved.revision == 1
    assert store.jobs.move(job, status=JobStatus.PAUSED) is None  # moved by another first
    slot = JobRun(job_id="job_1", due_at=T0, outcome="skipped", reason=MISSED, at=T0)
    assert store.jobs.add_run(slot) and not store.jobs.add_run(slot)
    assert [r.reason for r in store.jobs.runs("job_1")] == [MISSED]
    assert store.jobs.of_owner("u1", "cid1") == [moved] and store.jobs.of_owner("u2") == []
    # no delivered run yet: nothing to compare a digest with
    assert store.jobs.last_delivered_digest("job_1", T0 + DAY) is None


def _policy() -> SchedulePolicy:
    return SchedulePolicy(
        interval_s=60,
        follow_up_after_s=None,
        max_follow_ups=0,
        task_expiry_s=None,
        quiet_hours=None,
        timezone=TZ,
        max_reminder_days=30,
    )


def test_declared_jobs_follow_the_configuration(store) -> None:
    entry = JobEntry(name="daily", schedule="30 8 * * 1-5", owner="u1", instruction="汇总")
    keep_declared_jobs(store, [entry], "robot1", T0, _policy())
    [job] = store.jobs.all()
    assert (job.job_id, job.source, job.origin.user_id) == ("cfg_daily", "config", "u1")
    assert job.next_due_at == T0 + 1800
    edited = entry.model_copy(update={"instruction": "汇总待办"})
    keep_declared_jobs(store, [edited], "robot1", T0 + DAY, _policy())
    assert store.jobs.get("cfg_daily").instruction == "汇总待办"  # in place, same id
    moved = edited.model_copy(update={"owner": "u2", "conversation": "cid-team"})
    keep_declared_jobs(store, [moved], "robot1", T0 + DAY, _policy())
    owned = store.jobs.get("cfg_daily")
    assert (owned.owner_id, owned.conversation_id) == ("u2", "cid-team")
    assert owned.origin.user_id == "u2" and owned.origin.conversation_type.value == "group"
    keep_declared_jobs(store, [], "robot1", T0 + DAY, _policy())
    gone = store.jobs.get("cfg_daily")
    assert (gone.status, gone.reason) == (JobStatus.CANCELLED, REMOVED)
    with pytest.raises(ValueError, match="schedule"):
        JobEntry(name="bad", schedule="0 25 * * *", owner="u1", instruction="x")


def _decision(reason) -> ResponseDecision:
    verdict = Verdict.SILENT if isinstance(reason, SilentReason) else Verdict.ENGAGE
    return ResponseDecision(
        event_id="e", verdict=verdict, reason=reason, gate_version="t", checked=[], decided_at=T0
    )


def test_the_beat_dispatches_a_due_slot_once_and_pauses_for_an_owner_not_allowed(store) -> None:
    clock = VirtualClock(T0 + 4 * DAY + HOUR)
    beat = JobBeat(
        store=store, clock=clock, policy=_policy(), catch_up_s=3600,
        decide=lambda event, now: _decision(EngageReason.SCHEDULED),
    )  # fmt: skip
    store.jobs.add(_job())
    stored: list = []
    [event] = beat.due(clock.now(), stored.append)
    assert stored == [event]  # stored before the slot is recorded and the job moved on
    assert event.event_id == f"job:job_1:{int(T0 + 4 * DAY + HOUR)}"
    assert event.text == "把我本周的待办汇总发我" and event.actor.user_id == "u1"
    assert beat.due(clock.now(), stored.append) == []  # moved on: nothing due again
    clock.advance_to(clock.now() + 7 * DAY)
    beat.decide = lambda event, now: _decision(SilentReason.NOT_ALLOWED)
    assert beat.due(clock.now(), stored.append) == [] and len(stored) == 1
    job = store.jobs.get("job_1")
    assert (job.status, job.reason) == (JobStatus.PAUSED, "owner_not_allowed")
    assert [r.outcome for r in store.jobs.runs("job_1")] == ["skipped", "dispatched"]


def test_dta_jobs_lists_shows_cancels_and_resumes(store) -> None:
    store.jobs.add(_job())
    store.jobs.add_run(JobRun(job_id="job_1", due_at=T0, outcome="skipped", reason=MISSED, at=T0))
    out = io.StringIO()
    assert list_jobs(store, False, out) == 0
    assert "job_1  active" in out.getvalue() and "every Mon at 09:00" in out.getvalue()
    out = io.StringIO()
    assert show_job(store, "job_1", out) == 0 and "skipped: missed" in out.getvalue()
    assert show_job(store, "job_x", io.StringIO()) == 1
    assert change_job(store, "job_1", "resume", T0, "Asia/Shanghai", io.StringIO()) == 1
    assert change_job(store, "job_1", "cancel", T0, "Asia/Shanghai", io.StringIO()) == 0
    assert store.jobs.get("job_1").status is JobStatus.CANCELLED
    out = io.StringIO()
    list_jobs(store, False, out)
    assert out.getvalue().strip() == "no jobs"


def test_a_daily_slot_keeps_its_local_hour_across_a_daylight_saving_change() -> None:
    """Shanghai has no DST; a team in New York does: 09:00 stays 09:00 on both sides of
    2026-03-08 (the UTC gap between the runs is 23 hours there, not 24)."""
    from datetime import datetime

    new_york = ZoneInfo("America/New_York")
    before = datetime(2026, 3, 6, 12, 0, tzinfo=new_york).timestamp()
    runs = next_runs("0 9 * * *", before, new_york, 3)
    assert [datetime.fromtimestamp(r, new_york).hour for r in runs] == [9, 9, 9]
    assert runs[1] - runs[0] == 23 * HOUR and runs[2] - runs[1] == 24 * HOUR
    shanghai = next_runs("0 9 * * *", before, TZ, 3)
    assert shanghai[1] - shanghai[0] == shanghai[2] - shanghai[1] == 24 * HOUR


def test_metrics_count_jobs_by_status_and_slots_by_outcome(store) -> None:
    from agent.daemon.metrics import Metrics, RobotView

    store.jobs.add(_job())
    store.jobs.add_run(JobRun(job_id="job_1", due_at=T0, outcome="skipped", reason=MISSED, at=T0))
    text = Metrics([RobotView("r1", store=store)]).render().decode()
    assert 'dta_jobs{robot="r1",status="active"} 1.0' in text
    assert 'dta_job_slots{outcome="skipped",reason="missed",robot="r1"} 1.0' in text
    assert 'dta_knowledge_sources_failing{robot="r1"} 0.0' in text


def test_prune_forgets_old_slots_and_keeps_the_job(store) -> None:
    store.jobs.add(_job())
    store.jobs.add_run(JobRun(job_id="job_1", due_at=T0, outcome="skipped", reason=MISSED, at=T0))
    late = T0 + 40 * DAY
    store.jobs.add_run(
        JobRun(job_id="job_1", due_at=late, outcome="skipped", reason=MISSED, at=late)
    )
    removed = store.prune(T0 + 30 * DAY)
    assert removed["job_runs"] == 1 and [r.due_at for r in store.jobs.runs("job_1")] == [late]
    assert store.jobs.get("job_1") is not None
