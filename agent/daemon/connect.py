"""The stream connection that feeds a runtime, as ``dta run`` and ``dta lab eval --live``
both open it: frames stored and acked on the connector's own thread, each stored event
handed to the runtime's loop in order (``Handoff``), supersession decided by the response
gate's pure rule on that thread.

    connector = connect(runtime, connector_config(settings), asyncio.get_running_loop())
    connector.start()
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agent.daemon.handoff import Handoff
from agent.dingtalk.connector import Accepting, Connector, ConnectorConfig
from agent.dingtalk.stream_frames import FrameSink
from agent.runtime import Runtime


def connect(
    runtime: Runtime,
    config: ConnectorConfig,
    loop: asyncio.AbstractEventLoop,
    *,
    on_frame: FrameSink | None = None,
    on_ack: Callable[[float], None] | None = None,
    accepting: Accepting | None = None,
) -> Connector:
    return Connector(
        config,
        on_event=Handoff(loop, runtime.submit),
        on_frame=on_frame,
        on_ack=on_ack,
        supersedes=runtime.response_gate.supersedes,  # pure: safe on the connector's thread
        accepting=accepting,
        clicks=runtime.clicks,
    )
