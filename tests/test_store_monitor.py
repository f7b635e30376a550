"""The daemon's store monitor and what it feeds: the connector's ``accepting``, ``/readyz``
and ``/metrics``. In process, on real SQLite files; the connector is a stand-in with the
two things health reads from it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agent.daemon.health import HealthServer
from agent.daemon.metrics import Metrics, RobotView
from agent.daemon.store_monitor import StoreMonitor
from storage import Store
from storage.integrity import StoreProblem
from tests.test_store_integrity import corrupt_middle, fill


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store(tmp_path / "dta.db")
    yield s
    s.close()


@pytest.fixture
async def monitor(store: Store) -> AsyncIterator[StoreMonitor]:
    m = StoreMonitor(store.db, timeout_s=0.2, interval_s=0.05, quick_check_every_s=0.05)
    yield m
    m.close()


def connector() -> Any:
    stats = SimpleNamespace(paused=False, connects=1, disconnects=0, open_failure=None)
    return SimpleNamespace(connected=True, stats=stats)


async def test_a_healthy_store_is_accepted(monitor: StoreMonitor) -> None:
    health = await monitor.probe_once()
    assert health.ok and monitor.accepting()
    assert monitor.lost is None


async def test_deletion_stops_acking_at_once_and_is_final(
    monitor: StoreMonitor, store: Store
) -> None:
    await monitor.probe_once()
    os.unlink(store.path)
    # before any probe: the next frame is already refused
    assert not monitor.accepting()
    assert monitor.current().problem is StoreProblem.DELETED
    await monitor.probe_once()
    assert monitor.lost is not None and monitor.lost_event.is_set()
    Store(store.path).close()  # a file reappearing at the path does not bring it back
    await monitor.probe_once()
    assert not monitor.accepting() and monitor.current().problem is StoreProblem.DELETED


async def test_a_held_lock_pauses_and_then_resumes(monitor: StoreMonitor, store: Store) -> None:
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        probing = asyncio.create_task(monitor.probe_once())
        await asyncio.sleep(0.01)
        assert time.monotonic() - started < 0.1, "the probe must not block the loop"
        health = await probing
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert health.problem is StoreProblem.LOCKED and not monitor.accepting()
    assert monitor.lost is None
    assert (await monitor.probe_once()).ok and monitor.accepting()


async def test_a_full_store_pauses_and_then_resumes(monitor: StoreMonitor, store: Store) -> None:
    store.conn.execute("VACUUM")
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")
    assert (await monitor.probe_once()).problem is StoreProblem.FULL
    assert not monitor.accepting() and monitor.lost is None
    store.conn.execute("PRAGMA max_page_count = 1073741823")
    assert (await monitor.probe_once()).ok


async def test_corrupt_pages_found_by_the_page_check_are_final(
    monitor: StoreMonitor, store: Store
) -> None:
    fill(store)
    assert (await monitor.check_pages_once()).ok
    corrupt_middle(Path(store.path))
    health = await monitor.check_pages_once()
    assert health.problem is StoreProblem.CORRUPT
    assert monitor.lost is not None and not monitor.accepting()


async def test_run_loop_sets_lost_when_the_store_goes(monitor: StoreMonitor, store: Store) -> None:
    watch = asyncio.create_task(monitor.run())
    await asyncio.sleep(0.15)
    assert monitor.accepting()
    os.unlink(store.path)
    await asyncio.wait_for(monitor.lost_event.wait(), 2)
    await asyncio.wait_for(watch, 2)  # the loop ends once the store is lost


async def test_readyz_and_metrics_tell_the_truth(monitor: StoreMonitor, store: Store) -> None:
    stream = connector()
    views = [RobotView("r1", store, stream, monitor.current)]
    metrics = Metrics(views)
    await monitor.probe_once()
    async with (
        HealthServer("127.0.0.1", 0, views, metrics) as health,
        httpx.AsyncClient(base_url=health.url or "", trust_env=False) as client,
    ):
        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["store"]["ok"] is True
        os.unlink(store.path)
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["store"]["problem"] == "store_deleted"
        text = (await client.get("/metrics")).text
        assert 'dta_store_ready{robot="r1"} 0.0' in text
        assert 'dta_store_problem{problem="store_deleted",robot="r1"} 1.0' in text
    assert health._runner is None  # stopped on leaving the block


async def test_readyz_without_a_monitor_probes_off_the_loop(store: Store) -> None:
    stream = connector()
    async with (
        HealthServer("127.0.0.1", 0, [RobotView("r1", store, stream)], Metrics([])) as health,
        httpx.AsyncClient(base_url=health.url or "", trust_env=False) as client,
    ):
        assert (await client.get("/readyz")).status_code == 200
        holder = sqlite3.connect(store.path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            answer = await client.get("/readyz")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert answer.status_code == 503
        assert answer.json()["store"]["problem"] == "store_locked"


async def test_metrics_survive_an_unreadable_store(store: Store, monitor: StoreMonitor) -> None:
    fill(store)
    metrics = Metrics([RobotView("r1", store, connector(), monitor.current)])
    store.close()  # any sqlite3 error while counting: the scrape still answers
    text = metrics.render().decode()
    assert 'dta_store_readable{robot="r1"} 0.0' in text
    assert 'dta_stream_connected{robot="r1"} 1.0' in text


async def test_store_is_an_async_context_manager(tmp_path: Path) -> None:
    async with Store(tmp_path / "dta.db") as s:
        assert s.probe().ok
    with pytest.raises(sqlite3.ProgrammingError):
        s.counts()


async def test_readyz_names_knowledge_sources_whose_last_sync_failed(store: Store) -> None:
    """A source that cannot be read is detail, not unreadiness: the robot still answers
    from its last good snapshot."""
    from agent.contracts.knowledge import SourceState

    failing = SourceState(
        source="wiki:ws", last_ok_at=1.0, last_attempt_at=2.0, problem="throttled"
    )
    fine = SourceState(source="doc:d1", last_ok_at=2.0, last_attempt_at=2.0)
    view = RobotView("r1", store, connector(), knowledge=lambda: [failing, fine])
    async with (
        HealthServer("127.0.0.1", 0, [view], Metrics([])) as health,
        httpx.AsyncClient(base_url=health.url or "", trust_env=False) as client,
    ):
        ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["robots"]["r1"]["knowledge"] == [
        {"source": "wiki:ws", "problem": "throttled", "last_ok_at": 1.0}
    ]
