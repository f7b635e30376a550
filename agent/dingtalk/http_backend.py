"""asyncio's own transports as httpcore's network layer (no anyio in between).

httpcore talks to sockets through anyio by default, which adds cancel scopes, library
detection and attribute tables to every read and write, and asks every idle connection
"has the server closed you?" through them before each request. ``AsyncioBackend`` speaks
to asyncio's transports directly (TLS through ``loop.start_tls``) and answers that question
from what the connection has already received.
"""

from __future__ import annotations

import asyncio
import ssl
import typing

import httpcore

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)
READ_PAUSE_BYTES = 1 << 20  # stop reading from the socket while this much waits unread


class _Connection(asyncio.Protocol):
    """One socket's bytes, kept until httpcore asks for them; implements httpcore's stream."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._unread = bytearray()
        self._eof = False
        self._lost: Exception | None = None
        self._readable: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._reading_paused = False

    # asyncio's side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._unread += data
        if len(self._unread) > READ_PAUSE_BYTES and self.transport is not None:
            self.transport.pause_reading()
            self._reading_paused = True
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        self._lost = exc
        self._wake()
        self.resume_writing()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        waiter, self._writable = self._writable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake(self) -> None:
        waiter, self._readable = self._readable, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # httpcore's side
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if not self._unread and not self._eof:
            waiter = self._readable = asyncio.get_running_loop().create_future()
            await _waited(waiter, timeout, "timed out reading", httpcore.ReadTimeout)
        if self._unread:
            data = bytes(self._unread[:max_bytes])
            del self._unread[:max_bytes]
            if self._reading_paused and len(self._unread) < READ_PAUSE_BYTES // 2:
                self._reading_paused = False
                if self.transport is not None:
                    self.transport.resume_reading()
            return data
        if self._lost is not None:
            raise httpcore.ReadError(str(self._lost) or type(self._lost).__name__)
        return b""  # the server closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            raise httpcore.WriteError("connection closed")
        transport.write(buffer)
        if self._writable is not None:  # the socket's buffer is full: wait until it drains
            await _waited(self._writable, timeout, "timed out writing", httpcore.WriteTimeout)
            if self._lost is not None:
                raise httpcore.WriteError(str(self._lost))


async def _waited(
    waiter: asyncio.Future[None], timeout: float | None, message: str, error: type[Exception]
) -> None:
    """Wait for ``waiter``; past ``timeout`` seconds, raise ``error(message)``. A timer on
    the future itself: ``asyncio.timeout`` costs a cancellation scope on the task for
    every read, and a request reads at least once."""
    if timeout is None:
        await waiter
        return
    timer = asyncio.get_running_loop().call_later(timeout, _expire, waiter, error, message)
    try:
        await waiter
    finally:
        timer.cancel()


def _expire(waiter: asyncio.Future[None], error: type[Exception], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(error(message))


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._connection.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._connection.write(buffer, timeout)

    async def aclose(self) -> None:
        if self._connection.transport is not None:
            self._connection.transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        connection = self._connection
        assert connection.transport is not None
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                tls = await loop.start_tls(
                    connection.transport, connection, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            await self.aclose()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from None
        except (OSError, ssl.SSLError) as exc:
            await self.aclose()
            raise httpcore.ConnectError(str(exc)) from exc
        if tls is None:
            raise httpcore.ConnectError("TLS could not be started")
        connection.transport = typing.cast(asyncio.Transport, tls)
        return self

    def get_extra_info(self, info: str) -> typing.Any:
        connection = self._connection
        transport = connection.transport
        if info == "is_readable":  # the server closed it, or sent something unasked
            return bool(connection._unread) or connection._eof or transport is None
        if transport is None:
            return None
        names = {"client_addr": "sockname", "server_addr": "peername"}
        if info in ("ssl_object", "socket") or info in names:
            return transport.get_extra_info(names.get(info, info))
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        return await _connected(
            loop.create_connection(_Connection, host, port, local_addr=local),
            timeout,
            socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        return await _connected(
            loop.create_unix_connection(_Connection, path), timeout, socket_options
        )

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    opening: typing.Awaitable[tuple[asyncio.BaseTransport, _Connection]],
    timeout: float | None,
    socket_options: typing.Iterable[SocketOption] | None,
) -> _Stream:
    try:
        async with asyncio.timeout(timeout):
            transport, connection = await opening
    except TimeoutError:
        raise httpcore.ConnectTimeout("timed out connecting") from None
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    sock = transport.get_extra_info("socket")
    for option in socket_options or ():
        sock.setsockopt(*option)
    return _Stream(connection)
