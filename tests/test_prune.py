"""Pruning forgets finished old work, keeps what is open, and never re-answers the old."""

import httpx
import respx

from agent.clock import VirtualClock
from agent.config import Settings
from agent.contracts import ActionKind, ReceiptStatus
from agent.runtime import Runtime
from tests.factories import T0, callback, frame

DAY = 86_400.0


@respx.mock
async def test_prune_keeps_recent_and_open_work(store_settings):
    respx.post(url__startswith="https://oapi.example/robot/sendBySession").mock(
        return_value=httpx.Response(200, json={"errcode": 0})
    )
    clock = VirtualClock(T0)
    settings = Settings(
        **store_settings,
        robot_code="robot-1",
        identity_lookup=False,
        webhook_origins=["https://oapi.example"],
    )
    runtime = Runtime(settings, clock=clock)
    await runtime.start()
    runtime.ingest(frame(callback(msg_id="old", text="帮我算一下")), T0)  # opens a task
    runtime.ingest(frame(callback(msg_id="old2", user="u2", text="1+1")), T0)
    await runtime.drain()
    runtime.ingest("not json", T0)
    clock.advance_to(T0 + 40 * DAY)
    runtime.ingest(
        frame(callback(msg_id="new", user="u3", created_at=T0 + 40 * DAY, text="2+2")),
        T0 + 40 * DAY,
    )
    await runtime.drain()
    store = runtime.store

    removed = store.prune(T0 + 30 * DAY)
    assert removed["events"] == 2 and removed["runs"] == 2 and removed["quarantine"] == 1
    assert removed["receipts"] == 2 and removed["attempts"] == 2 and removed["tasks"] == 0
    assert [e.event_id for e in store.events.all()] == ["new"]
    assert store.context.active_task("cid-dm-u1|u1") is not None  # still waiting: kept
    store.vacuum()

    # DingTalk delivering a pruned message again gets silence, not a second answer.
    runtime.ingest(frame(callback(msg_id="old2", user="u2", text="1+1"), "f-late"))
    await runtime.drain()
    late = store.actions.receipts("old2")
    assert [(r.kind, r.status, r.reason) for r in late] == [
        (ActionKind.SILENCE, ReceiptStatus.SILENT, "stale_event")
    ]
    await runtime.aclose()
