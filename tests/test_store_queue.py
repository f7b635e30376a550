"""The store is the queue: no acked message is left unanswered while the daemon runs.

A store that cannot take writes for a while (full, locked past the busy timeout) delays
answers and never drops them; memory holds a bounded window of the work; runs are owned
under leases that only expire when their owner stops renewing them.
"""

import asyncio
import sqlite3

import httpx
import pytest
import respx

from agent.clock import SystemClock, VirtualClock
from agent.config import Settings
from agent.contracts import ReceiptStatus, RunState
from agent.run.pipeline import HONEST_FAILURE
from agent.runtime import Runtime
from storage import Lease, Store
from storage.base import WRITE_CHUNK
from tests.factories import T0, callback, event, frame, run_for

HOOK = "https://oapi.example/robot/sendBySession"
UNLIMITED_PAGES = 1_073_741_823


@pytest.fixture
def settings(tmp_path):
    return Settings(
        store_path=tmp_path / "dta.db",
        openapi_base_url="https://api.test",
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        identity_lookup=False,
        webhook_origins=["https://oapi.example"],
    )


def webhook_ok():
    return respx.post(url__startswith=HOOK).mock(
        return_value=httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})
    )


def answered(route) -> list[str]:
    """The msgIds the platform got a reply for, in order (from the session token)."""
    return [str(call.request.url).rsplit("session=s-", 1)[1] for call in route.calls]


def fill_the_disk(store: Store) -> None:
    """No page may be added any more: SQLite answers SQLITE_FULL, as on a full disk."""
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")


@respx.mock
async def test_a_full_store_delays_answers_and_never_drops_them(settings):
    route = webhook_ok()
    runtime = Runtime(settings, clock=VirtualClock(T0))
    await runtime.start()
    for n in range(1, 9):
        runtime.ingest(frame(callback(msg_id=f"m{n}", user=f"u{n}", text=f"{n}+1")))
    fill_the_disk(runtime.store)
    await runtime.drain()
    # Acked (stored) but not answerable now (a few fit in free pages): the rest wait,
    # still ``working``, none ended or given up.
    waiting = runtime.queued
    assert waiting > 0 and route.call_count == 8 - waiting
    assert len(runtime.store.work.unfinished_work()) == waiting
    runtime.store.conn.execute(f"PRAGMA max_page_count = {UNLIMITED_PAGES}")
    await runtime.drain_store()
    assert sorted(answered(route)) == sorted(f"m{n}" for n in range(1, 9))  # once each
    assert runtime.store.work.unfinished_work() == []
    states = {runtime.store.events.get_run(f"m{n}").state for n in range(1, 9)}
    assert states == {RunState.DONE}
    assert runtime.queued == 0
    await runtime.aclose()


class HeldLock:
    """Another process takes the store's write lock (SQLite) or locks the tables a run
    writes (PostgreSQL), and keeps it until ``release``."""

    def __init__(self, settings: Settings) -> None:
        if settings.store_url:
            import psycopg

            self.conn = psycopg.connect(settings.store_url, autocommit=True)
            self.conn.execute(f'SET search_path TO "{settings.store_schema}"')
            self.conn.execute("BEGIN")
            self.conn.execute("LOCK TABLE runs, receipts, intents IN EXCLUSIVE MODE")
        else:
            self.conn = sqlite3.connect(settings.store_path, isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("ROLLBACK")
        self.conn.close()


@respx.mock
async def test_a_lock_held_past_the_busy_timeout_is_waited_out_by_the_recovery_loop(
    settings, store_settings
):
    """Another process holds the lock far longer than the store waits; the running
    daemon's recovery loop drives the interrupted runs again once the lock is gone."""
    route = webhook_ok()
    settings = settings.with_overrides(
        {"recovery_interval_s": 0.1, "store_busy_timeout_s": 0.05, **store_settings}
    )
    runtime = Runtime(settings, clock=SystemClock())
    await runtime.start(recovery_loop=True)
    now = SystemClock().now()
    for n in range(1, 6):
        data = callback(msg_id=f"m{n}", user=f"u{n}", text=f"{n}+1", created_at=now)
        runtime.ingest(frame(data))
    lock = HeldLock(settings)  # e.g. a backup holding the lock for a second
    await runtime.drain()
    held = route.call_count
    await asyncio.sleep(1.0)
    lock.release()
    for _ in range(200):
        if not runtime.store.work.unfinished_work() and runtime.queued == 0:
            break
        await asyncio.sleep(0.05)
    assert held < 5  # the lock really stopped work
    assert sorted(answered(route)) == [f"m{n}" for n in range(1, 6)]
    assert runtime.store.work.unfinished_work() == []
    await runtime.aclose()


@respx.mock
async def test_memory_holds_a_bounded_window_and_order_per_thread_is_kept(settings, store_settings):
    route = webhook_ok()
    settings = settings.with_overrides({"max_queued_runs": 3, **store_settings})
    runtime = Runtime(settings, clock=VirtualClock(T0))
    await runtime.start()
    peak = 0
    original = runtime._queue

    def watched(event, generation=None):
        nonlocal peak
        original(event, generation)
        peak = max(peak, runtime.queued)

    runtime._queue = watched
    ids = []
    for n in range(1, 21):
        user = "u1" if n % 2 else f"u{n}"  # u1 sends every other message
        ids.append(f"m{n}")
        runtime.ingest(frame(callback(msg_id=f"m{n}", user=user, text=f"{n}+1")))
    assert peak <= 3
    await runtime.drain_store()
    assert peak <= 3
    # Everyone else is answered once; u1's quick lines supersede each other, so only
    # the newest is answered — and they ran in arrival order.
    others = [m for m in ids if int(m[1:]) % 2 == 0]
    assert sorted(answered(route)) == sorted([*others, "m19"])
    opened = [
        row[0]
        for row in runtime.store.conn.execute(
            "SELECT event_id FROM runs WHERE thread_key LIKE '%u1' ORDER BY rowid"
        )
    ]
    assert opened == [f"m{n}" for n in range(1, 21, 2)]
    assert runtime.store.work.unfinished_work() == []
    await runtime.aclose()


@respx.mock
async def test_a_backlog_in_the_store_is_refilled_in_batches_not_after_every_run(settings):
    """While events wait in the store, the recovery loop refills memory once a tenth of
    it is free: each pass reads a queue's worth of rows, so a pass per finished run
    would cost the most exactly when the daemon is busiest."""

    async def answer_a_moment_later(request):
        await asyncio.sleep(0.001)  # runs end one by one, each on a later turn of the loop
        return httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})

    route = respx.post(url__startswith=HOOK).mock(side_effect=answer_a_moment_later)
    settings = settings.with_overrides(
        {"max_queued_runs": 50, "max_concurrent_runs": 1, "recovery_interval_s": 30}
    )
    runtime = Runtime(settings, clock=SystemClock())
    passes = 0
    original = runtime.store.work.unfinished_work

    def counted(*args, **kwargs):
        nonlocal passes
        passes += 1
        return original(*args, **kwargs)

    runtime.store.work.unfinished_work = counted
    await runtime.start(recovery_loop=True)
    now = SystemClock().now()
    for n in range(1, 301):
        data = callback(msg_id=f"m{n}", user=f"u{n}", text=f"{n}+1", created_at=now)
        runtime.ingest(frame(data))
    assert runtime.queued == 50  # the other 250 wait in the store
    for _ in range(400):
        if route.call_count == 300:
            break
        await asyncio.sleep(0.05)
    assert sorted(answered(route)) == sorted(f"m{n}" for n in range(1, 301))  # once each
    # 250 waited in the store, refilled 5 or more at a time: 50 passes at most (one per
    # finished run would be 250), plus the start's and the one that finds the store empty.
    assert passes <= 55, passes
    await runtime.aclose()


def make_run(run_id: str = "run_1"):
    return run_for(event()).model_copy(update={"run_id": run_id})


def test_a_live_lease_keeps_others_out_and_an_expired_one_is_taken_over(store):
    store.events.add_event(event(), "{}")
    run = make_run()
    assert store.work.open_run(run, lease=Lease("a", T0 + 60, T0)) == run
    again = make_run("run_2")
    assert store.work.open_run(again, lease=Lease("b", T0 + 70, T0 + 10)) is None
    assert store.work.renew_leases("a", [run.event_id], T0 + 120) == 1
    assert store.work.renew_leases("b", [run.event_id], T0 + 500) == 0  # not b's to renew
    assert store.work.open_run(again, lease=Lease("b", T0 + 130, T0 + 100)) is None
    taken = store.work.open_run(again, lease=Lease("b", T0 + 200, T0 + 121))
    assert taken is not None and taken.run_id == run.run_id
    (pending,) = store.work.unfinished_work()
    assert pending.owner == "b" and not pending.free_for("a", T0 + 150)
    assert pending.free_for("a", T0 + 201)


def test_many_leases_and_cached_identities_are_written_in_short_transactions(store):
    count = 3 * WRITE_CHUNK + 7  # several chunks and a partial one
    ids = []
    for n in range(count):
        ev = event(msg_id=f"m{n}", user=f"u{n}")
        store.events.add_event(ev, "{}")
        run = run_for(ev).model_copy(update={"run_id": f"run_{n}"})
        store.work.open_run(run, lease=Lease("a", T0 + 60, T0))
        ids.append(ev.event_id)
    assert store.work.renew_leases("a", ids, T0 + 600) == count
    assert all(item.lease_until == T0 + 600 for item in store.work.unfinished_work(limit=count))
    store.context.cache_identities({f"u{n}": ({"name": f"N{n}"}, T0) for n in range(count)})
    assert len(store.context.cached_identities(T0 - 1, 10 * count)) == count


def test_a_restarted_daemon_takes_over_every_run_of_its_predecessor(store):
    store.events.add_event(event(), "{}")
    store.work.open_run(make_run(), lease=Lease("old", T0 + 3600, T0))
    assert store.work.expire_leases(except_owner="new") == 1
    (pending,) = store.work.unfinished_work()
    assert pending.free_for("new", T0)


def test_a_thread_is_held_by_one_owner_at_a_time(store):
    assert store.work.claim_thread("t1", Lease("a", T0 + 60, T0))
    assert store.work.claim_thread("t1", Lease("a", T0 + 90, T0 + 30))  # its own, renewed
    assert not store.work.claim_thread("t1", Lease("b", T0 + 90, T0 + 30))
    assert store.work.claim_thread("t2", Lease("b", T0 + 90, T0 + 30))  # another thread
    assert store.work.renew_threads("a", ["t1"], T0 + 200) == 1
    assert not store.work.claim_thread("t1", Lease("b", T0 + 260, T0 + 150))
    store.work.release_thread("t1", "a")
    assert store.work.claim_thread("t1", Lease("b", T0 + 260, T0 + 150))


def test_one_msgid_stored_by_two_writers_at_once_is_one_event(store_target):
    """Two replicas ingest the same redelivered msgId: one event, one duplicate, and the
    thread's generation moved once."""
    where, schema = store_target
    first, second = Store(where, schema=schema), Store(where, schema=schema)
    try:
        results = [first.events.add_event(event(), "{}"), second.events.add_event(event(), "{}")]
        assert sorted(r.new for r in results) == [False, True]
        assert first.counts().events == 1 and first.counts().duplicates == 1
        assert first.events.thread_generation(event().thread_key) == 1
    finally:
        first.close()
        second.close()


class TargetingProvider:
    """A model that tries to choose its own recipient."""

    name = "targeting"

    async def respond(self, invocation, skills):
        from skills.providers.base import ProviderReply

        request = {"kind": "reply", "text": "已通知全员", "target": {"conversation": "cid-all"}}
        return ProviderReply(requests=[request])


@respx.mock
async def test_a_refused_answer_gets_the_honest_short_reply(settings, store_settings):
    route = webhook_ok()
    settings = settings.with_overrides(store_settings)
    runtime = Runtime(settings, clock=VirtualClock(T0), provider=TargetingProvider())
    await runtime.start()
    runtime.ingest(frame(callback(text="hi")))
    await runtime.drain()
    assert route.call_count == 1
    body = route.calls.last.request.content.decode()
    assert HONEST_FAILURE in body and "已通知全员" not in body
    statuses = [(r.status, r.reason) for r in runtime.store.actions.receipts()]
    assert statuses == [(ReceiptStatus.REFUSED, "schema_invalid"), (ReceiptStatus.ACCEPTED, None)]
    run = runtime.store.events.get_run("m1")
    assert run.state is RunState.FAILED and run.failure.startswith("refused_by_gate: schema")
    await runtime.aclose()


def test_a_thread_is_claimed_in_arrival_order(store):
    """With replicas, a person's later message may not take the thread while an earlier one
    (on whichever replica) has no finished run; once it has, the later one may."""
    first, second = event(msg_id="m1"), event(msg_id="m2")
    store.events.add_event(first, "{}")
    store.events.add_event(second, "{}")
    lease = Lease("b", T0 + 60, T0)
    assert not store.work.claim_thread(second.thread_key, lease, "m2")  # m1 has no run yet
    assert store.work.claim_thread(first.thread_key, Lease("a", T0 + 60, T0), "m1")
    store.work.open_run(run_for(first).model_copy(update={"run_id": "run_m1"}))
    assert not store.work.claim_thread(second.thread_key, lease, "m2")  # m1 still working
    store.work.release_thread(first.thread_key, "a")
    done = store.events.get_run("m1").model_copy(update={"state": RunState.DONE})
    store.events.save_run(done)
    assert store.work.claim_thread(second.thread_key, lease, "m2")
