"""Loopback health, readiness and metrics for operators and supervisors.

/healthz   the process is up and its loop answers
/readyz    connected to DingTalk and the store takes writes (503 with reasons if not)
/metrics   Prometheus text

Readiness never touches the store on the loop: the daemon's ``StoreMonitor`` probes it on a
worker thread and ``store_health`` returns its latest answer (plus a fresh ``stat`` of the
file). Without a monitor, each request runs the probe through the executor instead.

    async with HealthServer(host, port, store, connector, metrics) as health:
        print(health.url)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from agent.daemon.metrics import Metrics
from agent.dingtalk.connector import Connector
from storage import Store
from storage.integrity import StoreHealth

PROBE_TIMEOUT_S = 0.5  # the on-request probe's busy timeout, when there is no monitor


class HealthServer:
    def __init__(
        self,
        host: str,
        port: int,
        store: Store,
        connector: Connector,
        metrics: Metrics,
        store_health: Callable[[], StoreHealth] | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.store, self.connector, self.metrics = store, connector, metrics
        self.store_health = store_health
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    async def __aenter__(self) -> HealthServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = site._server.sockets if site._server else []  # the real port when 0 was asked
        port = sockets[0].getsockname()[1] if sockets else self.port
        self.url = f"http://{self.host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _store_health(self) -> StoreHealth:
        if self.store_health is not None:
            return self.store_health()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.store.probe, PROBE_TIMEOUT_S)

    async def _readyz(self, request: web.Request) -> web.Response:
        problems = []
        if not self.connector.connected:
            problems.append("stream not connected")
        store = await self._store_health()
        if not store.ok:
            problems.append(f"{store.problem}: {store.detail}")
        body = {
            "ready": not problems,
            "problems": problems,
            "store": store.to_dict(),
            "paused": self.connector.stats.paused,
            "connects": self.connector.stats.connects,
        }
        return web.json_response(body, status=200 if not problems else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )
