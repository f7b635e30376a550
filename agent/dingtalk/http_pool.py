"""The outbound client's pool, below httpx's API (so retries, timeouts, error classes and
``respx`` in tests work as before).

Profiled under a burst, the daemon spent more CPU in the HTTP stack's bookkeeping than in
the requests themselves. httpcore's pool walks every queued request against every
connection each time a request starts or ends, and its HTTP/1.1 connection runs h11 and
anyio locks around every exchange. ``IdlePool`` lets at most ``max_connections`` requests
in at once (the rest wait on a semaphore, in order, no longer than the pool timeout) and
otherwise only keeps idle connections, in a list; each request goes over a
``WireConnection`` (agent/dingtalk/http_wire.py: HTTP/1.1 parsed by llhttp). Sockets are asyncio's
own (agent/dingtalk/http_backend.py). Through a proxy, httpcore's own proxy pool is used as is.

A response that arrived whole hands its connection and its place back at once; one that
streams holds both until its body is closed.

A message send does not wait for a place inside its request: waiting is not failing, and
a send stopped while it waited must leave no attempt behind. The broker takes a ``Place``
first (``IdlePool.reserve``: as long as it takes, no pool timeout), records its attempt,
and sends on that place (the request's ``PLACE`` extension), so an attempt is only ever
recorded when its bytes can leave at once. The access token's request takes no place
(``EXEMPT``): every send waits on it, so it must never queue behind them.

``respx`` mocks ``WireConnection`` like httpcore's own connections once it is added to its
targets (tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import ssl
import typing
from functools import partial

import httpcore
import httpx

from agent.dingtalk.http_backend import AsyncioBackend
from agent.dingtalk.http_places import Places
from agent.dingtalk.http_wire import WireConnection

# The request extension naming the place a request was sent on (see the module docstring).
PLACE = "dta_place"


class Place:
    """A place in the pool held across one send's requests; ``release`` gives it back."""

    def __init__(self, pool: IdlePool | None) -> None:
        self._pool = pool

    @property
    def held(self) -> bool:
        return self._pool is not None

    def release(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool._places.release()

    async def __aenter__(self) -> Place:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


# Taken by a request that must not wait behind the sends (the access token).
EXEMPT = Place(None)


class IdlePool:
    """The pool in httpx's transport: at most ``max_connections`` requests in flight, and
    the idle HTTP/1.1 connections, newest last. Taking a request is: wait for a place,
    reuse an idle connection to the same origin the server has not closed, or open a new
    one (closing the oldest idle one if ``max_connections`` are open); a finished
    response hands its connection and its place back."""

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
        self._idle: list[WireConnection] = []
        self._busy = 0  # connections serving a request
        self._closed = False
        self._places = Places(max_connections)

    async def reserve(self) -> Place:
        """A place for a send, waited for as long as it takes (in order)."""
        await self._places.acquire()
        return Place(self)

    async def _take_place(self, request: httpcore.Request) -> bool:
        """Wait for a place unless the request brings one; True when it took its own
        (handed back with the connection)."""
        brought = request.extensions.get(PLACE)
        if isinstance(brought, Place):
            return False
        # all places taken: wait no longer than the pool timeout
        await self._places.acquire(request.extensions.get("timeout", {}).get("pool"))
        return True

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        own_place = await self._take_place(request)
        try:
            connection = await self._take(request.url.origin)
        except BaseException:
            if own_place:
                self._places.release()
            raise
        self._busy += 1
        try:
            response = await connection.handle_async_request(request)
        except BaseException:
            await connection.aclose()
            await self.give_back(connection, own_place)
            raise
        if connection.is_idle() or connection.is_closed():  # the answer arrived whole
            await self.give_back(connection, own_place)
        else:
            then = partial(self.give_back, connection, own_place)
            response.stream = _ClosingStream(response.stream, then)
        return response

    async def _take(self, origin: httpcore.Origin) -> WireConnection:
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
        return WireConnection(
            origin, self._ssl_context, self._keepalive_expiry, self._network_backend
        )

    async def give_back(self, connection: WireConnection, own_place: bool = True) -> None:
        """Once its response is read: kept if it can take another request; the place goes
        back either way (a reserved one, when its holder releases it)."""
        self._busy -= 1
        if own_place:
            self._places.release()
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
    """A response body that runs ``then`` once, after the body is closed: its connection
    and its place handed back to ``IdlePool``."""

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


class OutboundTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with ``IdlePool`` in its pool's place (or, through a proxy,
    httpcore's proxy pool over asyncio's sockets)."""

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
            context = built._ssl_context
            context.set_alpn_protocols(["http/1.1"])  # what WireConnection speaks
            self._pool = IdlePool(  # type: ignore[assignment]
                context, max_connections, limits.keepalive_expiry, AsyncioBackend()
            )
        else:
            built._network_backend = AsyncioBackend()

    async def reserve(self) -> Place:
        """A place for a send (``IdlePool.reserve``); through a proxy, none to hold."""
        pool = self._pool
        return await pool.reserve() if isinstance(pool, IdlePool) else Place(None)

    async def post_json(
        self,
        url: str | httpx.URL,
        body: object,
        headers: dict[str, str],
        timeout: httpx.Timeout,
        params: dict[str, str] | None = None,
        place: Place | None = None,
    ) -> httpx.Response:
        """POST ``body`` as JSON straight to the pool and read the whole answer.

        What ``AsyncClient.post`` does for a JSON call to an API, without the layers this
        daemon never uses on its sends (cookies, auth flows, redirects, event hooks, base
        URL merging) and without httpx's request model, whose URL parser alone cost more
        than the rest of a request. The body is encoded as httpx encodes ``json=``; errors
        are httpx's own classes, as from the client. ``place``: a reserved place to send
        on, or ``EXEMPT`` to take none.
        """
        target = _wire_url(url, params)
        content = json.dumps(
            body, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode("utf-8")
        request = httpcore.Request(
            b"POST",
            target,
            headers=_json_headers(target, headers, len(content)),
            content=content,
            extensions={"timeout": timeout.as_dict()}
            if place is None
            else {"timeout": timeout.as_dict(), PLACE: place},
        )
        try:
            answer = await self._pool.handle_async_request(request)
            try:
                received = await answer.aread()
            finally:
                await answer.aclose()
        except (
            httpcore.TimeoutException,
            httpcore.NetworkError,
            httpcore.ProtocolError,
            httpcore.UnsupportedProtocol,
        ) as exc:
            raise _as_httpx(exc) from exc
        return _answer(answer, received)


def _answer(answer: httpcore.Response, received: bytes) -> httpx.Response:
    """The response as httpx's model. A body sent as it is (no ``Content-Encoding``: the
    daemon asks for none) is handed over as its content; building it through httpx's
    decoders cost more than the rest of reading the answer."""
    headers = httpx.Headers(answer.headers)
    if "content-encoding" in headers:
        return httpx.Response(
            answer.status, headers=headers, content=received, extensions=answer.extensions
        )
    response = httpx.Response(
        answer.status,
        headers=headers,
        stream=httpx.ByteStream(received),
        extensions=answer.extensions,
    )
    response._content = received  # what ``read()`` would set, without decoding it again
    return response


# httpcore's errors as httpx names them (what httpx's own transport maps them to).
_HTTPX_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.ProxyError: httpx.ProxyError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.ProtocolError: httpx.ProtocolError,
}


def _as_httpx(exc: Exception) -> httpx.TransportError:
    """The httpx error for an httpcore one: its most specific class."""
    for kind in type(exc).__mro__:
        mapped = _HTTPX_ERRORS.get(kind)
        if mapped is not None:
            return mapped(str(exc))
    return httpx.TransportError(str(exc))


def _json_headers(
    target: httpcore.URL, headers: dict[str, str], length: int
) -> list[tuple[bytes, bytes]]:
    """The request's headers as httpx would send them: ``Host`` first, the caller's, then
    the body's length and (unless the caller set one) its type."""
    host = target.host if target.port is None else b"%s:%d" % (target.host, target.port)
    sent = [(b"Host", host)]
    sent += [(name.encode("ascii"), value.encode("ascii")) for name, value in headers.items()]
    sent.append((b"Content-Length", b"%d" % length))
    if not any(name.lower() == "content-type" for name in headers):
        sent.append((b"Content-Type", b"application/json"))
    return sent


def _wire_url(url: str | httpx.URL, params: dict[str, str] | None) -> httpcore.URL:
    """The request's URL as httpcore takes it. A plain URL (every DingTalk endpoint and
    session webhook) is split by one pattern; anything else, or one with ``params`` to
    add, goes through httpx's parser, which also percent-encodes."""
    plain = _PLAIN_URL.fullmatch(url) if isinstance(url, str) and params is None else None
    if plain is not None:
        scheme, host, port, target = plain.group("scheme", "host", "port", "target")
        number = int(port) if port else None
        return httpcore.URL(
            scheme=scheme.encode(),
            host=host.lower().encode(),
            port=None if number == _DEFAULT_PORTS[scheme] else number,
            target=target.encode() if target else b"/",
        )
    parsed = httpx.URL(url)
    if params is not None:  # added to the query, as ``httpx.Request(params=…)`` does
        parsed = parsed.copy_merge_params(params)
    return httpcore.URL(
        scheme=parsed.raw_scheme, host=parsed.raw_host, port=parsed.port, target=parsed.raw_path
    )


# A URL with nothing to escape: a host name, a port, and a path and query in characters a
# URL may carry as they are (percent-escapes already made). Anything else is left to httpx.
_PLAIN_URL = re.compile(
    r"(?P<scheme>https?)://(?P<host>[A-Za-z0-9.\-]+)(?::(?P<port>[0-9]{1,5}))?"
    r"(?P<target>/(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9\-._~!$&'()*+,;=:@/?])*)?"
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
