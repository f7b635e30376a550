"""HTTP/1.1 on one connection, parsed by llhttp (``httptools``): what httpcore's
``AsyncHTTPConnection`` and h11 do for the daemon's requests, at a fraction of the CPU.

Profiled under a burst, every reply and every directory lookup spent most of its client
CPU in h11 (a pure-Python state machine, event objects per header block and body chunk)
and in httpcore's anyio locks around it. ``WireConnection`` keeps httpcore's connection
interface (``IdlePool`` in agent/dingtalk/http_pool.py hands it ``httpcore.Request`` and gets an
``httpcore.Response``, so httpx's transport, its error classes and ``respx`` work as
before) and does the HTTP itself: the request head is written in one piece, the answer
is parsed by llhttp, the parser Node.js uses, in C.

A response that has fully arrived by the time its headers are parsed (every JSON answer
from DingTalk) is handed over as bytes and the connection is idle at once; a longer one
(a file download) streams, and the connection is reusable once its body has been read
to the end. Errors are httpcore's own classes, which httpx maps to its own: a connection
that could not be made is ``ConnectError``/``ConnectTimeout`` (the request never left),
anything after the first byte went out is a read, write or protocol error (it may have
arrived).
"""

from __future__ import annotations

import enum
import ssl
import time
import typing

import httpcore
import httptools

READ_BYTES = 64 * 1024  # the most one read takes from the socket's buffer
_CHUNKED = b"chunked"


class _State(enum.Enum):
    NEW = "new"  # not connected yet
    ACTIVE = "active"  # a request is being sent or its answer read
    IDLE = "idle"  # kept open, may take the next request
    CLOSED = "closed"


class _Answer:
    """llhttp's callbacks for one response: status, headers and body as they are parsed."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.status = 0
        self.headers_done = False
        self.done = False
        self.keep_alive = False  # read at the end: llhttp forgets it once the message is over
        self.extra = False  # bytes after the response: the connection cannot be trusted

    # llhttp's side
    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200 and self.status != 101:
            # An interim answer (e.g. 103 Early Hints): the real one follows.
            self.reason, self.headers, self.headers_done = b"", [], False
            return
        self.keep_alive = self.parser.should_keep_alive()
        self.done = True

    # ours
    def feed(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise httpcore.RemoteProtocolError("the server switched protocols") from None
        except httptools.HttpParserError as exc:
            raise httpcore.RemoteProtocolError(f"malformed response: {exc}") from None

    def delimited(self) -> bool:
        """Does the response say where its body ends (a length or chunks), rather than
        ending with the connection?"""
        for name, value in self.headers:
            lowered = name.lower()
            if lowered == b"content-length":
                return True
            if lowered == b"transfer-encoding" and _CHUNKED in value.lower():
                return True
        return False

    def take_body(self) -> list[bytes]:
        body, self.body = self.body, []
        return body


def _head(request: httpcore.Request) -> bytearray:
    head = bytearray(request.method)
    head += b" "
    head += request.url.target
    head += b" HTTP/1.1\r\n"
    for name, value in request.headers:
        head += name
        head += b": "
        head += value
        head += b"\r\n"
    head += b"\r\n"
    return head


def _header_has(request: httpcore.Request, header: bytes, token: bytes) -> bool:
    return any(name.lower() == header and token in value.lower() for name, value in request.headers)


class WireConnection(httpcore.AsyncConnectionInterface):
    """One keep-alive HTTP/1.1 connection to one origin, one request at a time."""

    def __init__(
        self,
        origin: httpcore.Origin,
        ssl_context: ssl.SSLContext,
        keepalive_expiry: float | None,
        network_backend: httpcore.AsyncNetworkBackend,
    ) -> None:
        self._origin = origin
        self._ssl_context = ssl_context
        self._keepalive_expiry = keepalive_expiry
        self._network_backend = network_backend
        self._stream: httpcore.AsyncNetworkStream | None = None
        self._state = _State.NEW
        self._expires_at: float | None = None
        self._served = 0
        self._close_after = False  # the request asked for "Connection: close"

    # ------------------------------------------------------------------ the pool's view

    def can_handle_request(self, origin: httpcore.Origin) -> bool:
        return origin == self._origin

    def is_available(self) -> bool:
        return self._state in (_State.NEW, _State.IDLE)

    def has_expired(self) -> bool:
        """Kept past its expiry, or closed (or written to) by the server while idle."""
        if self._state is not _State.IDLE:
            return self._state is _State.CLOSED
        if self._expires_at is not None and time.monotonic() > self._expires_at:
            return True
        assert self._stream is not None
        return bool(self._stream.get_extra_info("is_readable"))

    def is_idle(self) -> bool:
        return self._state is _State.IDLE

    def is_closed(self) -> bool:
        return self._state is _State.CLOSED

    def info(self) -> str:
        return f"HTTP/1.1, {self._state.value.upper()}, Request Count: {self._served}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} [{self._origin}, {self.info()}]>"

    async def aclose(self) -> None:
        self._state = _State.CLOSED
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.aclose()

    # ------------------------------------------------------------------ a request

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if not self.can_handle_request(request.url.origin):
            raise RuntimeError(f"request to {request.url.origin} on a connection to {self._origin}")
        if not self.is_available():
            raise httpcore.ConnectionNotAvailable()
        timeouts = request.extensions.get("timeout", {})
        self._state = _State.ACTIVE
        self._served += 1
        if self._stream is None:
            try:
                self._stream = await self._connect(request, timeouts.get("connect"))
            except BaseException:
                self._state = _State.CLOSED
                raise
        try:
            await self._send(self._stream, request, timeouts.get("write"))
            return await self._receive(self._stream, request, timeouts.get("read"))
        except BaseException:  # cancelled or failed mid-exchange: what is on the wire is unknown
            await self.aclose()
            raise

    async def _connect(
        self, request: httpcore.Request, timeout: float | None
    ) -> httpcore.AsyncNetworkStream:
        host = self._origin.host.decode("ascii")
        stream = await self._network_backend.connect_tcp(host, self._origin.port, timeout)
        if self._origin.scheme == b"https":
            server_name = request.extensions.get("sni_hostname") or host
            stream = await stream.start_tls(self._ssl_context, server_name, timeout)
        return stream

    async def _send(
        self, stream: httpcore.AsyncNetworkStream, request: httpcore.Request, timeout: float | None
    ) -> None:
        """The head and the body's first piece in one write (a JSON call is one write)."""
        chunked = _header_has(request, b"transfer-encoding", _CHUNKED)
        self._close_after = _header_has(request, b"connection", b"close")
        pending = _head(request)
        async for piece in typing.cast(typing.AsyncIterable[bytes], request.stream):
            if not piece:
                continue
            if chunked:
                pending += b"%x\r\n" % len(piece)
                pending += piece
                pending += b"\r\n"
            else:
                pending += piece
            if len(pending) >= READ_BYTES:
                await stream.write(bytes(pending), timeout)
                pending = bytearray()
        if chunked:
            pending += b"0\r\n\r\n"
        if pending:
            await stream.write(bytes(pending), timeout)

    async def _receive(
        self, stream: httpcore.AsyncNetworkStream, request: httpcore.Request, timeout: float | None
    ) -> httpcore.Response:
        answer = _Answer()
        while not answer.headers_done:
            data = await stream.read(READ_BYTES, timeout)
            if not data:
                raise httpcore.RemoteProtocolError(
                    "Server disconnected without sending a response."
                )
            answer.feed(data)
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": answer.reason}
        if request.method == b"HEAD":  # llhttp cannot know that no body follows
            await self.aclose()
            return httpcore.Response(answer.status, headers=answer.headers, extensions=extensions)
        if answer.done:
            await self._settle(answer)
            content = b"".join(answer.take_body())
            return httpcore.Response(
                answer.status, headers=answer.headers, content=content, extensions=extensions
            )
        body = _Body(self, stream, answer, timeout)
        return httpcore.Response(
            answer.status, headers=answer.headers, content=body, extensions=extensions
        )

    async def _settle(self, answer: _Answer) -> None:
        """The response is complete: keep the connection if both sides allow it."""
        if answer.extra or not answer.keep_alive or self._close_after:
            await self.aclose()
            return
        self._state = _State.IDLE
        if self._keepalive_expiry is not None:
            self._expires_at = time.monotonic() + self._keepalive_expiry


class _Body:
    """A response body still arriving: yields what has been parsed, reads on until the end.
    Closed before the end, the connection is closed too (its next bytes are this body's)."""

    def __init__(
        self,
        connection: WireConnection,
        stream: httpcore.AsyncNetworkStream,
        answer: _Answer,
        timeout: float | None,
    ) -> None:
        self._connection = connection
        self._stream = stream
        self._answer = answer
        self._timeout = timeout

    async def __aiter__(self) -> typing.AsyncIterator[bytes]:
        answer = self._answer
        try:
            while True:
                for piece in answer.take_body():
                    yield piece
                if answer.done:
                    break
                data = await self._stream.read(READ_BYTES, self._timeout)
                if not data:
                    if answer.delimited():
                        raise httpcore.RemoteProtocolError(
                            "peer closed connection without sending complete message body"
                        )
                    answer.extra = True  # the body ended with the connection
                    answer.done = True
                    continue
                answer.feed(data)
        except BaseException:
            await self._connection.aclose()
            raise
        await self._connection._settle(answer)

    async def aclose(self) -> None:
        if not self._answer.done:
            await self._connection.aclose()
