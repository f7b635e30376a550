"""The Stream Mode connection: the official ``dingtalk-stream`` client on its own thread.

Why a thread: the client's HTTP helpers are synchronous and (in 0.24.3) have no timeouts,
so they would stall the pipeline's loop. The client lives on a thread with its own event
loop, and its handler does one thing: make the frame durable (ingest) and return the ack.
The pipeline gets the event afterwards, on its own loop.

Why we drive the connection ourselves: 0.24.3's ``start()`` cannot be stopped, reconnects
without delay and dies on a non-JSON frame. We keep the client for what it is good at —
frame types, its ack format, SYSTEM ping and disconnect (agent/dingtalk/stream_client.py) — and own
the lifecycle: bounded connection opening, websocket keepalive as the liveness
watchdog (a silent socket misses its pongs and is closed), reconnects with exponential
backoff and full jitter, and a stop that finishes within a bound.

Frames: each one read is handed to ``FrameHandler`` (agent/dingtalk/stream_frames.py),
which decodes, checks, ingests and acks it and never lets a frame end the connection. A
frame beyond the socket's ceiling (``ConnectorConfig.socket_max_bytes``) cannot be read
at all: ``websockets`` refuses it before buffering it and closes the connection with 1009
(message too big); it is
never stored or acked, DingTalk redelivers it a few times (each costing a reconnect with
backoff, counted in ``stats.oversize_disconnects``) and then gives up. The ceiling is what
keeps memory bounded.

Readiness: with an ``accepting`` predicate (the daemon's store-health flag), the connector
stores and acks nothing while it is False. A frame arriving then is left unacked (DingTalk
redelivers it), the socket is closed so DingTalk routes pushes to another connection, and
no connection is opened until the predicate is True again (polled every
``accepting_poll_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import random
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol
from urllib.parse import quote_plus

import websockets

from agent.dingtalk.ingest import ClickHandler, Ingestor, Supersedes
from agent.dingtalk.stream_client import make_client
from agent.dingtalk.stream_config import ConnectorConfig
from agent.dingtalk.stream_frames import EventSink, FrameHandler, FrameSink
from agent.dingtalk.stream_stats import PAUSED_CHECK_FAILED, PAUSED_NOT_ACCEPTING, ConnectorStats
from agent.logs import FailureLog
from storage import Store

log = logging.getLogger("dta.connector")

__all__ = [
    "PAUSED_CHECK_FAILED",
    "PAUSED_NOT_ACCEPTING",
    "Accepting",
    "Connector",
    "ConnectorConfig",
    "ConnectorStats",
    "EventSink",
    "FrameSink",
    "backoff_delay",
    "load_sdk",
]

# The daemon's readiness flag: may frames be stored and acked now? Called often; must be cheap.
Accepting = Callable[[], bool]

# The close code websockets sends when a frame is over its max_size.
MESSAGE_TOO_BIG = 1009


def backoff_delay(attempt: int, base_s: float, cap_s: float) -> float:
    """Exponential backoff with full jitter, never below half the base delay."""
    ceiling = min(cap_s, base_s * (2 ** min(attempt, 16)))
    return max(base_s / 2, random.uniform(0, ceiling))


def _recv_takes_decode(ws: Any) -> bool:
    try:
        return "decode" in inspect.signature(ws.recv).parameters
    except (TypeError, ValueError):
        return False


def load_sdk() -> ModuleType:
    """The client's module. Its endpoint (``DINGTALK_OPENAPI_ENDPOINT``, read once, when it
    is first imported) is never used: connections open with our own request to the
    configured endpoint (``agent/dingtalk/stream_client.py``), and nothing else of the SDK
    that calls DingTalk is (its token, chatbot and card helpers), so the process
    environment is left alone and each robot's endpoint is its own."""
    import dingtalk_stream

    return dingtalk_stream


class ClickSource(Protocol):
    """Makes the click handler for a store (``agent.acts.clicks.ClickDesk.on``)."""

    def on(self, store: Store) -> ClickHandler: ...


class Connector:
    def __init__(
        self,
        config: ConnectorConfig,
        on_event: EventSink,
        on_frame: FrameSink | None = None,
        on_ack: Callable[[float], None] | None = None,
        supersedes: Supersedes | None = None,
        accepting: Accepting | None = None,
        clicks: ClickSource | None = None,
    ) -> None:
        self.config = config
        self.on_event = on_event
        self.on_frame = on_frame
        self.on_ack = on_ack
        self.supersedes = supersedes
        self.clicks = clicks  # approval card clicks, decided on this thread's own store
        self.accepting = accepting
        self.stats = ConnectorStats()
        self._accepting_failures = FailureLog(log, "accepting check failed; not accepting")
        self._sdk = load_sdk()
        self.frames = FrameHandler(
            sdk=self._sdk,
            stats=self.stats,
            max_frame_bytes=config.max_frame_bytes,
            accepting=self._check_accepting,
            on_event=on_event,
            on_frame=on_frame,
            on_ack=on_ack,
            on_disconnect=self._on_disconnect,
        )
        self._connected = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ws: Any = None  # the newest socket (during a hand-over the old one still reads)
        self._client: Any = None
        # The connection opened because DingTalk said the current one will go: the main
        # loop carries on with it once the old one has closed.
        self._replacement: asyncio.Task[bool] | None = None

    @property
    def connected(self) -> bool:
        """A socket is open and frames are being taken (never while paused)."""
        return self._connected.is_set() and not self.stats.paused

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the connector is already running")
        started = threading.Event()
        # The thread runs in a copy of the caller's context: its log lines name the robot.
        self._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self._thread_main, started),
            name="dta-connector",
            daemon=True,
        )
        self._thread.start()
        started.wait(5)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop reconnecting, close the socket, and wait (bounded) for the thread to end."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
                if self._ws is not None:
                    asyncio.run_coroutine_threadsafe(self._ws.close(), loop)
            except RuntimeError:
                pass  # the loop closed between the check and the call: already stopping
        if self._thread is not None:
            self._thread.join(timeout)
            alive = self._thread.is_alive()
            if not alive:
                self._thread = None
            return not alive
        return True

    def _thread_main(self, started: threading.Event) -> None:
        asyncio.run(self._main(started))

    async def _main(self, started: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        store = Store(
            self.config.store_path,
            self.config.store_synchronous,
            busy_timeout_s=self.config.store_busy_timeout_s,
            schema=self.config.store_schema,
            checkpoints=False,  # acks never wait for a WAL checkpoint (storage/base.py)
        )
        clicks = self.clicks.on(store) if self.clicks is not None else None
        self.frames.ingestor = Ingestor(store, self.supersedes, self.config.max_frame_bytes, clicks)
        client = self._client = make_client(self._sdk, self.config, self.stats)
        started.set()
        attempt = 0
        try:
            while await self._wait_until_accepting():
                received = await self._connect_once(client)
                while self._replacement is not None and not self._stopping.is_set():
                    # The old socket handed over: the new one is the connection now.
                    replacement, self._replacement = self._replacement, None
                    received = await replacement or received
                if self._stopping.is_set():
                    break
                if self.stats.paused:
                    # Closed because frames may not be taken: not a failure, so no backoff;
                    # the loop reconnects as soon as they may.
                    attempt = 0
                    continue
                attempt = 0 if received else attempt + 1
                delay = backoff_delay(
                    attempt, self.config.backoff_base_s, self.config.backoff_max_s
                )
                log.warning(
                    "stream reconnecting", extra={"in_s": round(delay, 2), "attempt": attempt}
                )
                await self._backoff(delay)
        finally:
            await self._end_replacement()
            store.close()

    async def _end_replacement(self) -> None:
        """Stopping mid hand-over: the new socket closes too, before the store does."""
        replacement, self._replacement = self._replacement, None
        if replacement is not None and not replacement.done():
            if self._ws is not None:
                await self._ws.close()
            await asyncio.wait([replacement], timeout=5)

    def _on_disconnect(self, old: Any) -> None:
        """DingTalk said ``old`` will be closed: open the next connection now, and close
        ``old`` once the next is up (or could not come up in time), so no push falls
        between the two (frames on ``old`` are still read and acked until then)."""
        assert self._loop is not None
        if self._replacement is None or self._replacement.done():
            self._replacement = self._loop.create_task(self._connect_once(self._client))
        self._loop.create_task(self._close_when_replaced(old, self._replacement))

    async def _close_when_replaced(self, old: Any, replacement: asyncio.Task[bool]) -> None:
        assert self._loop is not None
        deadline = self._loop.time() + self.config.open_timeout_s + 1.0
        while self._loop.time() < deadline and not replacement.done():
            if self._ws is not None and self._ws is not old and self._connected.is_set():
                break
            await asyncio.sleep(0.01)
        log.info(
            "stream handed over to a new connection", extra={"replaced": not replacement.done()}
        )
        await old.close()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when the connector is stopped."""
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _backoff(self, delay: float) -> None:
        """The wait before reconnecting; it ends early when stopped or no longer accepting."""
        assert self._loop is not None and self._stopping is not None
        deadline = self._loop.time() + delay
        while not self._stopping.is_set() and self._check_accepting():
            remaining = deadline - self._loop.time()
            if remaining <= 0:
                return
            await self._sleep(min(remaining, self.config.accepting_poll_s))

    async def _wait_until_accepting(self) -> bool:
        """Hold off connecting while frames may not be taken; False once stopping."""
        assert self._stopping is not None
        while not self._stopping.is_set():
            if self._check_accepting():
                return True
            await self._sleep(self.config.accepting_poll_s)
        return False

    def _check_accepting(self) -> bool:
        """Ask the readiness flag, and keep ``stats.paused`` in step with its answer."""
        if self.accepting is None:
            return True
        try:
            ok = bool(self.accepting())
            reason = PAUSED_NOT_ACCEPTING
        except Exception as exc:
            # A readiness check that fails cannot vouch for the store: take nothing.
            self._accepting_failures.failed(exc)
            ok, reason = False, PAUSED_CHECK_FAILED
        stats = self.stats
        if not ok and (not stats.paused or stats.paused_reason != reason):
            if not stats.paused:
                stats.paused_since = time.time()
                log.warning("stream paused: frames are not being accepted", extra={"why": reason})
            stats.paused, stats.paused_reason = True, reason
        elif ok and stats.paused:
            paused_s = time.time() - (stats.paused_since or time.time())
            log.info("stream resumed: accepting frames", extra={"paused_s": round(paused_s, 3)})
            stats.paused, stats.paused_reason, stats.paused_since = False, None, None
        return ok

    async def _watch_accepting(self, ws: Any) -> None:
        """While connected: close the socket as soon as frames may not be taken."""
        while self._check_accepting():
            await asyncio.sleep(self.config.accepting_poll_s)
        await ws.close(code=1000, reason="not accepting frames")

    async def _connect_once(self, client: Any) -> bool:
        """One connection, from opening to its end; True if it carried any frame."""
        assert self._loop is not None
        received = False
        watcher: asyncio.Task[None] | None = None
        mine: Any = None
        try:
            connection = await self._loop.run_in_executor(None, client.open_connection)
            if not connection or self._stopping is None or self._stopping.is_set():
                return False
            async with self._websocket(connection) as ws:
                mine = self._ws = client.websocket = ws
                self._connected.set()
                self.stats.connects += 1
                log.info("stream connected", extra={"connects": self.stats.connects})
                if self.accepting is not None:
                    watcher = asyncio.create_task(self._watch_accepting(ws))
                # Bytes, decoded here: a text frame that is not UTF-8 is then quarantined
                # rather than failing the connection (1007) inside websockets. The legacy
                # client of websockets < 14 cannot do that; it still hands binary as bytes.
                as_bytes = {"decode": False} if _recv_takes_decode(ws) else {}
                while True:
                    try:
                        data = await ws.recv(**as_bytes)
                    except websockets.exceptions.ConnectionClosedOK:
                        break
                    received = True
                    await self.frames.handle(client, ws, data)
        except websockets.exceptions.ConnectionClosedError as exc:
            self._closed_with_error(exc)
        except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
            log.warning("stream connection ended", extra={"error": type(exc).__name__})
        except Exception:
            # Whatever went wrong, the connector's job is to come back: reconnect.
            log.exception("stream connection failed unexpectedly")
        finally:
            await self._connection_ended(client, mine, watcher)
        return received

    def _websocket(self, connection: dict[str, Any]) -> Any:
        """The socket to open for the ticket ``open_connection`` gave (a context manager)."""
        uri = f"{connection['endpoint']}?ticket={quote_plus(connection['ticket'])}"
        return websockets.connect(
            uri,
            ping_interval=self.config.ping_interval_s,
            ping_timeout=self.config.ping_timeout_s,
            open_timeout=self.config.open_timeout_s,
            close_timeout=2,
            max_size=self.config.socket_max_bytes,
            # Frames are a kilobyte or two and acks a few dozen bytes: compressing
            # each one cost both ends more CPU than it saved on the wire. Not offering
            # the extension is always allowed (RFC 7692); the server sends plain frames.
            compression=None,
        )

    def _closed_with_error(self, exc: websockets.exceptions.ConnectionClosedError) -> None:
        """Say why the connection closed: a frame over the socket's limit, or otherwise."""
        if exc.sent is not None and exc.sent.code == MESSAGE_TOO_BIG:
            self.stats.oversize_disconnects += 1
            log.warning(
                "a frame over the socket limit closed the connection; it cannot be read,"
                " stored or acked",
                extra={"socket_max_bytes": self.config.socket_max_bytes},
            )
        else:
            log.warning("stream connection ended", extra={"error": type(exc).__name__})

    async def _connection_ended(
        self, client: Any, mine: Any, watcher: asyncio.Task[None] | None
    ) -> None:
        """After a connection, whatever ended it: the readiness watcher stopped, the
        disconnect counted, and the socket forgotten unless a newer one took over."""
        if watcher is not None:
            watcher.cancel()
            await asyncio.wait([watcher])
            if not watcher.cancelled() and watcher.exception() is not None:
                log.warning("readiness watcher failed", exc_info=watcher.exception())
        if mine is not None:
            self.stats.disconnects += 1
        if mine is not None and self._ws is mine:  # not after handing over to a newer one
            self._connected.clear()
            self._ws = client.websocket = None
