"""The outbound client's pool: connections are reused, one the server closed is not, and
no more are open than the limit."""

import asyncio
import ssl

import httpcore
import httpx
import pytest
import trustme
from aiohttp import web

from agent.dingtalk.http_backend import AsyncioBackend
from agent.dingtalk.http_places import Places
from agent.dingtalk.http_pool import EXEMPT, OutboundTransport


async def _server(
    keepalive_s: float, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, str, list[int]]:
    peers: list[int] = []

    async def answer(request: web.Request) -> web.Response:
        peers.append(request.transport.get_extra_info("peername")[1])
        return web.json_response({"errcode": 0})

    app = web.Application()
    app.router.add_post("/send", answer)
    runner = web.AppRunner(app, keepalive_timeout=keepalive_s)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/send", peers


def _client(max_connections: int = 4) -> httpx.AsyncClient:
    """The client DingTalkAPI builds: its outbound transport, no environment proxies."""
    transport = OutboundTransport(max_connections, None)
    return httpx.AsyncClient(timeout=httpx.Timeout(5.0), transport=transport, trust_env=False)


async def test_the_client_uses_the_asyncio_backend():
    async with _client() as client:
        backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
        assert isinstance(backend, AsyncioBackend)


async def test_sequential_requests_share_one_connection():
    runner, url, peers = await _server(keepalive_s=30)
    try:
        async with _client() as client:
            for i in range(5):
                response = await client.post(url, json={"i": i})
                assert response.json() == {"errcode": 0}
        assert len(set(peers)) == 1
    finally:
        await runner.cleanup()


async def test_a_connection_the_server_closed_is_not_reused():
    runner, url, peers = await _server(keepalive_s=0.1)
    try:
        async with _client() as client:
            assert (await client.post(url, json={})).status_code == 200
            await asyncio.sleep(0.5)  # the server closes the idle connection meanwhile
            assert (await client.post(url, json={})).status_code == 200
        assert len(set(peers)) == 2
    finally:
        await runner.cleanup()


async def test_connections_to_several_origins_stay_within_the_limit():
    first, url_a, peers_a = await _server(keepalive_s=30)
    second, url_b, peers_b = await _server(keepalive_s=30)
    try:
        async with _client(max_connections=2) as client:
            pool = client._transport._pool  # type: ignore[attr-defined]
            for _ in range(3):
                await asyncio.gather(client.post(url_a, json={}), client.post(url_a, json={}))
                assert len(pool._idle) == 2
                await asyncio.gather(client.post(url_b, json={}), client.post(url_b, json={}))
                assert len(pool._idle) == 2  # A's were closed to make room, not kept beside
        # Each switch of origin opened two new connections: three rounds, six per server.
        assert len(set(peers_a)) == len(set(peers_b)) == 6
    finally:
        await first.cleanup()
        await second.cleanup()


async def test_no_more_requests_in_flight_than_connections():
    busy = {"now": 0, "most": 0}
    finish = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        await asyncio.sleep(0.02)
        busy["now"] -= 1
        return web.json_response({"errcode": 0})

    async def streaming(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = 8
        await response.prepare(request)
        await response.write(b"half")
        await finish.wait()  # the rest comes only when the test says so
        await response.write(b"done")
        return response

    app = web.Application()
    app.router.add_post("/send", slow)
    app.router.add_post("/stream", streaming)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    url = f"{base}/send"
    try:
        async with _client(max_connections=2) as c:
            answers = await asyncio.gather(*(c.post(url, json={"i": i}) for i in range(10)))
            assert [a.status_code for a in answers] == [200] * 10
            assert busy["most"] == 2
            # An answer that arrived whole gives its place back at once, read or not.
            async with c.stream("POST", url, json={}) as whole, c.stream("POST", url) as whole2:
                assert whole.status_code == whole2.status_code == 200
                assert (await c.post(url, json={})).status_code == 200
            # Bodies still arriving hold their places until they are closed: a third
            # request waits, then times out.
            stream = f"{base}/stream"
            async with c.stream("POST", stream) as held, c.stream("POST", stream) as held2:
                assert held.status_code == held2.status_code == 200
                with pytest.raises(httpx.PoolTimeout):
                    await c.post(url, json={}, timeout=httpx.Timeout(5.0, pool=0.1))
                finish.set()
                assert await held.aread() == await held2.aread() == b"halfdone"
            assert (await c.post(url, json={})).status_code == 200  # places given back
    finally:
        finish.set()
        await runner.cleanup()


async def test_tls_with_a_verified_certificate(tmp_path):
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_ctx)
    runner, url, peers = await _server(keepalive_s=30, ssl_context=server_ctx)
    url = url.replace("http://127.0.0.1", "https://localhost")
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    try:
        transport = OutboundTransport(2, None)
        transport._pool._ssl_context = client_ctx  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(3):
                answer = await client.post(url, json={})
                assert answer.json() == {"errcode": 0}
        assert len(set(peers)) == 1  # the second and third reused the TLS connection
        async with httpx.AsyncClient(transport=OutboundTransport(2, None)) as untrusting:
            with pytest.raises(httpx.ConnectError):  # not signed by a CA it trusts
                await untrusting.post(url, json={})
    finally:
        await runner.cleanup()


async def test_failures_keep_their_httpx_classes():
    async def never(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/slow", never)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        async with _client() as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.post(f"http://127.0.0.1:{port}/slow", timeout=0.2)
            with pytest.raises(httpx.ConnectError):  # nobody listens on port 1
                await client.post("http://127.0.0.1:1/send", json={})
    finally:
        await runner.cleanup()


async def test_a_reserved_place_waits_as_long_as_it_takes_and_the_token_never_waits():
    """A send waits for its place without a pool timeout (waiting is not failing), sends on
    it without waiting again, and gives it back; a request ``EXEMPT`` from the places (the
    access token) goes past sends holding all of them."""
    gate = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await gate.wait()
        return web.json_response({"errcode": 0})

    async def quick(request: web.Request) -> web.Response:
        return web.json_response({"accessToken": "t"})

    app = web.Application()
    app.router.add_post("/send", slow)
    app.router.add_post("/token", quick)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    transport = OutboundTransport(2, None)
    timeout = httpx.Timeout(5.0, pool=0.05)
    try:

        async def send(i: int) -> int:
            async with await transport.reserve() as place:
                answer = await transport.post_json(
                    f"{base}/send", {"i": i}, {}, timeout, None, place
                )
                return answer.status_code

        sends = [asyncio.create_task(send(i)) for i in range(6)]
        await asyncio.sleep(0.3)  # six times the pool timeout: four sends still wait
        assert not any(task.done() for task in sends)
        token = await transport.post_json(f"{base}/token", {}, {}, timeout, None, EXEMPT)
        assert token.json() == {"accessToken": "t"}
        gate.set()
        assert await asyncio.gather(*sends) == [200] * 6
        assert transport._pool._places.free == 2  # every place given back
    finally:
        gate.set()
        await transport.aclose()
        await runner.cleanup()


async def test_places_go_in_turn_and_one_handed_to_a_waiter_that_gave_up_is_not_lost():
    places = Places(1)
    await places.acquire()
    order: list[str] = []

    async def wait(name: str, timeout: float | None = None) -> None:
        await places.acquire(timeout)
        order.append(name)

    late = asyncio.create_task(wait("late", timeout=0.01))
    first = asyncio.create_task(wait("first"))
    cancelled = asyncio.create_task(wait("cancelled"))
    second = asyncio.create_task(wait("second"))
    await asyncio.sleep(0.05)
    with pytest.raises(httpcore.PoolTimeout):
        await late  # its time ran out while the place was held
    cancelled.cancel()
    places.release()  # to "first", in turn
    await asyncio.sleep(0)
    places.release()  # "cancelled" gave up: to "second"
    await asyncio.gather(first, second)
    assert order == ["first", "second"] and places.free == 0
    # a place handed over just as its waiter is cancelled goes on to the next one
    places.release()
    places.release()
    assert places.free == 2
    await places.acquire()
    await places.acquire()
    doomed = asyncio.create_task(places.acquire())
    heir = asyncio.create_task(places.acquire())
    await asyncio.sleep(0)
    places.release()  # handed to doomed ...
    doomed.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await doomed
    await asyncio.wait_for(heir, 1)  # the place went on
    assert places.free == 0
