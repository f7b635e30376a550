"""What the Stream connector counts and says of itself (``agent/dingtalk/connector.py``):
connects, frames, acks, and whether it is paused and why; read by health and metrics."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

# Why the connector is paused (``ConnectorStats.paused_reason``).
PAUSED_NOT_ACCEPTING = "not_accepting"
PAUSED_CHECK_FAILED = "accepting_check_failed"


@dataclass
class ConnectorStats:
    """Written by the connector thread, read by health and metrics (plain values: no locks)."""

    connects: int = 0
    disconnects: int = 0
    frames: Counter[str] = field(default_factory=Counter)
    ack_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=10_000))
    last_frame_at: float | None = None
    # Not accepting frames (see Connector): no socket is held and nothing is acked.
    paused: bool = False
    paused_reason: str | None = None  # PAUSED_NOT_ACCEPTING or PAUSED_CHECK_FAILED
    paused_since: float | None = None  # epoch seconds
    refused_while_paused: int = 0  # frames left unacked for DingTalk to redeliver
    # Why the last attempt to open a connection failed (None once one opened): what
    # readiness says about a robot whose credentials DingTalk refuses.
    open_failure: str | None = None
    oversize_disconnects: int = 0  # connections closed by a frame over socket_max_bytes
    frame_sink_failures: int = 0  # the on_frame sink (recorder) raised; ingest went on
