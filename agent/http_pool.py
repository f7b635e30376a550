"""The outbound HTTP client: httpx, with the pool's per-request bookkeeping made cheap.

Before handing out a kept-alive connection, and again when a response ends, httpcore asks
every idle connection in the pool whether the server has closed it (``is_readable``).
Through anyio each answer rebuilds the socket's attribute table (with ``getpeername``
calls) before the one ``poll`` that matters; profiled under a burst, that bookkeeping cost
the daemon more CPU than the requests themselves. ``CheapReadableBackend`` keeps anyio for
all I/O and TLS and answers ``is_readable`` from the socket it remembered at connect time.
"""

from __future__ import annotations

import socket
import ssl
import typing

import httpcore
import httpx
from httpcore._backends.auto import AutoBackend
from httpcore._utils import is_socket_readable

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _Stream(httpcore.AsyncNetworkStream):
    """anyio's stream, with its raw socket looked up once."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> typing.Any:
        if info == "is_readable":  # the server closed it (or sent something unasked)
            return is_socket_readable(self._socket)
        return self._inner.get_extra_info(info)


class CheapReadableBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._inner = AutoBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _Stream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def async_client(
    *, timeout: httpx.Timeout, max_connections: int, proxy: str | None
) -> httpx.AsyncClient:
    """The one outbound client: every kept-alive connection reused, the pool cheap to scan."""
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    transport = httpx.AsyncHTTPTransport(limits=limits, proxy=proxy, trust_env=False)
    pool = transport._pool
    # httpx takes no network backend of its own; the pool it builds does (httpcore 1.x).
    if not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpcore changed: the connection pool has no network backend")
    pool._network_backend = CheapReadableBackend()
    return httpx.AsyncClient(timeout=timeout, transport=transport, trust_env=False)
