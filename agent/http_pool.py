"""The outbound client's pool and gate, below httpx's API (so retries, timeouts, error
classes and ``respx`` in tests work as before).

Profiled under a burst, the daemon spent more CPU in the HTTP stack's bookkeeping than in
the requests themselves. httpcore's pool walks every queued request against every
connection each time a request starts or ends (about a third of a request's cost,
measured). ``GatedTransport`` lets at most ``max_connections`` requests in at once (the
rest wait on a semaphore, in order, no longer than the pool timeout), each holding its
place until its response is closed; with that bound kept outside, the pool only has to
keep idle connections, which ``IdlePool`` does with a list. (Through a proxy, httpcore's
own proxy pool is used as is.) Sockets are asyncio's own (``agent/http_backend.py``).

``IdlePool`` still sends through httpcore's ``AsyncHTTPConnection``, so ``respx`` mocks it
like any other httpx client.
"""

from __future__ import annotations

import asyncio
import ssl
import typing
from functools import partial

import httpcore
import httpx

from agent.http_backend import AsyncioBackend


class IdlePool:
    """The idle HTTP/1.1 connections, newest last, in the pool's place in httpx's
    transport. How many requests are in flight is bounded above it (``GatedTransport``),
    so taking a request is: reuse an idle connection to the same origin the server has not
    closed, or open a new one (closing the oldest idle one if ``max_connections`` are
    open); and a response's close hands its connection back."""

    def __init__(
        self,
        ssl_context: ssl.SSLContext,
        max_connections: int,
        keepalive_expiry: float | None,
        network_backend: httpcore.AsyncNetworkBackend,
    ) -> None:
        self._ssl_context = ssl_context
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._network_backend = network_backend
        self._idle: list[httpcore.AsyncHTTPConnection] = []
        self._busy = 0  # connections serving a request
        self._closed = False

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        connection = await self._take(request.url.origin)
        self._busy += 1
        try:
            response = await connection.handle_async_request(request)
        except BaseException:
            self._busy -= 1
            await connection.aclose()
            raise
        response.stream = _ClosingStream(response.stream, partial(self.give_back, connection))
        return response

    async def _take(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        idle = self._idle
        for index in range(len(idle) - 1, -1, -1):
            connection = idle[index]
            if connection.can_handle_request(origin):
                del idle[index]
                if not connection.has_expired():  # kept too long, or closed by the server
                    return connection
                await connection.aclose()
        if idle and self._busy + len(idle) >= self._max_connections:
            await idle.pop(0).aclose()  # no more open than the limit: the oldest idle goes
        return httpcore.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._keepalive_expiry,
            network_backend=self._network_backend,
        )

    async def give_back(self, connection: httpcore.AsyncHTTPConnection) -> None:
        """After its response is closed: kept if it can take another request."""
        self._busy -= 1
        if self._closed or not connection.is_idle():
            await connection.aclose()
            return
        self._idle.append(connection)
        if self._busy + len(self._idle) > self._max_connections:
            await self._idle.pop(0).aclose()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()

    async def __aenter__(self) -> IdlePool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _ClosingStream(httpx.AsyncByteStream):
    """A response body that runs ``then`` once, after the body is closed: a connection
    handed back to ``IdlePool``, a place given back in ``GatedTransport``'s gate."""

    def __init__(
        self,
        inner: typing.AsyncIterable[bytes],
        then: typing.Callable[[], typing.Awaitable[None]],
    ) -> None:
        self._inner = inner
        self._then: typing.Callable[[], typing.Awaitable[None]] | None = then

    async def __aiter__(self) -> typing.AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            close = getattr(self._inner, "aclose", None)  # a mocked body may have none
            if close is not None:
                await close()
        finally:
            then, self._then = self._then, None
            if then is not None:
                await then()


class GatedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, max_connections: int, proxy: str | None) -> None:
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        super().__init__(limits=limits, proxy=proxy, trust_env=False)
        # httpx takes no network backend of its own; the pool it builds does (httpcore 1.x).
        built = self._pool
        if not hasattr(built, "_network_backend") or not hasattr(built, "_ssl_context"):
            raise RuntimeError("httpcore changed: the connection pool has no network backend")
        if proxy is None:
            self._pool = IdlePool(  # type: ignore[assignment]
                built._ssl_context, max_connections, limits.keepalive_expiry, AsyncioBackend()
            )
        else:
            built._network_backend = AsyncioBackend()
        self._gate = asyncio.Semaphore(max_connections)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        # All places taken: wait no longer than the pool would. (``asyncio.timeout``, not
        # ``wait_for``: a place won just as the wait is cancelled is then never lost.)
        wait = request.extensions.get("timeout", {}).get("pool")
        try:
            async with asyncio.timeout(wait):
                await self._gate.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no connection free in time", request=request) from None
        try:
            response = await super().handle_async_request(request)
        except BaseException:
            self._gate.release()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _ClosingStream(response.stream, self._give_place)
        return response

    async def _give_place(self) -> None:
        self._gate.release()


async def post_json(
    transport: httpx.AsyncBaseTransport,
    url: str | httpx.URL,
    body: object,
    headers: dict[str, str],
    timeout: httpx.Timeout,
    params: dict[str, str] | None = None,
) -> httpx.Response:
    """POST ``body`` as JSON straight to ``transport`` and read the whole answer.

    What ``AsyncClient.post`` does for a JSON call to an API, without the layers this
    daemon never uses on its sends (cookies, auth flows, redirects, event hooks, base URL
    merging), which profiled at a third of the client's cost per request. Errors are
    httpx's own classes, as from the client.
    """
    request = httpx.Request(
        "POST",
        url,
        params=params,
        json=body,
        headers=headers,
        extensions={"timeout": timeout.as_dict()},
    )
    response = await transport.handle_async_request(request)
    response.request = request
    try:
        await response.aread()
    finally:
        await response.aclose()
    return response
