"""``dta run``: the daemon an operator leaves running against a robot.

Start-up order matters: the runtime reconciles what a previous crash left (uncertain
attempts, unfinished runs) before the connector opens the stream, so recovered work and
new frames never race. Shutdown is the reverse and bounded: stop taking frames, give
in-flight runs ``shutdown_grace_s`` to finish, then cancel the rest — their events are
stored and are picked up at the next start.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

from agent.config import ConfigError, Settings
from agent.connector import Connector, ConnectorConfig
from agent.contracts import Event
from agent.health import HealthServer
from agent.metrics import Metrics
from agent.recorder import FrameRecorder
from agent.runtime import Runtime, build_provider
from skills.loader import SkillLibrary

log = logging.getLogger("dta.daemon")


def connector_config(settings: Settings) -> ConnectorConfig:
    if not (settings.client_id and settings.client_secret):
        raise ConfigError(
            "client_id / client_secret: required to connect (set DINGTALK_CLIENT_ID and"
            " DINGTALK_CLIENT_SECRET, or client_id/client_secret in dta.toml)"
        )
    return ConnectorConfig(
        endpoint=settings.openapi_base_url,
        client_id=settings.client_id,
        client_secret=settings.client_secret.get_secret_value(),
        store_path=settings.store_path,
        store_synchronous=settings.store_synchronous,
        ping_interval_s=settings.stream_ping_interval_s,
        ping_timeout_s=settings.stream_ping_timeout_s,
        open_timeout_s=settings.open_connection_timeout_s,
        backoff_base_s=settings.reconnect_backoff_base_s,
        backoff_max_s=settings.reconnect_backoff_max_s,
    )


class Daemon:
    def __init__(self, settings: Settings, record: Path | None = None) -> None:
        self.settings = settings
        self.config = connector_config(settings)
        # Load (and so validate) skills and the provider now: a broken SKILL.md or provider
        # setting stops start-up with the file and field named, before anything connects.
        self.skills = SkillLibrary(settings.skill_paths)
        self.provider = build_provider(settings)
        self.record = record
        self.stopping = asyncio.Event()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.stopping.set)
        runtime = Runtime(self.settings, skills=self.skills, provider=self.provider)
        recorder = FrameRecorder(self.record, self.settings.secret_values) if self.record else None
        metrics: Metrics | None = None

        def hand_over(event: Event, generation: int) -> None:
            loop.call_soon_threadsafe(runtime.submit, event, generation)

        recovered = await runtime.start()
        connector = Connector(
            self.config,
            on_event=hand_over,
            on_frame=recorder,
            on_ack=lambda seconds: metrics.ack_latency.observe(seconds) if metrics else None,
            supersedes=runtime.response_gate.engages,  # pure: safe on the connector's thread
        )
        metrics = Metrics(runtime.store, connector)
        runtime.on_run_finished = lambda seconds: metrics.run_latency.observe(seconds)
        health = None
        if self.settings.health_port:
            health = HealthServer(
                self.settings.health_host,
                self.settings.health_port,
                runtime.store,
                connector,
                metrics,
            )
            url = await health.start()
            log.info("health server listening", extra={"url": url})
        connector.start()
        log.info(
            "daemon started",
            extra={
                "store": str(self.settings.store_path),
                "recovered": recovered,
                "provider": self.settings.provider,
            },
        )
        await self.stopping.wait()
        log.info("stopping")
        await loop.run_in_executor(None, connector.stop, 5.0)
        try:
            await asyncio.wait_for(runtime.drain(), self.settings.shutdown_grace_s)
        except TimeoutError:
            log.warning("in-flight runs left for recovery at the next start")
        await runtime.aclose()
        if health is not None:
            await health.stop()
        if recorder is not None:
            recorder.close()
        log.info("stopped")
        return 0
