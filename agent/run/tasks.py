"""Multi-message work in one thread: ask → answer → continue, correct, stop.

A task exists only when work spans messages (an ``ask`` that waits for an answer, or a
provider saying so); a single question and its answer leave nothing behind. Every change
is a revision compare-and-set on the store, so two runs can never both move a task.

- An ``ask`` that reached the person puts the task in ``waiting`` with what it waits for.
- The actor's next message in the conversation resumes it, when it continues the task:
  the run gets the checkpoint as its ``continuation``. A continuation supplies what was
  asked for (a file, a picture, the missing detail) or quotes the question; a message
  carrying a request of its own (a reminder, a question, 「帮我…」) starts its own run and
  leaves the task waiting (``own_request``).
- "算了" / "停" / "取消" / "stop" / "cancel" ends it: cancelled, and the run stays silent
  (also when there was no task: a stop is not a question to answer). The stop message is
  newer, so the older run's pending writes are already refused as ``stale_generation``.
- A new message while the task is ``working`` is a correction or more detail: the older
  run's pending writes are refused (``stale_generation``) and the task continues with the
  new message as its continuation.
- ``completed`` needs a receipt for every ``done_when`` item: the delivered reply is the
  evidence; a model saying "done" without one does not complete anything.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from agent.clock import Clock
from agent.contracts import (
    ActionKind,
    ActionRequest,
    Receipt,
    Run,
    TaskCheckpoint,
    TaskStatus,
    new_id,
    sha256_text,
)
from storage import Store

log = logging.getLogger("dta.tasks")

_STOP = re.compile(
    r"^(?:算了|停|停下|停止|别做了|不用了|取消|先不用了|不要了"
    r"|(?i:stop|cancel|never ?mind|forget it))(?:吧|了|啦)?[\s!！。.~～]*$"
)


def is_stop(text: str) -> bool:
    return bool(_STOP.match(text.strip()))


_REMINDER = re.compile(r"提醒我|(?i:\bremind me\b)")
_QUESTION = re.compile(r"(?:[?？]|[吗嘛呢](?:[\s。.!！~～]*))$")
_REQUEST = re.compile(
    r"^(?:请|麻烦你?)?(?:帮我|帮忙|给我|替我)|^(?:能不能|能否|可不可以|可以)(?:帮我|给我)"
    r"|(?i:^(?:please\s+)?(?:can|could|would)\s+you\b)"
)


def own_request(text: str, task: TaskCheckpoint) -> bool:
    """Does this message carry a request of its own, rather than answer the waiting task?
    A reminder (unless the task is about one), a question, or 「帮我…」: each is a whole
    request, so it gets its own run and the task keeps waiting for its answer."""
    said = text.strip()
    if not said:
        return False
    about = f"{task.goal or ''} {task.waiting_for or ''}"
    if _REMINDER.search(said):
        return not _REMINDER.search(about) and "提醒" not in about
    return bool(_QUESTION.search(said) or _REQUEST.search(said))


@dataclass(frozen=True)
class TaskStart:
    continuation: TaskCheckpoint | None = None  # the waiting task this message resumes
    stop: bool = False  # the actor said stop: end quietly (and cancel any task)
    cancelled: TaskCheckpoint | None = None  # the task that stop ended, if there was one


class TaskKeeper:
    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def _move(self, task: TaskCheckpoint, run: Run, **changes: object) -> TaskCheckpoint | None:
        now = self.clock.now()
        if changes.get("status") is TaskStatus.WAITING:
            # Waiting (again) for the person: follow-ups count from now
            # (agent/proactive/schedule.py).
            changes = {"waiting_since": now, "follow_ups": 0, **changes}
        moved = task.model_copy(
            update={
                **changes,
                "origin": task.origin or run.origin,
                "revision": task.revision + 1,
                "updated_by_run": run.run_id,
                "updated_at": now,
            }
        )
        if self.store.context.save_task(moved):
            return moved
        log.warning("task moved by another run", extra={"task_id": task.task_id})
        return None

    def begin(
        self, run: Run, text: str, *, supplies: bool | Callable[[], bool] = False
    ) -> TaskStart:
        """Before the provider: resume, stop or supersede the thread's active task.
        ``supplies``: the message brings something of its own (a file, a picture, a quote
        of the question), so it answers a waiting task whatever its words — asked only
        when a waiting task needs the answer (a callable: it may read the store)."""
        active = self.store.context.active_task(run.thread_key)
        if active is not None and active.updated_by_run == run.run_id:
            return TaskStart(continuation=active)  # re-execution after a crash
        stop = is_stop(text)
        if active is None:
            return TaskStart(stop=stop)
        if stop:
            cancelled = self._move(active, run, status=TaskStatus.CANCELLED)
            return TaskStart(stop=True, cancelled=cancelled)
        if (
            active.status is TaskStatus.WAITING
            and own_request(text, active)
            and not (supplies() if callable(supplies) else supplies)
        ):
            return TaskStart()  # its own request: the task keeps waiting for its answer
        resumed = self._move(active, run, status=TaskStatus.WORKING, waiting_for=None)
        return TaskStart(continuation=resumed)

    def settle(
        self,
        run: Run,
        task: TaskCheckpoint | None,
        request: ActionRequest | None,
        receipt: Receipt | None,
    ) -> TaskCheckpoint | None:
        """After acting: where the run's terminal action leaves the task."""
        if request is None or receipt is None:
            return task  # nothing was decided (refused, superseded): leave it as it is
        delivered = receipt.status.delivered
        patch = request.task
        if request.kind is ActionKind.ASK and delivered:
            waiting_for = (patch.waiting_for if patch else None) or request.text or ""
            if task is None:
                return self._open(run, request, waiting_for)
            return self._move(task, run, status=TaskStatus.WAITING, waiting_for=waiting_for)
        if task is None:
            return None
        if request.kind is ActionKind.SILENCE:
            return self._move(task, run, status=TaskStatus.WAITING)
        if not delivered:
            return self.fail(run, task)
        if patch is not None and patch.status == "working":
            return self._move(task, run, status=TaskStatus.WORKING)
        done_when = (patch.done_when if patch and patch.done_when else None) or task.done_when
        evidence = {item: receipt.receipt_id for item in (done_when or ["reply delivered"])}
        return self._move(
            task, run, status=TaskStatus.COMPLETED, done_when=done_when, evidence=evidence
        )

    def fail(self, run: Run, task: TaskCheckpoint | None) -> TaskCheckpoint | None:
        """The run's answer did not reach the person: the task cannot go on from it."""
        return self._move(task, run, status=TaskStatus.FAILED) if task else None

    def taken_by(self, run: Run) -> TaskCheckpoint | None:
        """The thread's active task if this run is the one that last moved it."""
        active = self.store.context.active_task(run.thread_key)
        return active if active is not None and active.updated_by_run == run.run_id else None

    def _open(self, run: Run, request: ActionRequest, waiting_for: str) -> TaskCheckpoint | None:
        patch = request.task
        now = self.clock.now()
        task = TaskCheckpoint(
            task_id=new_id("task"),
            scope_id=run.thread_key,
            status=TaskStatus.WAITING,
            revision=1,
            goal=(patch.goal if patch and patch.goal else None) or waiting_for,
            done_when=(patch.done_when if patch and patch.done_when else []),
            waiting_for=waiting_for,
            updated_by_run=run.run_id,
            created_at=now,
            updated_at=now,
            origin=run.origin,
            waiting_since=now,
        )
        return task if self.store.context.save_task(task) else None


def reminder_id(event_id: str) -> str:
    """The reminder an event asked for: the same for every execution of its run."""
    return "rem_" + sha256_text(event_id)[:20]


def reminder_task(run: Run, what: str, due_at: float, now: float) -> TaskCheckpoint:
    return TaskCheckpoint(
        task_id=reminder_id(run.event_id),
        scope_id=run.thread_key,
        status=TaskStatus.SCHEDULED,
        revision=1,
        goal=what,
        done_when=["reminder delivered"],
        updated_by_run=run.run_id,
        created_at=now,
        updated_at=now,
        kind="reminder",
        origin=run.origin,
        due_at=due_at,
    )
