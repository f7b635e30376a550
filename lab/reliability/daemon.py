"""The shared harness of the reliability scripts: a ``dta run`` subprocess against a fake.

Why a real subprocess and not an in-process runtime: the claims under test (``kill -9``
recovery, reconnects after a dead socket, memory over hours) are about the process an
operator runs, with its own sockets, threads and store. Sharing the harness's event loop
would hide exactly the failures these scripts look for.

The fake DingTalk lives in the harness's loop (on a ``SystemClock``, real seconds); only
loopback addresses are used, and every proxy variable is removed from the daemon's
environment so nothing can leave the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import httpx

from lab.fake import FakeDingTalk
from storage import Store

ROOT = Path(__file__).resolve().parents[2]
Size = Literal["full", "reduced"]

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


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


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
        self, fake: FakeDingTalk, workdir: Path, config: dict[str, Any] | None = None
    ) -> None:
        self.fake = fake
        self.workdir = workdir
        self.store_path = workdir / "dta.db"
        self.config_path = workdir / "dta.toml"
        self.health_port = free_port()
        self.proc: asyncio.subprocess.Process | None = None
        self.starts = 0
        workdir.mkdir(parents=True, exist_ok=True)
        settings = {**BASE_CONFIG, **(config or {})}
        self.config_path.write_text(
            "".join(f"{key} = {_toml_value(value)}\n" for key, value in settings.items()),
            encoding="utf-8",
        )

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
            DTA_STORE_PATH=str(self.store_path),
            DTA_HEALTH_PORT=str(self.health_port),
            NO_PROXY="127.0.0.1,localhost",
        )
        return env

    async def start(self, timeout: float = 30.0) -> float:
        """Spawn and wait until ``/readyz`` says the stream is up; returns seconds taken."""
        started = time.monotonic()
        self.starts += 1
        with (self.workdir / f"daemon-{self.starts}.log").open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agent.cli",
                "run",
                "--config",
                str(self.config_path),
                cwd=ROOT,
                env=self._env(),
                stdout=log,
                stderr=log,
            )
        if not await self.ready(timeout):
            await self.stop()
            raise DaemonError(f"dta run did not become ready:\n{self.log_tail()}")
        return time.monotonic() - started

    async def ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(trust_env=False) as client:
            while time.monotonic() < deadline and self.running:
                try:
                    response = await client.get(self.url("/readyz"), timeout=1)
                    if response.status_code == 200:
                        return True
                except httpx.HTTPError:
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

    async def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, as an operator stops it; the exit status (None if it had to be killed)."""
        if self.proc is None:
            return None
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
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

    def store(self) -> Store:
        """A read-side connection on the daemon's store (WAL: safe while it runs)."""
        return Store(self.store_path)

    def log_tail(self, chars: int = 3000) -> str:
        logs = sorted(self.workdir.glob("daemon-*.log"), key=lambda p: p.stat().st_mtime)
        return logs[-1].read_text(errors="replace")[-chars:] if logs else ""


# --------------------------------------------------------------------------- messages


def question(i: int, base: int) -> str:
    """A DM the rules provider answers with arithmetic: each answer names its question."""
    return f"{i} + {base} 等于多少"


def answer(i: int, base: int) -> str:
    return f"{i} + {base} = {i + base}"


def send_dm(fake: FakeDingTalk, prefix: str, i: int, base: int) -> str:
    """One DM from its own sender, so no two messages share a thread (no superseding)."""
    msg_id = f"{prefix}-{i}"
    fake.inject({"msg": msg_id, "from": f"{prefix}-u{i}", "text": question(i, base)})
    return msg_id


def replies_per_user(fake: FakeDingTalk, start: int = 0) -> Counter[str]:
    """How many messages each one-to-one user received, from ``fake.received[start:]``."""
    counts: Counter[str] = Counter()
    for message in fake.received[start:]:
        for user in message.user_ids:
            counts[user] += 1
    return counts


def wrong_answers(fake: FakeDingTalk, prefix: str, base: int) -> int:
    """Replies whose text is not the answer to the recipient's own question."""
    wrong = 0
    for message in fake.received:
        for user in message.user_ids:
            index = user.removeprefix(f"{prefix}-u")
            if not index.isdigit() or message.text != answer(int(index), base):
                wrong += 1
    return wrong


def attempts_left_started(store: Store) -> int:
    """Attempts still ``started``: after a restart there must be none (they become uncertain)."""
    return sum(
        attempt.outcome.value == "started"
        for intent in store.intents()
        for attempt in store.attempts(intent.intent_id)
    )


def unfinished_runs(store: Store, event_ids: Iterable[str]) -> int:
    runs = (store.get_run(event_id) for event_id in event_ids)
    return sum(run is None or not run.state.is_finished for run in runs)


# --------------------------------------------------------------------------- reports


def seal(report: dict[str, Any], secrets: Iterable[str]) -> dict[str, Any]:
    """Check the report is JSON and carries no secret; a leak is a bug, so it raises."""
    text = json.dumps(report, ensure_ascii=False)
    for secret in secrets:
        if secret and secret in text:
            raise AssertionError("a secret reached the reliability report")
    return report


def cli(
    name: str,
    description: str,
    run: Callable[[Size, Path], Awaitable[dict[str, Any]]],
    argv: list[str] | None = None,
) -> int:
    """``python -m lab.reliability.<name> [--reduced] [--json] [--workdir DIR]``; 0 if passed."""
    parser = argparse.ArgumentParser(prog=f"dta lab reliability {name}", description=description)
    parser.add_argument("--reduced", action="store_true", help="the smaller CI-sized run")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--workdir", type=Path, help="keep the store and logs here")
    args = parser.parse_args(argv)
    size: Size = "reduced" if args.reduced else "full"
    if args.workdir is not None:
        report = asyncio.run(run(size, args.workdir))
    else:
        with tempfile.TemporaryDirectory(prefix=f"dta-{name}-") as tmp:
            report = asyncio.run(run(size, Path(tmp)))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        width = max(len(key) for key in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return 0 if report.get("passed") else 1
