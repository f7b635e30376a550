"""When a recurring job runs (pure): its cron schedule's slots in the configured zone, and
what a beat does with the slots that have come.

A beat that finds a job due (its ``next_due_at`` has come) plans once over every slot from
there to now: the **latest** runs if it is not older than the catch-up window, every
earlier one is skipped (``missed``: the robot was down, or quiet hours held the job, and
a person wants one summary, not a burst of catch-ups), and a latest one past the window is
skipped too (``past_catch_up``). Quiet hours hold a job's run (nothing is planned while
they last) and the time they held it does not count against the window. Slots are cron's,
computed by ``cronsim`` in the zone, so a daylight-saving change moves no job by an hour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim

MAX_SLOTS_PLANNED = 500  # older slots of a very long downtime are skipped without a row
QUIET_STEP_S = 60.0  # how finely the quiet time inside a window is found

MISSED = "missed"  # a later slot of the same job was due too: one run, not a burst
PAST_CATCH_UP = "past_catch_up"  # found after the catch-up window (the robot was down)


def slot_after(schedule: str, after: float, tz: ZoneInfo) -> float:
    """The first slot strictly after ``after`` (epoch seconds)."""
    start = datetime.fromtimestamp(after, tz)
    for moment in CronSim(schedule, start):
        if moment.timestamp() > after:
            return moment.timestamp()
    raise ValueError(f"schedule {schedule!r} has no slot after {after}")


def next_runs(schedule: str, after: float, tz: ZoneInfo, count: int = 3) -> list[float]:
    """The next ``count`` slots after ``after``: what a new job is confirmed with."""
    slots: list[float] = []
    moment = after
    for _ in range(count):
        moment = slot_after(schedule, moment, tz)
        slots.append(moment)
    return slots


@dataclass(frozen=True)
class SlotPlan:
    """What a beat does with a due job: the slot to run (if any), the slots it skips with
    their reasons, and the job's next slot after them. ``held``: quiet hours hold it all
    (nothing is planned; the slots stay due)."""

    run: float | None = None
    skipped: list[tuple[float, str]] = field(default_factory=list)
    next_due_at: float | None = None
    held: bool = False


def plan_slots(
    schedule: str,
    next_due_at: float,
    now: float,
    tz: ZoneInfo,
    catch_up_s: float,
    quiet_at: Callable[[float], bool] = lambda _: False,
) -> SlotPlan:
    """The plan for a job whose first unhandled slot is ``next_due_at`` at ``now``."""
    if next_due_at > now:
        return SlotPlan(next_due_at=next_due_at)
    if quiet_at(now):
        return SlotPlan(next_due_at=next_due_at, held=True)
    slots = [next_due_at]
    following = slot_after(schedule, next_due_at, tz)
    while following <= now:
        slots.append(following)
        following = slot_after(schedule, following, tz)
        if len(slots) > MAX_SLOTS_PLANNED:
            slots.pop(0)  # far too old to name one by one: dropped without a row
    latest, earlier = slots[-1], slots[:-1]
    skipped = [(slot, MISSED) for slot in earlier]
    if now - latest <= catch_up_s or _late_by(latest, now, quiet_at) <= catch_up_s:
        return SlotPlan(run=latest, skipped=skipped, next_due_at=following)
    return SlotPlan(skipped=[*skipped, (latest, PAST_CATCH_UP)], next_due_at=following)


def _late_by(slot: float, now: float, quiet_at: Callable[[float], bool]) -> float:
    """How late a run at ``now`` would be, not counting the quiet hours since ``slot``
    (they held it on purpose): from the end of the last quiet stretch, if any."""
    moment = now
    while moment > slot:
        if quiet_at(moment):
            return max(0.0, now - (moment + QUIET_STEP_S))
        moment -= QUIET_STEP_S
    return now - slot
