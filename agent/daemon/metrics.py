"""Prometheus metrics: counts straight from the store, latencies and connection state live.

Frame, decision and receipt counts are read from the store at scrape time, grouped by
reason code: they are the durable truth, they survive restarts, and nothing in the
pipeline has to remember to increment them. They are gauges, not counters, because
``dta store prune`` legitimately lowers them. Latencies and the connection state are
process-local, and so is the store's health (``dta_store_ready``, and which problem when
it is not). A store that cannot be read (corrupt, say) must not take ``/metrics`` down with
it: the store-derived families are then left out and ``dta_store_readable`` says so.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agent.dingtalk.connector import Connector
from storage import Store
from storage.integrity import StoreHealth, StoreProblem

log = logging.getLogger("dta.metrics")

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class StoreCollector(Collector):
    def __init__(
        self,
        store: Store,
        connector: Connector | None,
        store_health: Callable[[], StoreHealth] | None = None,
    ) -> None:
        self.store = store
        self.connector = connector
        self.store_health = store_health

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        readable = GaugeMetricFamily("dta_store_readable", "1 if the store answered this scrape")
        try:
            families = list(self._store_families())
        except sqlite3.Error as exc:
            log.warning("metrics: store unreadable", extra={"error": str(exc)})
            families = []
        readable.add_metric([], 1 if families else 0)
        yield readable
        yield from families
        if self.store_health is not None:
            yield from self._health_families(self.store_health())
        if self.connector is not None:
            yield from self._stream_families(self.connector)

    @staticmethod
    def _health_families(health: StoreHealth) -> Iterator[GaugeMetricFamily]:
        ready = GaugeMetricFamily("dta_store_ready", "1 while the store takes writes")
        ready.add_metric([], 1 if health.ok else 0)
        yield ready
        problem = GaugeMetricFamily(
            "dta_store_problem", "1 for the store's current problem", labels=["problem"]
        )
        for code in StoreProblem:
            problem.add_metric([code.value], 1 if health.problem is code else 0)
        yield problem

    def _model_families(self) -> Iterator[GaugeMetricFamily]:
        """What models cost (kept a month and more), and how many runs the fallback
        answered instead, by why."""
        labels = ["model", "degraded"]
        runs = GaugeMetricFamily("dta_model_runs", "Runs of a model-backed provider", labels=labels)
        tokens = GaugeMetricFamily("dta_model_tokens", "Model tokens spent", labels=labels)
        cost = GaugeMetricFamily("dta_model_cost", "Model cost (model_prices)", labels=labels)
        for model, degraded, n, spent, paid in self.store.model_usage_totals():
            key = [model, degraded or ""]
            runs.add_metric(key, n)
            tokens.add_metric(key, spent)
            cost.add_metric(key, paid)
        yield from (runs, tokens, cost)

    def _store_families(self) -> Iterator[GaugeMetricFamily]:
        counts = self.store.counts()
        frames = GaugeMetricFamily(
            "dta_frames", "Frames held in the store, by outcome", labels=["kind"]
        )
        frames.add_metric(["event"], counts.events)
        frames.add_metric(["duplicate"], counts.duplicates)
        frames.add_metric(["quarantined"], counts.quarantined)
        yield frames
        decisions = GaugeMetricFamily(
            "dta_decisions",
            "Response-gate decisions held in the store",
            labels=["verdict", "reason"],
        )
        for verdict, reason, n in self.store.decision_counts():
            decisions.add_metric([verdict, reason], n)
        yield decisions
        receipts = GaugeMetricFamily(
            "dta_receipts",
            "Receipts held in the store, by action kind, status and reason",
            labels=["kind", "status", "reason"],
        )
        for kind, status, reason, n in self.store.receipt_counts():
            receipts.add_metric([kind or "", status, reason or ""], n)
        yield receipts
        yield from self._model_families()
        # The store is the queue: how long its oldest acked, unanswered event has waited.
        # Growing while the process is up means work is stuck; 0 means nothing waits.
        oldest = self.store.oldest_unfinished_received_at()
        waiting = GaugeMetricFamily(
            "dta_oldest_unfinished_event_age_seconds",
            "Age of the oldest acked event without a finished run (0: none)",
        )
        waiting.add_metric([], max(0.0, time.time() - oldest) if oldest is not None else 0.0)
        yield waiting

    @staticmethod
    def _stream_families(
        connector: Connector,
    ) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = connector.stats
        up = GaugeMetricFamily("dta_stream_connected", "1 while the stream is connected")
        up.add_metric([], 1 if connector.connected else 0)
        yield up
        paused = GaugeMetricFamily(
            "dta_stream_paused", "1 while frames are not acked because the store cannot take them"
        )
        paused.add_metric([], 1 if stats.paused else 0)
        yield paused
        opened = CounterMetricFamily("dta_stream_connects", "Stream connections opened")
        opened.add_metric([], stats.connects)
        yield opened
        lost = CounterMetricFamily("dta_stream_disconnects", "Stream connections lost")
        lost.add_metric([], stats.disconnects)
        yield lost


class Latencies:
    """The daemon's latency histograms, made before the parts that observe them (the
    connector its acks, the runtime its runs) and the ``Metrics`` that exports them."""

    def __init__(self) -> None:
        self.ack = Histogram(
            "dta_ack_latency_seconds",
            "Frame received to ack sent",
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        self.run = Histogram(
            "dta_run_latency_seconds",
            "Event received to run finished",
            buckets=LATENCY_BUCKETS,
            registry=None,
        )


class Metrics:
    def __init__(
        self,
        store: Store,
        connector: Connector | None = None,
        store_health: Callable[[], StoreHealth] | None = None,
        latencies: Latencies | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(StoreCollector(store, connector, store_health))
        self.latencies = latencies or Latencies()
        self.registry.register(self.latencies.ack)
        self.registry.register(self.latencies.run)

    def render(self) -> bytes:
        return generate_latest(self.registry)
