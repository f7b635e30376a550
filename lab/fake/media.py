"""The old-style media upload: ``POST /media/upload?access_token=…&type=image|file`` with
the file in the multipart field ``media`` answers ``{errcode: 0, media_id}``
(``../shared/dingtalk-workspace-apis.md`` §8). A later image or file message names the
media id; the fake shows the uploaded file's name as that message's text. The fault target
``media_upload`` refuses an upload (with its status) or stalls it.

Like DingTalk, the fake checks what it is given: a token, a known ``type``, a file at most
20 MB, and (it reads the bytes) an image that is a picture DingTalk shows or a file of a
type it takes.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets

from aiohttp import BodyPartReader, web

from agent.contracts.filetypes import MAX_UPLOAD_BYTES, outbound_form, sniff
from lab.fake.http import PLATFORM, errcode
from lab.fake.state import UploadedMedia

UPLOAD_TYPES = ("image", "file", "voice", "video")


async def _media_part(request: web.Request) -> tuple[str, bytes] | None:
    """The ``media`` part's file name and bytes, or None when there is none."""
    try:
        reader = await request.multipart()
    except (AssertionError, ValueError, KeyError):
        return None
    while True:
        part = await reader.next()
        if part is None:
            return None
        if isinstance(part, BodyPartReader) and part.name == "media":
            data = await part.read(decode=False)
            return part.filename or "", bytes(data)


async def upload(request: web.Request) -> web.Response:
    platform = request.app[PLATFORM]
    app = platform.token_app(request.query.get("access_token"))
    if app is None:
        return errcode(40014, "不合法的access_token")
    kind = request.query.get("type", "")
    if kind not in UPLOAD_TYPES:
        return errcode(40004, f"不合法的媒体文件类型 {kind}")
    part = await _media_part(request)
    if part is None:
        return errcode(41005, "缺少多媒体文件数据 media")
    name, data = part
    fault = platform.take_fault("media_upload")
    if fault is not None:
        if fault.timeout:
            await asyncio.sleep(platform.timeout_fault_s)
        return web.json_response(
            {"errcode": -1, "errmsg": f"系统繁忙 (HTTP {fault.answer_status})"},
            status=fault.answer_status,
        )
    if not data or len(data) > MAX_UPLOAD_BYTES:
        return errcode(40006, f"不合法的文件大小 {len(data)}")
    form = outbound_form(sniff(data, name), name)
    if kind in ("image", "file") and (form is None or form.kind != kind):
        return errcode(40004, f"不合法的媒体文件类型: {name}")
    media_id = "@lA" + secrets.token_urlsafe(18)
    platform.media[media_id] = UploadedMedia(
        media_id=media_id,
        kind=kind,
        name=name,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        robot_code=app.robot_code,  # only this robot may send it
        data=data,
    )
    return web.json_response(
        {"errcode": 0, "errmsg": "ok", "type": kind, "media_id": media_id, "created_at": 0}
    )


def media_routes() -> list[web.RouteDef]:
    return [web.post("/media/upload", upload)]
