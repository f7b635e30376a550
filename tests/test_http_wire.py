"""The HTTP/1.1 connection under the outbound client, against servers that answer exactly
the bytes each test gives them: framing, reuse, and failures in httpx's own classes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from agent.dingtalk.http_pool import OutboundTransport

TIMEOUT = httpx.Timeout(2.0)
OK_JSON = b'{"errcode":0}'


def _answer(body: bytes = OK_JSON, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
        % (len(body), extra, body)
    )


class Scripted:
    """A server that, for each request it reads, writes what ``reply`` returns for it (the
    request count, from 1), and closes the connection after an answer that says
    ``Connection: close``; None closes it without a word."""

    def __init__(self, reply: Callable[[int], bytes | None]) -> None:
        self.reply = reply
        self.requests: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                answer = self.reply(len(self.requests))
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer.split(b"\r\n\r\n", 1)[0]:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/robot/send?session=abc"

    async def __aexit__(self, *exc_info: object) -> None:
        assert self.server is not None
        self.server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)


async def _post(transport: OutboundTransport, url: str, body: object = None) -> httpx.Response:
    return await transport.post_json(url, body or {"text": "你好"}, {"Accept": "json"}, TIMEOUT)


@pytest.fixture
async def transport() -> AsyncIterator[OutboundTransport]:
    built = OutboundTransport(4, None)
    yield built
    await built.aclose()


async def test_a_json_call_goes_out_as_httpx_would_send_it(transport):
    server = Scripted(lambda n: _answer())
    async with server as url:
        answer = await _post(transport, url)
    assert answer.status_code == 200 and answer.json() == {"errcode": 0}
    sent = server.requests[0]
    head, body = sent.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /robot/send?session=abc HTTP/1.1"
    assert lines[1].startswith(b"Host: 127.0.0.1:")
    assert b"Content-Type: application/json" in lines
    assert b"Content-Length: %d" % len(body) in lines
    assert body == '{"text":"你好"}'.encode()  # httpx's json=: compact, UTF-8


async def test_keep_alive_connections_are_reused_and_close_is_honoured(transport):
    server = Scripted(lambda n: _answer(extra=b"Connection: close\r\n" if n == 2 else b""))
    async with server as url:
        for _ in range(4):
            assert (await _post(transport, url)).json() == {"errcode": 0}
    # 1 and 2 on the first connection (2 said close), 3 and 4 on a second.
    assert server.connections == 2


async def test_chunked_and_unframed_bodies_are_read_whole(transport):
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5\r\n{"a":\r\n3;x=y\r\n12}\r\n0\r\n\r\n'
    )
    unframed = b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"b":3}'
    replies = {1: chunked, 2: unframed}
    server = Scripted(lambda n: replies.get(n) if n in replies else None)
    async with server as url:
        assert (await _post(transport, url)).json() == {"a": 12}
        assert (await _post(transport, url)).json() == {"b": 3}


async def test_an_interim_answer_is_skipped(transport):
    server = Scripted(lambda n: b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + _answer())
    async with server as url:
        answer = await _post(transport, url)
    assert answer.status_code == 200 and "link" not in answer.headers


@pytest.mark.parametrize(("read_whole", "connections"), [(True, 1), (False, 2)])
async def test_a_streamed_body_returns_its_connection_only_once_read_whole(
    transport, read_whole, connections
):
    big = b"x" * 300_000
    server = Scripted(lambda n: _answer(big) if n == 1 else _answer())
    async with server as url:
        client = httpx.AsyncClient(transport=transport)
        async with client.stream("POST", url, json={}) as response:
            if read_whole:
                assert len(await response.aread()) == len(big)
            else:
                async for _ in response.aiter_raw():
                    break  # read a piece, then give up on the rest
        assert (await _post(transport, url)).json() == {"errcode": 0}
    # Given up halfway, the connection is closed rather than reused for the next request.
    assert server.connections == connections


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (None, httpx.RemoteProtocolError),  # closed without a word: it may have arrived
        (  # closed halfway through the body it announced
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 50\r\n\r\n{}",
            httpx.RemoteProtocolError,
        ),
        (b"NOT HTTP AT ALL\r\n\r\n", httpx.RemoteProtocolError),
    ],
)
async def test_a_broken_answer_is_a_protocol_error(transport, reply, error):
    def once(n: int) -> bytes | None:
        return reply

    server = Scripted(once)
    async with server as url:
        with pytest.raises(error):
            await _post(transport, url)
    assert transport._pool._busy == 0  # type: ignore[attr-defined]


async def test_no_answer_in_time_is_a_read_timeout_and_the_place_comes_back(transport):
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1000)
        await asyncio.sleep(2)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(httpx.ReadTimeout):
            await transport.post_json(f"http://127.0.0.1:{port}/", {}, {}, httpx.Timeout(0.2))
        pool = transport._pool  # type: ignore[attr-defined]
        assert pool._busy == 0 and not pool._idle
    finally:
        server.close()


async def test_nobody_listening_is_a_connect_error(transport):
    with pytest.raises(httpx.ConnectError):
        await transport.post_json("http://127.0.0.1:1/", {}, {}, TIMEOUT)


async def test_a_url_with_characters_to_escape_is_encoded_as_httpx_does(transport):
    server = Scripted(lambda n: _answer())
    async with server as url:
        await _post(transport, url.replace("session=abc", "name=张 三"))
        await transport.post_json(url, {}, {}, TIMEOUT, params={"k": "v w"})
    first, second = (request.split(b"\r\n", 1)[0] for request in server.requests)
    assert first == b"POST /robot/send?name=%E5%BC%A0%20%E4%B8%89 HTTP/1.1"
    assert second == b"POST /robot/send?session=abc&k=v+w HTTP/1.1"
