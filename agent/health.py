"""Loopback health, readiness and metrics for operators and supervisors.

/healthz   the process is up and its loop answers
/readyz    connected to DingTalk and the store takes writes (503 with reasons if not)
/metrics   Prometheus text
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from agent.connector import Connector
from agent.metrics import Metrics
from storage import Store


class HealthServer:
    def __init__(
        self, host: str, port: int, store: Store, connector: Connector, metrics: Metrics
    ) -> None:
        self.host, self.port = host, port
        self.store, self.connector, self.metrics = store, connector, metrics
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

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

    async def _readyz(self, request: web.Request) -> web.Response:
        problems = []
        if not self.connector.connected:
            problems.append("stream not connected")
        if not self.store.writable():
            problems.append("store not writable")
        body = {
            "ready": not problems,
            "problems": problems,
            "connects": self.connector.stats.connects,
        }
        return web.json_response(body, status=200 if not problems else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )
