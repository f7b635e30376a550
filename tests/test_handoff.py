"""Events from the connector's thread reach the loop in order, a batch per wake-up."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent.daemon.handoff import Handoff
from tests.factories import event


async def test_events_from_a_thread_arrive_in_order_and_a_failure_drops_nothing_else():
    loop = asyncio.get_running_loop()
    got: list[str] = []
    wakeups = 0

    def deliver(ev, generation):
        if ev.event_id == "m3":
            raise RuntimeError("one bad hand-over")
        got.append(ev.event_id)

    handoff = Handoff(loop, deliver)
    original = handoff._drain

    def counted() -> None:
        nonlocal wakeups
        wakeups += 1
        original()

    handoff._drain = counted  # type: ignore[method-assign]
    events = [event(msg_id=f"m{i}") for i in range(6)]
    thread = threading.Thread(target=lambda: [handoff(ev, 1) for ev in events])
    thread.start()
    thread.join()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert got == ["m0", "m1", "m2", "m4", "m5"]
    assert wakeups == 1  # the thread queued all six before the loop ran once


def test_a_closed_loop_is_an_error_the_caller_sees():
    loop = asyncio.new_event_loop()
    loop.close()
    handoff = Handoff(loop, lambda ev, generation: None)
    with pytest.raises(RuntimeError):
        handoff(event(msg_id="m1"), 1)
    with pytest.raises(RuntimeError):  # and again: it did not think one was scheduled
        handoff(event(msg_id="m2"), 1)
