"""A reply's attachment on the wire: uploaded once to DingTalk's media API, then sent as an
image or file message by the robot OpenAPI (a session webhook cannot carry a file: DingTalk
answers 401102 ``miss param : file->mediaId``).

    POST {oapi}/media/upload?access_token=…&type=image|file   multipart field ``media``
         → {errcode: 0, media_id: "@lA…"}
    msgKey sampleImageMsg {photoURL: media_id}
    msgKey sampleFile     {mediaId, fileName, fileType}

(``../shared/dingtalk-workspace-apis.md`` §8.) The upload belongs to the message's attempt:
stored before any I/O like every attempt, done once (a retried or throttled send reuses its
``media_id``), and a refused upload is a definite failure of that message alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import httpx

from agent.contracts import AttachmentRef
from agent.dingtalk.http_pool import PLACE, Place
from agent.dingtalk.openapi import TOKEN_ERRCODES, DingTalkAPI, TokenError, json_object

log = logging.getLogger("dta.media")

UPLOAD_PATH = "/media/upload"
_MIME = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "gif": "image/gif",
    "bmp": "image/bmp",
    "pdf": "application/pdf",
}


def shown_name(ref: AttachmentRef) -> str:
    """The file's name as the person sees it: its own, ending in the type it is sent as."""
    if PurePosixPath(ref.name).suffix.lower().lstrip(".") == ref.file_type:
        return ref.name
    return f"{ref.name}.{ref.file_type}"


def message_param(ref: AttachmentRef, media_id: str) -> tuple[str, dict[str, Any]]:
    """The OpenAPI's ``msgKey`` and ``msgParam`` for an uploaded attachment."""
    if ref.kind == "image":
        return "sampleImageMsg", {"photoURL": media_id}
    return "sampleFile", {
        "mediaId": media_id,
        "fileName": shown_name(ref),
        "fileType": ref.file_type,
    }


def placeholder(ref: AttachmentRef) -> str:
    """What stands for the media id until the upload gave one (the attempt's digest covers
    the bytes through it, never an id the platform has not issued yet)."""
    return f"sha256:{ref.sha256}"


@dataclass
class Upload:
    """One attachment's bytes, waiting for (or holding) its ``media_id``."""

    ref: AttachmentRef
    data: bytes | None  # None: the bytes were not handed to the attempt (a defect)
    media_id: str | None = None


class UploadFailed(Exception):
    """The upload did not give a media id: DingTalk's words, or what kept it from answering."""

    def __init__(
        self,
        detail: str,
        http_status: int | None = None,
        errcode: int | None = None,
        errmsg: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.http_status = http_status
        self.errcode = errcode
        self.errmsg = errmsg


async def upload_media(
    api: DingTalkAPI, base_url: str, upload: Upload, place: Place | None = None
) -> str:
    """Upload the bytes; their ``media_id`` (``UploadFailed`` with DingTalk's reason).
    ``place``: the pool place the send holds; the upload travels on it, as the send does
    (waiting for a second one could wait on itself).

    Nothing reaches the person by an upload: whatever goes wrong here, the message was
    definitely not sent, so a failure is final for this attempt and never ``uncertain``.
    """
    if upload.data is None:
        raise UploadFailed("the attachment's bytes were not handed to the send")
    ref = upload.ref
    try:
        token = await api.access_token()
        response = await api.http.post(
            f"{base_url}{UPLOAD_PATH}",
            params={"access_token": token, "type": ref.kind},
            files={
                "media": (
                    shown_name(ref),
                    upload.data,
                    _MIME.get(ref.file_type, "application/octet-stream"),
                )
            },
            extensions={} if place is None else {PLACE: place},
        )
    except TokenError as exc:
        raise UploadFailed(f"no access token ({exc})") from None
    except httpx.HTTPError as exc:
        raise UploadFailed(f"the media upload did not answer ({type(exc).__name__})") from None
    data = json_object(response)
    media_id = data.get("media_id")
    if response.status_code == 200 and data.get("errcode") == 0 and isinstance(media_id, str):
        return media_id
    errcode = data.get("errcode")
    if errcode in TOKEN_ERRCODES:
        api.forget_token()  # the next attempt fetches a fresh one
    message = data.get("errmsg") or data.get("message") or data.get("code")
    errmsg = str(message)[:200] if message else None
    raise UploadFailed(
        f"DingTalk refused the upload (HTTP {response.status_code}"
        f"{f' errcode {errcode}' if errcode is not None else ''}"
        f"{f': {errmsg}' if errmsg else ''})",
        http_status=response.status_code,
        errcode=errcode if isinstance(errcode, int) else None,
        errmsg=errmsg,
    )
