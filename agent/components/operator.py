"""``dta send``'s runtime: one operator message sent by a runtime on the configured store,
without the connector or its recovery (agent/proactive/operator.py makes the event and
sends it; a runtime is built here, above the layers it is made of)."""

from __future__ import annotations

from agent.config import Settings
from agent.contracts import Event, Receipt
from agent.proactive.operator import operator_event, send
from agent.runtime import Runtime


async def send_as_operator(
    settings: Settings, text: str, *, user: str | None, group: str | None
) -> tuple[Event, list[Receipt]]:
    """``dta send``: a runtime on the configured store, without the connector or its
    recovery (a daemon may be running on the same store: its work is left alone)."""
    runtime = Runtime(settings)
    try:
        event = operator_event(
            text, runtime.clock.now(), user=user, group=group, robot_code=settings.robot_code
        )
        return event, await send(runtime.store, runtime.pipeline, event)
    finally:
        await runtime.aclose()
