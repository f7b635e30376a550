"""Reminders on the host's side: scheduling an approved one, cancelling, and its words.

A provider proposes a reminder with the reply that confirms it (``ActionRequest.reminder``);
the action gate checks it (``gates/reminders.py``) and, once approved, the acting step stores
it as a task of kind ``reminder`` (``reminder_task``, ``agent/run/tasks.py``), status
``scheduled``, with the run's origin as the only place it may go. Its id is derived from the
event that asked, so a re-executed run schedules the same reminder again, not a second one.
The heartbeat delivers it (``agent/proactive/work.py``).

「取消提醒」 / "cancel my reminder" cancels the thread's scheduled reminders, whichever
provider runs: like "stop", it is the host's to honour, not a model's to interpret.
"""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

from agent.contracts import TaskCheckpoint
from skills.language import say_when

_CANCEL = re.compile(
    r"^(?:请|麻烦)?(?:帮我)?(?:取消|撤销|删掉|删除|不用)(?:掉)?(?:所有|全部)?(?:的)?提醒(?:吧|了)?[\s!！。.~～]*$"
    r"|^(?i:(?:please\s+)?cancel\s+(?:my\s+|the\s+|all\s+(?:my\s+)?)?reminders?[\s!.]*)$"
)


def is_cancel(text: str) -> bool:
    return bool(_CANCEL.match(text.strip()))


def cancelled_text(cancelled: list[TaskCheckpoint], now: float, tz: ZoneInfo, english: bool) -> str:
    """The short reply to 「取消提醒」: what was cancelled, or that nothing was waiting."""
    if not cancelled:
        return "You have no reminders waiting." if english else "你现在没有待发的提醒。"
    listed = [f"{say_when(t.due_at or now, now, tz, english)} {t.goal}" for t in cancelled]
    if english:
        return "Cancelled: " + "; ".join(listed) + "."
    return "好的，已取消提醒：" + "；".join(listed) + "。"


def reminder_text(task: TaskCheckpoint, late_s: float, english: bool) -> str:
    """The reminder itself; one found overdue (after downtime) says it is late."""
    if english:
        late = f" (sorry, {_late_en(late_s)} late)" if late_s > 0 else ""
        return f"Reminder{late}: {task.goal}"
    late = f"（晚了 {_late_zh(late_s)}，抱歉）" if late_s > 0 else ""
    return f"提醒{late}：{task.goal}"


def follow_up_text(task: TaskCheckpoint, english: bool) -> str:
    """A short, polite nudge about what the task waits for."""
    waiting = task.waiting_for or task.goal
    if english:
        return f"Just following up: I'm still waiting on this — {waiting}"
    return f"跟进一下：我还在等你的回复——{waiting}"


def _late_zh(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} 分钟" if minutes < 120 else f"{round(minutes / 60)} 小时"


def _late_en(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    return f"{minutes} min" if minutes < 120 else f"{round(minutes / 60)} h"
