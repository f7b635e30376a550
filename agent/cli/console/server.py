"""The web console: the store's conversations for operators, on 127.0.0.1 only.

Threads with each message's decision, receipts and refusals; filters for silences by
reason, failures, refusals and ``uncertain`` receipts; the ``dta trace`` chain of any
message; live updates; and the memory review queue, whose approve / reject is the same
compare-and-set as ``dta memory approve|reject`` (``agent/memory.review``).

Why the guards: the console reads conversations and can approve memories, so anything on
the machine that can reach a loopback port must not read it for free. It binds to
127.0.0.1; every request needs the token printed at start (``?token=`` once, which sets a
``SameSite=Strict`` HttpOnly cookie, or ``Authorization: Bearer``); a ``Host`` other than
the loopback address is refused (DNS rebinding), and a state-changing POST from another
origin is refused (cross-site forms).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import io
import json
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from jinja2 import Environment, PackageLoader, select_autoescape

from agent.cli.console.feedback_view import feedback_page
from agent.cli.console.job_views import jobs_list
from agent.cli.console.knowledge_view import knowledge_list
from agent.cli.console.views import Selection, approvals_list, badge, memory_queue, overview
from agent.cli.trace import trace_message
from agent.config import Settings
from agent.run import memory
from storage import Store

COOKIE = "dta_console"
HOST = "127.0.0.1"
TOKEN = web.AppKey("token", str)
STORE = web.AppKey("open_store", Callable[[], Store])
SETTINGS = web.AppKey("settings", Settings)
PAGES = web.AppKey("pages", Environment)


def _templates() -> Environment:
    env = Environment(
        loader=PackageLoader("agent", "templates"), autoescape=select_autoescape(["html", "j2"])
    )
    env.filters["badge"] = badge
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, ensure_ascii=False, indent=2)
    return env


def _open(app: web.Application) -> Store:
    """A store connection per request: SQLite or PostgreSQL, as the command chose."""
    return app[STORE]()


def _authorised(request: web.Request) -> bool:
    token = request.app[TOKEN]
    offered = request.cookies.get(COOKIE) or ""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        offered = header[len("Bearer ") :]
    return hmac.compare_digest(offered.encode(), token.encode())


def _loopback_host(request: web.Request) -> bool:
    host = (request.host or "").rsplit(":", 1)[0]
    return host in (HOST, "localhost")


@web.middleware
async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
    if not _loopback_host(request):
        return web.Response(status=403, text="the console answers on 127.0.0.1 only")
    offered = request.query.get("token")
    if offered is not None and request.method == "GET":
        if not hmac.compare_digest(offered.encode(), request.app[TOKEN].encode()):
            return web.Response(status=401, text="wrong token: use the URL dta printed")
        query = {k: v for k, v in request.query.items() if k != "token"}
        target = request.path + (f"?{urlencode(query)}" if query else "")
        response = web.Response(status=303, headers={"Location": target})
        response.set_cookie(COOKIE, offered, httponly=True, samesite="Strict", path="/")
        return response
    if not _authorised(request):
        return web.Response(status=401, text="open the console with the URL dta printed")
    if request.method == "POST":
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"http://{request.host}":
            return web.Response(status=403, text="cross-origin request refused")
    return await handler(request)


def _page(request: web.Request, template: str, **context: Any) -> web.Response:
    html = request.app[PAGES].get_template(template).render(**context)
    return web.Response(text=html, content_type="text/html", charset="utf-8")


async def _read(request: web.Request, work: Any) -> Any:
    """Run a store read off the loop: a busy store must not stall the live stream."""

    def read() -> Any:
        with _open(request.app) as store:
            return work(store)

    return await asyncio.get_running_loop().run_in_executor(None, read)


async def threads(request: web.Request) -> web.Response:
    try:
        selection = Selection(
            conversation=request.query.get("c") or None,
            only=request.query.get("only") or None,
            reason=request.query.get("reason") or None,
        )
    except ValueError as exc:
        return web.Response(status=400, text=str(exc))
    zone = request.app[SETTINGS].timezone
    data = await _read(request, lambda store: overview(store, selection, zone))
    return _page(request, "console_threads.html.j2", **data)


async def trace_page(request: web.Request) -> web.Response:
    msg_id, zone = request.match_info["msg"], request.app[SETTINGS].timezone
    trace = await _read(request, lambda store: trace_message(store, msg_id, zone))
    return _page(request, "console_trace.html.j2", trace=trace.to_dict())


async def trace_json(request: web.Request) -> web.Response:
    msg_id, zone = request.match_info["msg"], request.app[SETTINGS].timezone
    trace = await _read(request, lambda store: trace_message(store, msg_id, zone))
    return web.json_response(trace.to_dict(), dumps=lambda v: json.dumps(v, ensure_ascii=False))


async def approvals_page(request: web.Request) -> web.Response:
    zone = request.app[SETTINGS].timezone
    data = await _read(request, lambda store: approvals_list(store, zone))
    return _page(request, "console_approvals.html.j2", **data)


async def jobs_page(request: web.Request) -> web.Response:
    zone = request.app[SETTINGS].timezone
    data = await _read(request, lambda store: jobs_list(store, zone))
    return _page(request, "console_jobs.html.j2", **data)


async def feedback_view(request: web.Request) -> web.Response:
    zone = request.app[SETTINGS].timezone
    data = await _read(request, lambda store: feedback_page(store, zone))
    return _page(request, "console_feedback.html.j2", **data)


async def knowledge_page(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    data = await _read(request, lambda store: knowledge_list(store, settings))
    return _page(request, "console_knowledge.html.j2", **data)


async def memory_page(request: web.Request) -> web.Response:
    zone = request.app[SETTINGS].timezone
    data = await _read(request, lambda store: memory_queue(store, zone))
    return _page(request, "console_memory.html.j2", notice=request.query.get("notice"), **data)


async def review(request: web.Request) -> web.Response:
    """Approve or reject one candidate at the revision the operator saw (compare-and-set)."""
    form = await request.post()
    action = str(form.get("action", ""))
    try:
        revision = int(str(form.get("revision", "")))
    except ValueError:
        return web.Response(status=400, text="revision must be a number")
    if action not in ("approve", "reject"):
        return web.Response(status=400, text="action must be approve or reject")
    candidate = request.match_info["id"]
    said = io.StringIO()
    code = await _read(
        request,
        lambda store: memory.review(store, candidate, revision, action == "approve", said),
    )
    if request.headers.get("Accept") == "application/json":
        return web.json_response({"ok": code == 0, "message": said.getvalue().strip()})
    raise web.HTTPSeeOther(f"/memory?{urlencode({'notice': said.getvalue().strip()})}")


async def mark(request: web.Request) -> web.Response:
    """A value that changes whenever anything a page shows may have changed.

    Pages poll it (about once a second) and fetch themselves again when it moves. Polling,
    not a held-open stream: short requests never pile up against the browser's few
    connections per host, whatever pages were left open.
    """
    value = await _read(request, lambda store: store.inspect.change_mark())
    return web.json_response({"mark": ".".join(map(str, value))})


def build_app(open_store: Callable[[], Store], settings: Settings, token: str) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[TOKEN], app[STORE], app[SETTINGS], app[PAGES] = token, open_store, settings, _templates()
    app.add_routes(
        [
            web.get("/", threads),
            web.get("/trace/{msg}", trace_page),
            web.get("/api/trace/{msg}", trace_json),
            web.get("/api/mark", mark),
            web.get("/memory", memory_page),
            web.get("/approvals", approvals_page),
            web.get("/jobs", jobs_page),
            web.get("/knowledge", knowledge_page),
            web.get("/feedback", feedback_view),
            web.post("/memory/{id}", review),
        ]
    )
    return app


async def start_console(
    store: Path | Callable[[], Store],
    settings: Settings,
    port: int = 0,
    token: str | None = None,
) -> tuple[web.AppRunner, str]:
    """Serve on 127.0.0.1 the store at a SQLite path (or the one ``store()`` opens); returns
    the runner (``cleanup()`` stops it) and the URL to open, token included."""
    token = token or secrets.token_urlsafe(24)
    if isinstance(store, Path):
        path = store
        store = lambda: Store(path, settings.store_synchronous)  # noqa: E731
    # Cancel the live streams at shutdown instead of waiting for them to end.
    runner = web.AppRunner(
        build_app(store, settings, token),
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=0.2,
    )
    await runner.setup()
    site = web.TCPSite(runner, HOST, port)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, f"http://{HOST}:{bound}/?token={token}"


def serve_forever(
    open_store: Callable[[], Store], settings: Settings, where: str, port: int = 0
) -> int:
    """``dta console``: serve until Ctrl-C or SIGTERM; 0 then, 2 if the port is taken."""

    async def main() -> int:
        try:
            runner, url = await start_console(open_store, settings, port)
        except OSError as exc:
            print(f"dta: cannot listen on {HOST}:{port}: {exc.strerror}", file=sys.stderr)
            return 2
        print(f"console for {where}: {url}  (Ctrl-C stops it)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()
        return 0

    return asyncio.run(main())
