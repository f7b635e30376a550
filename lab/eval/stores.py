"""Every robot's records read as one, for the judge and the transcript of a case that runs
several robots: "store expectations span every robot's records" (lab-cases.md).

Each robot keeps its own store (dedupe, budgets and tasks never mix); a case asks about
msgIds, which are unique across robots, so reading them side by side answers it. Only what
the judge and the transcript read is here, each a plain join of the robots' answers.

    stores = RobotStores([runtime.store for runtime in runtimes])
    judge(case.expect, received, stores, ...)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from agent.contracts import (
    ActionIntent,
    ApprovalRecord,
    Attempt,
    Event,
    FormRecord,
    Job,
    JobRun,
    MemoryCandidate,
    Receipt,
    ResponseDecision,
    Run,
    TaskCheckpoint,
)
from storage import Store
from storage.store import Counts


class _Joined:
    """One record family of every robot's store, read as one."""

    def __init__(self, stores: list[Store]) -> None:
        self.stores = stores


class _Events(_Joined):
    """Every robot's events, runs and decisions, read as one store's ``events`` family."""

    def get_run(self, event_id: str) -> Run | None:
        runs = (store.events.get_run(event_id) for store in self.stores)
        return next((run for run in runs if run is not None), None)

    def all(self) -> list[Event]:
        return [event for store in self.stores for event in store.events.all()]

    def deliveries(self, event_id: str) -> int:
        return sum(store.events.deliveries(event_id) for store in self.stores)

    def decisions(self) -> list[ResponseDecision]:
        return [decision for store in self.stores for decision in store.events.decisions()]

    def quarantined(self) -> list[dict[str, Any]]:
        return [q for store in self.stores for q in store.events.quarantined()]


class _Work(_Joined):
    """Every robot's runs per event, read as one store's ``work`` family."""

    def runs_per_event(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for store in self.stores:
            total.update(store.work.runs_per_event())
        return dict(total)


class _Actions(_Joined):
    """Every robot's intents, attempts and receipts, read as one store's ``actions`` family."""

    def intents(self, event_id: str) -> list[ActionIntent]:
        return [intent for store in self.stores for intent in store.actions.intents(event_id)]

    def attempts(self, intent_id: str) -> list[Attempt]:
        return [attempt for store in self.stores for attempt in store.actions.attempts(intent_id)]

    def receipts(self, event_id: str | None = None) -> list[Receipt]:
        return [receipt for store in self.stores for receipt in store.actions.receipts(event_id)]


class _Approvals(_Joined):
    """Every robot's approvals, read as one store's ``approvals`` family."""

    def all(self) -> list[ApprovalRecord]:
        held = [record for store in self.stores for record in store.approvals.all()]
        return sorted(held, key=lambda record: record.created_at)


class _Forms(_Joined):
    """Every robot's ask-user forms, read as one store's ``forms`` family."""

    def all(self) -> list[FormRecord]:
        held = [record for store in self.stores for record in store.forms.all()]
        return sorted(held, key=lambda record: record.created_at)


class _Context(_Joined):
    """Every robot's tasks and memory, read as one store's ``context`` family."""

    def tasks(self) -> list[TaskCheckpoint]:
        return [task for store in self.stores for task in store.context.tasks()]

    def memory_candidates(self) -> list[MemoryCandidate]:
        return [c for store in self.stores for c in store.context.memory_candidates()]


class _Jobs(_Joined):
    """Every robot's recurring jobs and their slots, read as one store's ``jobs`` family."""

    def all(self) -> list[Job]:
        held = [job for store in self.stores for job in store.jobs.all()]
        return sorted(held, key=lambda job: (job.created_at, job.job_id))

    def runs(self, job_id: str, limit: int = 20) -> list[JobRun]:
        return [run for store in self.stores for run in store.jobs.runs(job_id, limit)]


class RobotStores:
    """Every robot's store, read as one: the record families the judge reads, each a join."""

    def __init__(self, stores: Sequence[Store]) -> None:
        self.stores = list(stores)
        self.events = _Events(self.stores)
        self.work = _Work(self.stores)
        self.actions = _Actions(self.stores)
        self.approvals = _Approvals(self.stores)
        self.forms = _Forms(self.stores)
        self.context = _Context(self.stores)
        self.jobs = _Jobs(self.stores)

    def counts(self) -> Counts:
        each = [store.counts() for store in self.stores]
        return Counts(**{f.name: sum(getattr(c, f.name) for c in each) for f in fields(Counts)})


# What the judge and the transcript read: one robot's store, or every robot's.
Records = Store | RobotStores
