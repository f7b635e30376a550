"""Loopback health, readiness and metrics for operators and supervisors.

/healthz   the process is up and its loop answers
/readyz    every robot connected to DingTalk and its store taking writes (503 naming the
           robots that are not, and why)
/metrics   Prometheus text, labelled by robot

Readiness never touches the store on the loop: the daemon's ``StoreMonitor`` probes each
store on a worker thread and a view's ``store_health`` returns its latest answer (plus a
fresh ``stat`` of the file). Without a monitor, each request runs the probe through the
executor instead.

    async with HealthServer(host, port, [RobotView(code, store, connector)], metrics) as health:
        print(health.url)
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from agent.daemon.metrics import Metrics, RobotView
from storage.integrity import StoreHealth

PROBE_TIMEOUT_S = 0.5  # the on-request probe's busy timeout, when there is no monitor


class HealthServer:
    def __init__(self, host: str, port: int, views: Sequence[RobotView], metrics: Metrics) -> None:
        self.host, self.port = host, port
        self.views, self.metrics = list(views), metrics
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

    @staticmethod
    async def _store_health(view: RobotView) -> StoreHealth | None:
        if view.store_health is not None:
            return view.store_health()
        if view.store is None:
            return None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, view.store.probe, PROBE_TIMEOUT_S)

    @staticmethod
    def _knowledge(view: RobotView) -> list[dict[str, Any]]:
        """DingTalk knowledge sources whose last sync failed, as the sync left them in
        memory (no store read on the loop): detail, not unreadiness — the robot answers
        from their last good snapshot."""
        states = view.knowledge() if view.knowledge is not None else []
        return [
            {"source": s.source, "problem": s.problem, "last_ok_at": s.last_ok_at}
            for s in states
            if s.problem
        ]

    async def _robot(self, view: RobotView) -> dict[str, Any]:
        """One robot's readiness: its problems, its store's health and its stream's state."""
        problems = [view.down] if view.down else []
        connector = view.connector
        if connector is not None and not connector.connected:
            why = connector.stats.open_failure
            problems.append(f"stream not connected ({why})" if why else "stream not connected")
        elif connector is None and not view.down:
            problems.append("not started")
        store = await self._store_health(view)
        if store is not None and not store.ok and not view.down:
            problems.append(f"{store.problem}: {store.detail}")
        return {
            "ready": not problems,
            "problems": problems,
            "store": store.to_dict() if store is not None else None,
            "paused": connector.stats.paused if connector is not None else None,
            "connects": connector.stats.connects if connector is not None else 0,
            "knowledge": self._knowledge(view),
        }

    async def _readyz(self, request: web.Request) -> web.Response:
        robots = {view.code: await self._robot(view) for view in self.views}
        named = len(robots) > 1  # one robot's problems need no name
        problems = [
            f"{code}: {problem}" if named else problem
            for code, robot in robots.items()
            for problem in robot["problems"]
        ]
        first = next(iter(robots.values()))
        body = {
            "ready": not problems,
            "problems": problems,
            "not_ready": [code for code, robot in robots.items() if not robot["ready"]],
            # the first robot's, as a deployment of one has always said
            "store": first["store"],
            "paused": first["paused"],
            "connects": first["connects"],
            "robots": robots,
        }
        return web.json_response(body, status=200 if not problems else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )
