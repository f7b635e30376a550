"""The outbound client's pool: connections are reused, and one the server closed is not."""

import asyncio

import httpx
from aiohttp import web

from agent.http_pool import CheapReadableBackend, async_client


async def _server(keepalive_s: float) -> tuple[web.AppRunner, str, list[int]]:
    peers: list[int] = []

    async def answer(request: web.Request) -> web.Response:
        peers.append(request.transport.get_extra_info("peername")[1])
        return web.json_response({"errcode": 0})

    app = web.Application()
    app.router.add_post("/send", answer)
    runner = web.AppRunner(app, keepalive_timeout=keepalive_s)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/send", peers


def _client() -> httpx.AsyncClient:
    return async_client(timeout=httpx.Timeout(5.0), max_connections=4, proxy=None)


async def test_the_client_uses_the_cheap_backend():
    async with _client() as client:
        backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
        assert isinstance(backend, CheapReadableBackend)


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
