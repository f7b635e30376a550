"""The daemon as a subprocess against the fake DingTalk: ``dta dev``, the integration tests,
the stream benchmark and the reliability scripts all start it this way.

Why a real subprocess and not an in-process runtime: the claims under test (``kill -9``
recovery, reconnects after a dead socket, memory over hours) are about the process an
operator runs, with its own sockets, threads and store. Sharing the harness's event loop
would hide exactly the failures they look for.

The fake DingTalk lives in the harness's loop (on a ``SystemClock``, real seconds); only
loopback addresses are used, and every proxy variable is removed from the daemon's
environment so nothing can leave the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agent.config import ConfigError
from lab.fake import FakeDingTalk
from storage import Store
from storage.backends.postgres import schema_for

ROOT = Path(__file__).resolve().parents[1]

# A short keepalive and backoff so a dead socket is noticed in about a second; quiet logs
# so that log volume does not become what a long run measures.
BASE_CONFIG: dict[str, Any] = {
    "stream_ping_interval_s": 0.5,
    "stream_ping_timeout_s": 0.5,
    "reconnect_backoff_base_s": 0.1,
    "reconnect_backoff_max_s": 2.0,
    "shutdown_grace_s": 3,
    "log_level": "WARNING",
}
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class DaemonError(RuntimeError):
    """The daemon did not come up; the message carries the tail of its log."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def toml_value(value: Any) -> str:
    """A TOML value for what ``tomllib`` reads (tables become inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a TOML string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise ConfigError(f"no TOML form for a {type(value).__name__} in this configuration")


def toml_text(config: dict[str, Any]) -> str:
    return "".join(f"{_key(key)} = {toml_value(value)}\n" for key, value in config.items())


async def until(check: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``check`` until it holds; False if it still fails at ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(interval)
    return check()


class DaemonProcess:
    """``dta run --config`` in a subprocess, pointed at ``fake``; restartable on one store."""

    def __init__(
        self,
        fake: FakeDingTalk,
        workdir: Path,
        config: dict[str, Any] | None = None,
        record: bool = False,
        store_url: str | None = None,
    ) -> None:
        self.fake = fake
        workdir = workdir.resolve()  # the daemon runs from the project root
        self.workdir = workdir
        self.record = workdir / "frames.jsonl" if record else None
        self.store_path = workdir / "dta.db"
        # PostgreSQL shared by replicas (the schema comes from the config's store_schema)
        self.store_url = store_url
        self.store_schema = (config or {}).get("store_schema")
        self.config_path = workdir / "dta.toml"
        self.health_port = free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.cwd = ROOT  # the daemon runs from the project root
        self.starts = 0
        workdir.mkdir(parents=True, exist_ok=True)
        # Session webhooks may go to the fake and nowhere else.
        settings = {**BASE_CONFIG, "webhook_origins": [fake.base_url], **(config or {})}
        self.config_path.write_text(
            toml_text(settings),
            encoding="utf-8",
        )

    def reconfigure(self, **changes: Any) -> dict[str, Any]:
        """Rewrite this daemon's ``dta.toml`` with ``changes`` (a key given ``None`` is
        removed), for its next start: a restart with ``paused = true``, say, and one back.
        Returns the settings now on file."""
        settings = tomllib.loads(self.config_path.read_text(encoding="utf-8"))
        for key, value in changes.items():
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        self.config_path.write_text(toml_text(settings), encoding="utf-8")
        return settings

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARS}
        env.update(
            DINGTALK_CLIENT_ID=self.fake.app_key,
            DINGTALK_CLIENT_SECRET=self.fake.app_secret,
            DINGTALK_ROBOT_CODE=self.fake.robot_code,
            DINGTALK_OPENAPI_ENDPOINT=self.fake.base_url,
            **(
                {"DTA_STORE_URL": self.store_url}
                if self.store_url
                else {"DTA_STORE_PATH": str(self.store_path)}
            ),
            DTA_HEALTH_PORT=str(self.health_port),
            NO_PROXY="127.0.0.1,localhost",
        )
        return env

    def _command(self) -> list[str]:
        """How ``dta run`` is started (a subclass may add interpreter flags)."""
        return [sys.executable, "-m", "agent.cli.main", "run", "--config", str(self.config_path)]

    async def start(
        self, timeout: float = 30.0, *extra: str, robots: list[str] | None = None
    ) -> float:
        """Spawn (``extra``: more ``dta run`` arguments, e.g. ``--new-store``) and wait
        until ``/readyz`` says the stream is up (only ``robots``' streams, when given: the
        others may be meant to fail); returns seconds taken."""
        started = time.monotonic()
        self.starts += 1
        record = ["--record", str(self.record)] if self.record else []
        with (self.workdir / f"daemon-{self.starts}.log").open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self._command(),
                *record,
                *extra,
                cwd=self.cwd,
                env=self._env(),
                stdout=log,
                stderr=log,
            )
        if not await self.ready(timeout, robots):
            await self.stop()
            raise DaemonError(f"dta run did not become ready:\n{self.log_tail()}")
        return time.monotonic() - started

    async def ready(self, timeout: float, robots: list[str] | None = None) -> bool:
        """Wait until ``/readyz`` says ready (or, given ``robots``, that each of them is)."""
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(trust_env=False) as client:
            while time.monotonic() < deadline and self.running:
                try:
                    response = await client.get(self.url("/readyz"), timeout=1)
                    if robots is None and response.status_code == 200:
                        return True
                    said = response.json().get("robots", {})
                    if robots and all(said.get(code, {}).get("ready") for code in robots):
                        return True
                except (httpx.HTTPError, ValueError):
                    pass
                await asyncio.sleep(0.05)
        return False

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.health_port}{path}"

    async def kill9(self) -> None:
        """An abrupt death: no handler runs, whatever was in flight is cut."""
        if self.proc is not None and self.running:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the process stands still (as a VM paused, or a long GC), holding its
        leases and connections, until ``resume``."""
        if self.proc is not None and self.running:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.running:
            self.proc.send_signal(signal.SIGCONT)

    async def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, as an operator stops it; the exit status (None if it had to be killed)."""
        if self.proc is None:
            return None
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.send_signal(signal.SIGCONT)  # a paused one takes its SIGTERM once resumed
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                await self.kill9()
                return None
        return self.proc.returncode

    async def stop(self) -> None:
        """Best-effort cleanup for ``finally`` blocks: never leaves the process behind."""
        await self.terminate(timeout=10.0)

    def rss_kb(self) -> int | None:
        """Resident memory of the daemon process (VmRSS), in kB; None when it is not running."""
        if self.pid is None or not self.running:
            return None
        try:
            status = Path(f"/proc/{self.pid}/status").read_text(encoding="ascii")
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return None

    def store(self, robot: str | None = None) -> Store:
        """A read-side connection on the daemon's store (WAL: safe while it runs); with
        several robots, ``robot``'s (its file beside the configured one, or its schema)."""
        if self.store_url:
            schema = schema_for(robot) if robot else self.store_schema
            return Store(self.store_url, schema=schema)
        return Store(self.store_path.with_name(f"{robot}.db") if robot else self.store_path)

    def log_tail(self, chars: int = 3000) -> str:
        logs = sorted(self.workdir.glob("daemon-*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text(errors="replace")[-chars:] if logs else ""
