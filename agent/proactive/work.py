"""The runs of the runtime's own proactive events: due items of the heartbeat, operator
sends, and 「取消提醒」 — rows of the own-event table (``agent/run/own_events.py``, put in
order in ``agent/components/own_events.py``), which decides before this module sees a run:
an ordinary message never comes here.

What this module sends goes through the action gate and the broker like any answer
(``Acting``): budgets, idempotency (the item's event id is derived from the task and its due
time, so its slot is taken once), target (always the run's origin, which is the task's
recorded origin, without its session webhook: proactive sends go by the OpenAPI) and
receipts.

- A follow-up is one short, polite nudge; a reminder says what it reminds of (and that it
  is late, when a beat found it overdue); an expiry moves the task to ``expired`` with a
  silent receipt. Before acting, the item must still be due: a task that moved since the
  beat (answered, cancelled) gets a silent ``not_due`` receipt and nothing is sent.
- After acting the task moves (``settle``): a delivered reminder completes, an undelivered
  one fails (a send cut by a crash is ``uncertain`` and never resent: its idempotency key
  is taken), a follow-up counts whatever became of it. A crash between the receipt and the
  task's move is settled by the next beat from the receipts (``reconcile``).
"""

from __future__ import annotations

import logging

from agent.clock import Clock
from agent.contracts import (
    Event,
    ReceiptStatus,
    RefusalReason,
    Run,
    SilentReason,
    TaskCheckpoint,
    TaskStatus,
)
from agent.proactive.job_words import describe
from agent.proactive.reminders import (
    cancelled_text,
    follow_up_text,
    is_cancel,
    reminder_text,
)
from agent.proactive.schedule import DueItem, SchedulePolicy, due_item
from agent.run.outcome import RunOutcome
from agent.run.own_events import Hands
from agent.run.ways import ActAs
from skills.language import is_english
from storage import Store

log = logging.getLogger("dta.proactive")

LATE_AFTER_S = 60.0  # a reminder this far past its time says it is late
# A reminder the write budget refused at its time waits for the budget, a minute at a time,
# for at most a day: the person was promised it, and the budget frees as time passes.
POSTPONE_S = 60.0
POSTPONE_FOR_AT_MOST_S = 86_400.0


# What the rows of proactive work match (their order: agent/components/own_events.py).


def operator_send(event: Event) -> bool:
    """``dta send``: the operator's words to one person."""
    return event.scheduled is not None and event.scheduled.kind == "operator"


def runtime_event(event: Event) -> bool:
    """Any event of the runtime's own no earlier row took: a heartbeat's due item
    (``follow_up``, ``reminder``, ``expiry``); one whose work is not configured here finds
    no task due and ends ``not_due``."""
    return event.scheduled is not None


def cancel_request(event: Event) -> bool:
    """A person's 「取消提醒」 / "cancel my reminder"."""
    return event.scheduled is None and is_cancel(event.text)


class ProactiveWork:
    def __init__(self, *, store: Store, clock: Clock, policy: SchedulePolicy) -> None:
        self.store = store
        self.clock = clock
        self.policy = policy

    async def operator(self, event: Event, run: Run, hands: Hands) -> Run:
        """The run of an operator's send: their words, as written."""
        return await hands.say(run, event.text)

    async def cancel(self, event: Event, run: Run, hands: Hands) -> Run:
        """The run of 「取消提醒」: the thread's scheduled reminders cancelled, and said so."""
        now = self.clock.now()
        cancelled = []
        for task in self.store.schedule.scheduled_reminders(run.thread_key):
            moved = _moved(task, run, now, status=TaskStatus.CANCELLED)
            if self.store.context.save_task(moved):
                cancelled.append(moved)
        english = is_english(event.text)
        said = cancelled_text(cancelled, now, self.policy.timezone, english)
        origin = run.origin
        jobs = [] if cancelled else self.store.jobs.of_owner(origin.user_id, origin.conversation_id)
        if jobs:  # a daily 「提醒我…」 is a job: said, so nobody believes it stopped
            listed = "; ".join(f"{describe(j.schedule, english)} {j.instruction}" for j in jobs)
            said += (
                f' Your scheduled jobs here keep running: {listed} (say "cancel my jobs").'
                if english
                else f"你在这里的定时任务还会照常执行：{listed}。要停可以说「取消定时任务」。"
            )
        return await hands.say(run, said)

    async def item(self, event: Event, run: Run, hands: Hands) -> Run:
        """The run of a due item (a follow-up, a reminder, an expiry), if it is still due."""
        acting, endings = hands.acting, hands.endings
        scheduled = event.scheduled
        now = self.clock.now()
        task = self.store.schedule.get_task((scheduled.task_id if scheduled else None) or "")
        item = due_item(task, now, self.policy) if task is not None else None
        if item is None or item.event_id != event.event_id:
            return endings.end_silent(
                run, SilentReason.NOT_DUE, "the task moved after the beat found it due"
            )
        if item.kind == "expiry":
            self.settle(item, run, None)
            return endings.end_silent(
                run, SilentReason.TASK_EXPIRED, f"task {item.task.task_id} expired"
            )
        english = is_english(item.task.goal + (item.task.waiting_for or ""))
        if item.kind == "reminder":
            # Found overdue (the runtime was down, the budget was full): it says so.
            first_due = _first_due(item.task) or item.due_at
            late = now - first_due if now - first_due >= LATE_AFTER_S else 0
            text = reminder_text(item.task, late, english)
        else:
            text = follow_up_text(item.task, english)
        origin = item.task.origin
        if origin is not None and origin.conversation_type.value == "group":
            # In a group the OpenAPI cannot @ anyone: the person is named instead.
            text = f"{origin.nick or origin.user_id}，{text}"
        outcome = RunOutcome()
        # A reminder answers no message, so the person's newer one does not supersede it;
        # a follow-up does wait on the person, and their word makes it stale.
        reminder = item.kind == "reminder"
        request = [{"kind": "reply", "text": text}]
        way = ActAs.DUE_REMINDER if reminder else ActAs.DUE_FOLLOW_UP
        await acting.act(run, request, outcome, way)
        refused = reminder and outcome.terminal is None and _budget_refused(outcome)
        if refused and self._postpone(item, run, now):
            return endings.end_silent(
                run, SilentReason.POSTPONED, "the write budget was full: it goes later"
            )
        self.settle(item, run, outcome.terminal)
        return endings.finish(run, outcome, outcome.final_state())

    def _postpone(self, item: DueItem, run: Run, now: float) -> bool:
        """Move the reminder a minute on, keeping when it was first due; False once it has
        waited a day (it fails then, as any reminder that cannot go)."""
        task = item.task
        first_due = _first_due(task) or item.due_at
        if now - first_due >= POSTPONE_FOR_AT_MOST_S:
            return False
        evidence = {**task.evidence, FIRST_DUE: repr(first_due)}
        moved = _moved(task, run, now, due_at=now + POSTPONE_S, evidence=evidence)
        return self.store.context.save_task(moved)

    def settle(self, item: DueItem, run: Run, status: ReceiptStatus | None) -> None:
        """Move the item's task for what became of it (compare-and-set: a task someone
        else moved first is left to them)."""
        task, now = item.task, self.clock.now()
        if item.kind == "expiry":
            moved = _moved(task, run, now, status=TaskStatus.EXPIRED)
        elif item.kind == "follow_up":
            # The next one (or the expiry) counts from this one, whatever became of it.
            moved = _moved(task, run, now, follow_ups=task.follow_ups + 1, waiting_since=now)
        elif status is not None and status.delivered:
            receipt = self._last_receipt(run.event_id)
            evidence = {"reminder delivered": receipt} if receipt else {}
            moved = _moved(task, run, now, status=TaskStatus.COMPLETED, evidence=evidence)
        else:
            moved = _moved(task, run, now, status=TaskStatus.FAILED)
        if not self.store.context.save_task(moved):
            log.info("task moved by another run", extra={"task_id": task.task_id})

    def reconcile(self, item: DueItem) -> bool:
        """The item's event is already stored: if its run has ended, move the task as its
        receipts say (the run's own move was cut short). True when it did."""
        run = self.store.events.get_run(item.event_id)
        if run is None or not run.state.is_finished:
            return False
        statuses = [r.status for r in self.store.actions.receipts(item.event_id) if r.intent_id]
        self.settle(item, run, statuses[-1] if statuses else None)
        return True

    def _last_receipt(self, event_id: str) -> str | None:
        receipts = [r for r in self.store.actions.receipts(event_id) if r.status.delivered]
        return receipts[-1].receipt_id if receipts else None


FIRST_DUE = "first due at"  # a postponed reminder's original time, in its evidence


def _first_due(task: TaskCheckpoint) -> float | None:
    value = task.evidence.get(FIRST_DUE)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _budget_refused(outcome: RunOutcome) -> bool:
    return any(r.reason == RefusalReason.WRITE_BUDGET.value for r in outcome.receipts)


def _moved(task: TaskCheckpoint, run: Run, now: float, **changes: object) -> TaskCheckpoint:
    return task.model_copy(
        update={
            **changes,
            "revision": task.revision + 1,
            "updated_by_run": run.run_id,
            "updated_at": now,
        }
    )
