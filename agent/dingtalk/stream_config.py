"""What the Stream connector is configured with (``agent/dingtalk/connector.py``): the
endpoint and credentials, its store, keepalive and backoff, and the frame ceilings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The socket never reads a frame larger than this, whatever max_frame_bytes says.
SOCKET_CEILING_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ConnectorConfig:
    endpoint: str
    client_id: str
    client_secret: str
    store_path: str | Path  # the SQLite file, or a PostgreSQL URL
    store_schema: str | None  # PostgreSQL only
    store_synchronous: str
    store_busy_timeout_s: float
    ping_interval_s: float
    ping_timeout_s: float
    open_timeout_s: float
    backoff_base_s: float
    backoff_max_s: float
    max_frame_bytes: int
    accepting_poll_s: float = 0.5

    @property
    def socket_max_bytes(self) -> int:
        """What ``websockets`` reads before giving up on a frame (and the connection).

        Headroom over ``max_frame_bytes`` so that a somewhat larger frame is read, and so
        quarantined and acked, instead of dropping the connection on every redelivery;
        capped so that one frame cannot take unbounded memory.
        """
        return max(self.max_frame_bytes, min(4 * self.max_frame_bytes, SOCKET_CEILING_BYTES))
