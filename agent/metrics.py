"""Prometheus metrics: counts straight from the store, latencies and connection state live.

Frame, decision and receipt counts are read from the store at scrape time, grouped by
reason code: they are the durable truth, they survive restarts, and nothing in the
pipeline has to remember to increment them. They are gauges, not counters, because
``dta store prune`` legitimately lowers them. Latencies and the connection state are
process-local.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from agent.connector import Connector
from storage import Store

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class StoreCollector(Collector):
    def __init__(self, store: Store, connector: Connector | None) -> None:
        self.store = store
        self.connector = connector

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
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
        if self.connector is not None:
            stats = self.connector.stats
            up = GaugeMetricFamily("dta_stream_connected", "1 while the stream is connected")
            up.add_metric([], 1 if self.connector.connected else 0)
            yield up
            opened = CounterMetricFamily("dta_stream_connects", "Stream connections opened")
            opened.add_metric([], stats.connects)
            yield opened
            lost = CounterMetricFamily("dta_stream_disconnects", "Stream connections lost")
            lost.add_metric([], stats.disconnects)
            yield lost


class Metrics:
    def __init__(self, store: Store, connector: Connector | None = None) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(StoreCollector(store, connector))
        self.ack_latency = Histogram(
            "dta_ack_latency_seconds",
            "Frame received to ack sent",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.run_latency = Histogram(
            "dta_run_latency_seconds",
            "Event received to run finished",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
