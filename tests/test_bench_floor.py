"""The bench's replay of the pipeline's store calls makes the writes the pipeline made."""

import pickle
import sqlite3

from lab.bench.floor import StoreCalls
from lab.bench.pipeline import bench_pipeline_on
from storage import Store
from storage.base import Family

TABLES = ("events", "deliveries", "threads", "runs", "decisions", "intents", "attempts",
          "receipts", "budget_ledger", "outbound")  # fmt: skip


def _rows(path, table: str) -> list[tuple]:
    columns = {
        "runs": "event_id, state",
        "attempts": "outcome",
        "receipts": "event_id, status, kind",
        "intents": "event_id, kind, idempotency_key",
    }.get(table, "COUNT(*)")
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute(f"SELECT {columns} FROM {table}").fetchall())


async def test_a_replay_writes_what_the_pipeline_wrote(tmp_path):
    calls = StoreCalls()
    seconds, answered = await bench_pipeline_on({"store_path": tmp_path / "pipeline.db"}, 12, calls)
    assert answered == 12 and seconds > 0
    names = [name for name, _, _ in calls.calls]
    # Each event's calls, from the frame to its receipt; nothing after the run was timed.
    for name in (
        "events.add_event",
        "work.open_run",
        "actions.gate_facts",
        "actions.add_intent",
        "actions.finish_delivery",
    ):
        assert names.count(name) == 12, name
    recorded = pickle.dumps(calls.calls)
    for replay in ("first.db", "second.db"):
        assert calls.replay(tmp_path / replay) > 0
        assert pickle.dumps(calls.calls) == recorded  # the next replay finds them as recorded
        for table in TABLES:
            assert _rows(tmp_path / replay, table) == _rows(tmp_path / "pipeline.db", table)
    assert _rows(tmp_path / "first.db", "receipts")[0][1] == "accepted"


def test_detached_the_store_keeps_no_trace(tmp_path):
    store = Store(tmp_path / "store.db")
    calls = StoreCalls()
    calls.attach(store)
    store.context.active_task("scope-1")
    calls.detach()
    store.context.active_task("scope-1")
    assert [name for name, _, _ in calls.calls] == ["context.active_task"]
    for holder in (store, *(v for v in vars(store).values() if isinstance(v, Family))):
        assert not [
            name
            for name in vars(holder)
            if not name.startswith("_") and callable(getattr(holder, name))
        ]
    store.close()
