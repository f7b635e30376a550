"""Prometheus metrics: counts straight from the store, latencies and connection state live.

Frame, decision and receipt counts are read from the store at scrape time, grouped by
reason code: they are the durable truth, they survive restarts, and nothing in the
pipeline has to remember to increment them. They are gauges, not counters, because
``dta store prune`` legitimately lowers them. Latencies and the connection state are
process-local, and so is the store's health (``dta_store_ready``, and which problem when
it is not). A store that cannot be read (corrupt, say) must not take ``/metrics`` down with
it: the store-derived families are then left out and ``dta_store_readable`` says so.

Every sample is labelled with its ``robot`` (its robot code), one deployment serving one
robot or several alike.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agent.dingtalk.connector import Connector
from storage import Store
from storage.integrity import StoreHealth, StoreProblem

log = logging.getLogger("dta.metrics")

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


@dataclass
class RobotView:
    """What health and metrics read of one robot of the deployment: its code, its store and
    stream while it serves, its store's latest health, and why it is not serving (a start
    that failed and is retried, a store lost), if so. The daemon fills it in as the robot
    starts and stops; a reader never blocks on it."""

    code: str
    store: Store | None = None
    connector: Connector | None = None
    store_health: Callable[[], StoreHealth] | None = None
    down: str | None = None
    # the DingTalk knowledge sources as their last sync left them (in memory)
    knowledge: Callable[[], list[Any]] | None = None


class StoreCollector(Collector):
    """Every robot's families, each sample labelled with its ``robot``."""

    def __init__(self, views: Sequence[RobotView]) -> None:
        self.views = list(views)

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        readable = GaugeMetricFamily(
            "dta_store_readable", "1 if the store answered this scrape", labels=["robot"]
        )
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for view in self.views:
            ok = False
            if view.store is not None:
                try:
                    self._store_families(families, view.code, view.store)
                    ok = True
                except sqlite3.Error as exc:
                    log.warning("metrics: store unreadable", extra={"error": str(exc)})
            readable.add_metric([view.code], 1 if ok else 0)
            if view.store_health is not None:
                self._health_families(families, view.code, view.store_health())
            if view.connector is not None:
                self._stream_families(families, view.code, view.connector)
        yield readable
        yield from families.values()

    @staticmethod
    def _family(
        families: dict[str, GaugeMetricFamily | CounterMetricFamily],
        kind: type[GaugeMetricFamily] | type[CounterMetricFamily],
        name: str,
        text: str,
        labels: list[str],
    ) -> Any:
        """The family ``name`` (made on first use), labelled by robot and ``labels``."""
        if name not in families:
            families[name] = kind(name, text, labels=["robot", *labels])
        return families[name]

    def _health_families(self, families: dict[str, Any], robot: str, health: StoreHealth) -> None:
        ready = self._family(
            families, GaugeMetricFamily, "dta_store_ready", "1 while the store takes writes", []
        )
        ready.add_metric([robot], 1 if health.ok else 0)
        problem = self._family(
            families,
            GaugeMetricFamily,
            "dta_store_problem",
            "1 for the store's current problem",
            ["problem"],
        )
        for code in StoreProblem:
            problem.add_metric([robot, code.value], 1 if health.problem is code else 0)

    def _model_families(self, families: dict[str, Any], robot: str, store: Store) -> None:
        """What models cost (kept a month and more), and how many runs the fallback
        answered instead, by why."""
        labels = ["model", "degraded"]
        gauge = GaugeMetricFamily
        runs = self._family(
            families, gauge, "dta_model_runs", "Runs of a model-backed provider", labels
        )
        tokens = self._family(families, gauge, "dta_model_tokens", "Model tokens spent", labels)
        cost = self._family(families, gauge, "dta_model_cost", "Model cost (model_prices)", labels)
        for model, degraded, n, spent, paid in store.usage.model_usage_totals():
            key = [robot, model, degraded or ""]
            runs.add_metric(key, n)
            tokens.add_metric(key, spent)
            cost.add_metric(key, paid)

    def _standing_families(self, families: dict[str, Any], robot: str, store: Store) -> None:
        """Recurring jobs by status, and what became of their slots (dispatched, or skipped
        with the reason); DingTalk knowledge sources whose last sync failed."""
        gauge = GaugeMetricFamily
        jobs = self._family(families, gauge, "dta_jobs", "Recurring jobs, by status", ["status"])
        for status, n in store.jobs.count_by_status().items():
            jobs.add_metric([robot, status.value], n)
        slots = self._family(
            families, gauge, "dta_job_slots", "Recurring jobs' slots handled", ["outcome", "reason"]
        )
        for outcome, reason, n in store.jobs.slot_counts():
            slots.add_metric([robot, outcome, reason or ""], n)
        problems = self._family(
            families,
            gauge,
            "dta_knowledge_sources_failing",
            "DingTalk knowledge sources whose last sync failed (their last snapshot is served)",
            [],
        )
        states = store.knowledge.source_states()
        problems.add_metric([robot], sum(1 for s in states if s.problem))

    def _store_families(self, families: dict[str, Any], robot: str, store: Store) -> None:
        # Read everything first: a store that fails half-way adds nothing of this robot.
        counts = store.counts()
        decided = store.decision_counts()
        receipted = store.receipt_counts()
        oldest = store.work.oldest_unfinished_received_at()
        ratings = store.feedback.counts()  # one per person and answer
        gauge = GaugeMetricFamily
        frames = self._family(
            families, gauge, "dta_frames", "Frames held in the store, by outcome", ["kind"]
        )
        frames.add_metric([robot, "event"], counts.events)
        frames.add_metric([robot, "duplicate"], counts.duplicates)
        frames.add_metric([robot, "quarantined"], counts.quarantined)
        decisions = self._family(
            families,
            gauge,
            "dta_decisions",
            "Response-gate decisions held in the store",
            ["verdict", "reason"],
        )
        for verdict, reason, n in decided:
            decisions.add_metric([robot, verdict, reason], n)
        receipts = self._family(
            families,
            gauge,
            "dta_receipts",
            "Receipts held in the store, by action kind, status and reason",
            ["kind", "status", "reason"],
        )
        for kind, status, reason, n in receipted:
            receipts.add_metric([robot, kind or "", status, reason or ""], n)
        self._model_families(families, robot, store)
        self._standing_families(families, robot, store)
        rated = self._family(
            families, gauge, "dta_feedback", "Answers' 👍 / 👎 held in the store", ["rating"]
        )
        for rating, n in ratings:
            rated.add_metric([robot, rating], n)
        # The store is the queue: how long its oldest acked, unanswered event has waited.
        # Growing while the process is up means work is stuck; 0 means nothing waits.
        waiting = self._family(
            families,
            gauge,
            "dta_oldest_unfinished_event_age_seconds",
            "Age of the oldest acked event without a finished run (0: none)",
            [],
        )
        waiting.add_metric([robot], max(0.0, time.time() - oldest) if oldest is not None else 0.0)

    def _stream_families(self, families: dict[str, Any], robot: str, connector: Connector) -> None:
        stats = connector.stats
        gauge, counter = GaugeMetricFamily, CounterMetricFamily
        for kind, name, text, value in (
            (gauge, "dta_stream_connected", "1 while the stream is connected", connector.connected),
            (
                gauge,
                "dta_stream_paused",
                "1 while frames are not acked because the store cannot take them",
                stats.paused,
            ),
            (counter, "dta_stream_connects", "Stream connections opened", stats.connects),
            (counter, "dta_stream_disconnects", "Stream connections lost", stats.disconnects),
        ):
            self._family(families, kind, name, text, []).add_metric([robot], int(value))


class Latencies:
    """The daemon's latency histograms, by robot, made before the parts that observe them
    (each robot's connector its acks, its runtime its runs) and the ``Metrics`` that
    exports them."""

    def __init__(self) -> None:
        self.ack = Histogram(
            "dta_ack_latency_seconds",
            "Frame received to ack sent",
            ["robot"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self.run = Histogram(
            "dta_run_latency_seconds",
            "Event received to run finished",
            ["robot"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )

    def of(self, robot: str) -> tuple[Callable[[float], None], Callable[[float], None]]:
        """One robot's observers: (ack latency, run latency)."""
        return self.ack.labels(robot=robot).observe, self.run.labels(robot=robot).observe


class Metrics:
    def __init__(self, views: Sequence[RobotView], latencies: Latencies | None = None) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(StoreCollector(views))
        self.latencies = latencies or Latencies()
        self.registry.register(self.latencies.ack)
        self.registry.register(self.latencies.run)

    def render(self) -> bytes:
        return generate_latest(self.registry)
