"""The fake DingTalk's robot message-file download: a code for a URL, the URL for bytes.

``POST /v1.0/robot/messageFiles/download`` with ``{downloadCode, robotCode}`` (token header)
answers ``{downloadUrl}``, a URL on this fake valid for a few minutes of the platform's clock;
``GET /_files/<token>`` serves the bytes. An unknown code is refused the way the OpenAPI
refuses a bad parameter (HTTP 400 with a ``code``); faults make a code expired, the call
refused (any status), the bytes slow or far larger than any cap.
"""

from __future__ import annotations

import asyncio
import secrets

from aiohttp import web

from lab.fake.faults import Fault
from lab.fake.http import PLATFORM, _authenticate, _json_body, _require, api_error

URL_TTL_S = 300.0  # real download URLs are short-lived; the fake's live five minutes
OVERSIZED_BYTES = 64 * 1024 * 1024  # what an ``oversized`` fault declares and streams
_CHUNK = b"\0" * 65536


async def message_file_download(request: web.Request) -> web.Response:
    platform = _authenticate(request)
    body = _require(request, await _json_body(request), ("downloadCode", "robotCode"))
    platform.downloads += 1
    code = body["downloadCode"]
    fault = platform.take_fault("download")
    if fault is not None and fault.expired:
        return api_error(400, "invalidParameter.downloadCode.expired", "downloadCode 已过期")
    if fault is not None and fault.status is not None:
        return api_error(fault.status, "Forbidden.AccessDenied", f"injected fault: {fault.status}")
    found = platform.files.get(code) if isinstance(code, str) else None
    if found is None:
        return api_error(400, "invalidParameter.downloadCode", "downloadCode 不合法")
    token = secrets.token_urlsafe(18)
    platform.download_urls[token] = (found, fault, platform.clock.now() + URL_TTL_S)
    return web.json_response({"downloadUrl": f"{platform.base_url}/_files/{token}"})


async def _oversized(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"Content-Type": "application/octet-stream"},
    )
    response.content_length = OVERSIZED_BYTES
    await response.prepare(request)
    sent = 0
    try:
        while sent < OVERSIZED_BYTES:
            await response.write(_CHUNK)
            sent += len(_CHUNK)
    except (ConnectionError, asyncio.CancelledError):
        pass  # the client stopped reading at its cap, as it should
    return response


async def serve_file(request: web.Request) -> web.StreamResponse:
    platform = request.app[PLATFORM]
    entry = platform.download_urls.get(request.match_info["token"])
    if entry is None or entry[2] <= platform.clock.now():
        return web.Response(status=403, text="AccessDenied: Request has expired")
    found, fault, _ = entry
    if isinstance(fault, Fault) and fault.timeout:
        await asyncio.sleep(platform.timeout_fault_s)
    if isinstance(fault, Fault) and fault.oversized:
        return await _oversized(request)
    return web.Response(body=found.data, headers={"Content-Type": found.mime})


def download_routes() -> list[web.RouteDef]:
    return [
        web.post("/v1.0/robot/messageFiles/download", message_file_download),
        web.get("/_files/{token}", serve_file),
    ]
