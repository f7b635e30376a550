"""When a task has something due: a follow-up, a reminder's time, an expiry (pure).

The heartbeat (``agent/proactive/heartbeat.py``) asks ``due_item`` about each task the store thinks
may be due, and the proactive run (``agent/proactive/work.py``) asks again before it acts, so a
task that moved in between (the person answered, the reminder was cancelled) is left alone.

- A reminder (``kind="reminder"``, status ``scheduled``) is due at its ``due_at``; it gets
  no follow-ups and never expires before it is delivered or cancelled.
- A task waiting for an answer gets a follow-up ``follow_up_after_s`` after it started
  waiting, and again that long after each follow-up (``waiting_since`` moves with each),
  up to ``max_follow_ups``; the point after the last one expires it. A task still open
  ``task_expiry_s`` after it began expires too.
- Quiet hours postpone follow-ups (they are still due when the hours end), never drop them.

A due item's event id is derived from the task and the due time, so however many beats
or replicas find it, it is stored — and sent — once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo

from agent.contracts import TaskCheckpoint, TaskStatus
from agent.contracts.quiet_hours import QuietHours

ItemKind = Literal["follow_up", "reminder", "expiry"]


@dataclass(frozen=True)
class SchedulePolicy:
    interval_s: float | None  # the heartbeat; None: no beats, nothing proactive
    follow_up_after_s: float | None
    max_follow_ups: int
    task_expiry_s: float | None
    quiet_hours: QuietHours | None
    timezone: ZoneInfo
    max_reminder_days: float

    def quiet_at(self, moment: float) -> bool:
        return self.quiet_hours is not None and self.quiet_hours.contains(moment, self.timezone)


@dataclass(frozen=True)
class DueItem:
    kind: ItemKind
    task: TaskCheckpoint
    due_at: float

    @property
    def event_id(self) -> str:
        """The item's event id: the task and the due time, so it is stored once."""
        return item_event_id(self.kind, self.task.task_id, self.due_at)


def item_event_id(kind: str, task_id: str, due_at: float) -> str:
    return f"{kind}:{task_id}:{int(due_at)}"


def due_item(task: TaskCheckpoint, now: float, policy: SchedulePolicy) -> DueItem | None:
    """The task's next item if it is due at ``now`` (quiet hours are the caller's)."""
    upcoming = next_item(task, policy)
    return upcoming if upcoming is not None and upcoming.due_at <= now else None


def next_item(task: TaskCheckpoint, policy: SchedulePolicy) -> DueItem | None:
    """The task's next scheduled item, due or not; None when nothing is scheduled."""
    if task.kind == "reminder":
        if task.status is TaskStatus.SCHEDULED and task.due_at is not None:
            return DueItem("reminder", task, task.due_at)
        return None
    if task.status not in (TaskStatus.WORKING, TaskStatus.WAITING):
        return None
    items: list[DueItem] = []
    if policy.task_expiry_s is not None:
        items.append(DueItem("expiry", task, task.created_at + policy.task_expiry_s))
    waiting = task.status is TaskStatus.WAITING and task.waiting_since is not None
    if waiting and policy.follow_up_after_s is not None and task.origin is not None:
        assert task.waiting_since is not None
        at = task.waiting_since + policy.follow_up_after_s
        kind: ItemKind = "follow_up" if task.follow_ups < policy.max_follow_ups else "expiry"
        items.append(DueItem(kind, task, at))
    return min(items, key=lambda item: item.due_at, default=None)


def beat_slot(now: float, interval_s: float, anchor: float = 0.0) -> float:
    """The start of the beat slot ``now`` falls in: slots are ``interval_s`` long from
    ``anchor``, so every replica names the same beat the same way."""
    return anchor + ((now - anchor) // interval_s) * interval_s
