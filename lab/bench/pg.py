"""PostgreSQL benchmarks: the pipeline next to bare writes, and 1 vs 3 replicas.

- ``pipeline``: the same synthetic DMs as the SQLite pipeline benchmark, on a PostgreSQL
  store, next to ``storage.baseline`` writing the same rows in the same transactions on
  the same server — the ratio is what the pipeline adds on top of durability.
- ``replicas``: a burst of distinct DMs against a fake DingTalk that answers sends in
  30 ms and spreads pushes over the app's connections, served by one replica and then by
  three on one PostgreSQL; replies per second until the platform has them all.

Each figure is compared with its baseline from the same run; absolute rates are noise.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

from agent.clock import SystemClock
from lab.bench.pipeline import bench_pipeline_on
from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk
from storage.baseline import write_bare_rows

DEFAULT_URL = "postgresql://127.0.0.1:5432/test"
REPLICA_CONFIG = {
    "log_level": "WARNING",
    "stream_ping_interval_s": 10,
    "stream_ping_timeout_s": 10,
    "run_lease_s": 10.0,
}


@dataclass(frozen=True)
class ReplicaFigures:
    replicas: int
    platform_latency_ms: float
    burst_messages: int
    burst_seconds: float
    replies_per_s: float


@contextmanager
def fresh_schema(url: str, prefix: str) -> Iterator[str]:
    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def bench_pipeline_pg(count: int, url: str = DEFAULT_URL) -> dict[str, float | int]:
    """The pipeline on PostgreSQL against bare PostgreSQL writes of the same rows."""
    with fresh_schema(url, "bench_pipeline") as pipeline, fresh_schema(url, "bench_bare") as bare:
        seconds, replies = asyncio.run(
            bench_pipeline_on({"store_url": url, "store_schema": pipeline}, count)
        )
        bare_seconds = write_bare_rows(url, count, schema=bare).seconds
    return {
        "events": count,
        "pipeline_events_per_s": round(count / seconds, 1),
        "bare_events_per_s": round(count / bare_seconds, 1),
        "ratio": round(bare_seconds / seconds, 3),
        "replies": replies,
    }


async def _burst(replicas: int, burst: int, latency_s: float, url: str, workdir: Path) -> float:
    fake = FakeDingTalk(SystemClock(), send_latency_s=latency_s, spread=True)
    await fake.start()
    daemons: list[DaemonProcess] = []
    with fresh_schema(url, "bench_replicas") as schema:
        config = {**REPLICA_CONFIG, "store_schema": schema}
        try:
            for n in range(replicas):
                daemon = DaemonProcess(fake, workdir / f"r{replicas}-{n}", config, store_url=url)
                await daemon.start()
                daemons.append(daemon)
            for i in range(5):  # warm-up, not measured
                fake.inject({"msg": f"w{i}", "from": f"w{i}", "text": f"{i} + 1 等于多少"})
            await until(lambda: len(fake.received) >= 5, 30)
            mark, t0 = len(fake.received), time.monotonic()
            for i in range(burst):
                fake.inject({"msg": f"b{i}", "from": f"b{i}", "text": f"{i} + 3 等于多少"})
            await until(lambda: len(fake.received) >= mark + burst, 180)
            return time.monotonic() - t0
        finally:
            for daemon in daemons:
                await daemon.stop()
            await fake.stop()


def bench_replicas(
    burst: int = 300, latency_s: float = 0.03, url: str = DEFAULT_URL
) -> list[ReplicaFigures]:
    """Replies/s of one replica and of three, same burst, same platform answer time."""
    figures = []
    with tempfile.TemporaryDirectory(prefix="dta-bench-replicas-") as tmp:
        for replicas in (1, 3):
            seconds = asyncio.run(_burst(replicas, burst, latency_s, url, Path(tmp)))
            figures.append(
                ReplicaFigures(
                    replicas=replicas,
                    platform_latency_ms=latency_s * 1000,
                    burst_messages=burst,
                    burst_seconds=round(seconds, 3),
                    replies_per_s=round(burst / seconds, 1),
                )
            )
    return figures
