"""Headless Chromium driven over the DevTools protocol, for end-to-end tests of the console.

Debian's ``chromium`` package, started with a throwaway profile and told to reach nothing
but loopback (no proxy, no background networking, no component updates), then driven with
the ``websockets`` package dta already depends on: navigate, evaluate JavaScript in the
page, wait for a condition, take a screenshot. No browser download, no extra dependency.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets

# Flags that keep the browser quiet and local: it may talk to 127.0.0.1 and nothing else.
FLAGS = [
    "--headless=new",
    "--no-sandbox",  # CI runs as root, where the sandbox cannot start
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-sync",
    "--disable-breakpad",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--no-pings",
    "--dns-prefetch-disable",
    "--hide-scrollbars",
    "--window-size=1360,900",
    "--remote-debugging-port=0",
]


def find_chromium() -> str | None:
    """Debian's chromium (or the binary named by ``DTA_CHROMIUM``)."""
    named = os.environ.get("DTA_CHROMIUM")
    if named:
        return shutil.which(named) or (named if Path(named).exists() else None)
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.profile = Path(tempfile.mkdtemp(prefix="dta-chromium-"))
        self.proc: asyncio.subprocess.Process | None = None
        self.ws: Any = None
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Browser:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: float = 30.0) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            self.binary,
            *FLAGS,
            f"--user-data-dir={self.profile}",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not active.exists() or not active.read_text().strip():
            if time.monotonic() > deadline or self.proc.returncode is not None:
                raise BrowserError("chromium did not open its DevTools port")
            await asyncio.sleep(0.05)
        port = active.read_text().split()[0]
        async with httpx.AsyncClient(trust_env=False) as client:
            targets = (await client.get(f"http://127.0.0.1:{port}/json/list")).json()
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = await websockets.connect(page["webSocketDebuggerUrl"], max_size=None)
        self._reader = asyncio.ensure_future(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")

    async def _read(self) -> None:
        async for raw in self.ws:
            message = json.loads(raw)
            waiter = self._pending.pop(message.get("id", -1), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
            elif "method" in message:
                self.events.append(message)

    async def send(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[number] = waiter
        await self.ws.send(json.dumps({"id": number, "method": method, "params": params}))
        try:
            answer = await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            self._pending.pop(number, None)
            recent = [e["method"] for e in self.events[-8:]]
            message = f"{method}: no answer in {timeout:g} s (last events {recent})"
            raise BrowserError(message) from None
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", url=url)
        await self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    async def evaluate(self, expression: str, timeout: float = 10.0) -> Any:
        # A call made while the page navigates may never be answered: callers that poll
        # give it a short timeout and ask again.
        result = await self.send(
            "Runtime.evaluate",
            timeout=timeout,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def click(self, selector: str) -> None:
        """Click after this call returns: a click that navigates would otherwise take the
        answer to the call away with the old page."""
        found = await self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (!el) return false; setTimeout(() => el.click(), 0); return true; })()"
        )
        if not found:
            raise BrowserError(f"nothing to click at {selector}")

    async def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = await self.evaluate(expression, timeout=2.0)
            except BrowserError:
                value = None  # the page is between documents
            if value:
                return value
            if time.monotonic() > deadline:
                body = await self.evaluate("document.body ? document.body.innerText : ''")
                raise BrowserError(f"timed out waiting for {expression}; page:\n{body[:2000]}")
            await asyncio.sleep(0.1)

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
