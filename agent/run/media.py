"""Media of an engaged run: fetched after the response gate, checked, stored beside the run.

Ingest only describes a message's pictures, files, video and audio (``Event.attachments``);
nothing is downloaded there, so a group message the robot stays silent on costs no call at
all. Once the gate has engaged, ``MediaFetcher.fetch`` asks DingTalk for each file's
short-lived URL (``messageFiles/download``: downloadCode + robotCode), reads at most
``max_download_bytes`` of it, sniffs the type from the bytes (a name proves nothing), takes
its sha256 and stores it in ``<media_dir>/<run_id>/`` with a ``media.json`` describing
them all. A file that cannot be had is ``missing`` with the reason, never guessed around.
The person's earlier file that words take (「帮我看下这个文件」 after it) is copied from its
own run's folder when that run fetched it (checked by its sha256), not downloaded again.

``prune_media`` forgets run folders older than ``media_keep_days``; ``dta store prune``
calls it, so media never fills the disk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.contracts import Event, MediaItem, MediaStatus
from agent.contracts.filetypes import is_text, sniff
from agent.dingtalk.openapi import DingTalkAPI, DownloadError

log = logging.getLogger("dta.media")

MEDIA_INDEX = "media.json"
# the provider-facing folder of a run directory that holds the files
RUN_MEDIA = "media"
_UNSAFE = re.compile(r"[^\w.\-]+")


_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/bmp": ".bmp",
    "application/pdf": ".pdf",
    "audio/amr": ".amr",
    "video/mp4": ".mp4",
}


def _stored_name(index: int, item: MediaItem, mime: str) -> str:
    """``<n>-<name>``: the sender's file name made safe, or the kind and a fitting suffix."""
    name = _UNSAFE.sub("_", Path(item.file_name or "").name).strip("._")[:80]
    if not name:
        name = item.kind + _EXTENSIONS.get(mime, ".bin" if not is_text(mime) else ".txt")
    return f"{index}-{name}"


@dataclass(frozen=True)
class MediaLimits:
    media_dir: Path
    max_download_bytes: int
    download_timeout_s: float


def _duration_ms(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def described(event: Event) -> list[MediaItem]:
    """The event's attachments as media items, before anything is fetched."""
    items = []
    for index, attachment in enumerate(event.attachments, start=1):
        code = attachment.get("downloadCode") or attachment.get("pictureDownloadCode")
        recognition = attachment.get("recognition")
        items.append(
            MediaItem(
                media_id=f"{event.event_id}#{index}",
                kind=str(attachment.get("kind") or "file"),
                part_of="quote" if attachment.get("part_of") == "quote" else "message",
                status=MediaStatus.MISSING,
                file_name=attachment.get("fileName") if attachment.get("fileName") else None,
                download_code=code if isinstance(code, str) and code else None,
                duration_ms=_duration_ms(attachment.get("duration")),
                recognition=recognition if isinstance(recognition, str) else None,
                missing="not fetched yet",
            )
        )
    return items


class MediaFetcher:
    """Downloads an engaged run's media through DingTalk's robot message-file API."""

    def __init__(self, api: DingTalkAPI, limits: MediaLimits) -> None:
        self.api = api
        self.limits = limits

    async def fetch(
        self,
        event: Event,
        run_id: str,
        earlier: Event | None = None,
        earlier_run: str | None = None,
    ) -> list[MediaItem]:
        """Every attachment of ``event`` (and of ``earlier``, the person's message just
        before, marked so), fetched and stored, or missing with the reason. ``earlier_run``:
        the run of ``earlier``, whose fetched copies are taken rather than downloaded twice."""
        items = described(event)
        kept: dict[str, tuple[Path, str]] = {}
        if earlier is not None:
            items += [i.model_copy(update={"part_of": "earlier"}) for i in described(earlier)]
            kept = self._kept(earlier_run) if earlier_run else {}
        if not items:
            return []
        folder = self.limits.media_dir / run_id
        fetched = [
            await self._one(index, item, folder, kept.get(item.media_id))
            for index, item in enumerate(items, 1)
        ]
        folder.mkdir(parents=True, exist_ok=True)
        index = [item.model_dump(mode="json", exclude_none=True) for item in fetched]
        for entry in index:
            entry.pop("download_code", None)
        (folder / MEDIA_INDEX).write_text(
            json.dumps({"event_id": event.event_id, "media": index}, ensure_ascii=False, indent=2)
            + "\n",
            encoding="utf-8",
        )
        return fetched

    def _kept(self, run_id: str) -> dict[str, tuple[Path, str]]:
        """What an earlier run fetched and kept: media id → (its file, its sha256)."""
        folder = self.limits.media_dir / run_id
        try:
            index = json.loads((folder / MEDIA_INDEX).read_text(encoding="utf-8"))
            entries = [e for e in index["media"] if e.get("status") == MediaStatus.FETCHED]
            return {
                str(e["media_id"]): (folder / Path(str(e["path"])).name, str(e["sha256"]))
                for e in entries
            }
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return {}  # no usable index (pruned, cut by a crash): download as usual

    async def _one(
        self, index: int, item: MediaItem, folder: Path, kept: tuple[Path, str] | None = None
    ) -> MediaItem:
        if item.download_code is None:
            return item.model_copy(
                update={"missing": "the message gave no download code", "problem": "no_code"}
            )
        data = _read_kept(kept) if kept is not None else None
        if data is not None:
            log.info("media taken from the earlier run", extra={"media_id": item.media_id})
        else:
            try:
                url = await self.api.download_url(item.download_code)
                data, _ = await self.api.download_bytes(
                    url, self.limits.max_download_bytes, self.limits.download_timeout_s
                )
            except DownloadError as exc:
                log.info("media not fetched", extra={"media_id": item.media_id, "error": str(exc)})
                return item.model_copy(update={"missing": str(exc), "problem": exc.problem})
        mime = sniff(data, item.file_name)
        name = _stored_name(index, item, mime)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        target.write_bytes(data)
        return item.model_copy(
            update={
                "status": MediaStatus.FETCHED,
                "missing": None,
                "problem": None,
                "mime": mime,
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "path": f"{RUN_MEDIA}/{name}",
                "stored_at": str(target),
            }
        )


def _read_kept(kept: tuple[Path, str]) -> bytes | None:
    """An earlier run's copy, if it is still there and still the bytes it fetched."""
    path, digest = kept
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None


def prune_media(media_dir: Path, keep_days: float, now: float | None = None) -> int:
    """Remove run folders under ``media_dir`` last written more than ``keep_days`` ago.

    A function of the files on disk alone (no store): the folders' own times say how old
    they are, so it also clears media whose runs the store has already forgotten.
    Returns how many run folders it removed.
    """
    if not media_dir.is_dir():
        return 0
    cutoff = (time.time() if now is None else now) - keep_days * 86_400
    removed = 0
    for folder in media_dir.iterdir():
        if not folder.is_dir() or folder.is_symlink():
            continue
        newest = max((p.stat().st_mtime for p in folder.rglob("*")), default=0.0)
        if max(newest, folder.stat().st_mtime) < cutoff:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed
