"""A reply's attachments as the action gate sees them: decoded, typed by their bytes, sized.

Pure: the base64 is decoded and the bytes sniffed here (``agent/contracts/filetypes.py``),
nothing is read from disk or the network. What passes becomes an ``AttachmentRef`` on its
own intent (the record) and the bytes that go with it to the broker (the upload).

    checked = check_attachments(request.attachments, AttachmentLimits(4, 20 << 20), secrets)
    if isinstance(checked, AttachmentProblem): refuse(checked.reason, checked.detail)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from agent.contracts import AttachmentRef, OutboundAttachment, RefusalReason
from agent.contracts.filetypes import ACCEPTED_TYPES, outbound_form, sniff


@dataclass(frozen=True)
class AttachmentLimits:
    per_reply: int  # attachments one reply may carry (each is a message of its own)
    max_bytes: int  # the largest one (DingTalk's upload takes up to 20 MB)


@dataclass(frozen=True)
class CheckedAttachment:
    ref: AttachmentRef
    data: bytes


@dataclass(frozen=True)
class AttachmentProblem:
    reason: RefusalReason
    detail: str


def _decode(item: OutboundAttachment) -> bytes | None:
    """The bytes, or None for what is not base64 (line breaks, as ``base64`` wraps at 76
    characters, are allowed; any other stray character is not)."""
    try:
        return base64.b64decode("".join(item.data_base64.split()), validate=True)
    except (binascii.Error, ValueError):
        return None


def check_attachments(
    items: list[OutboundAttachment], limits: AttachmentLimits, secrets: tuple[str, ...]
) -> list[CheckedAttachment] | AttachmentProblem:
    """Each attachment decoded and typed, or the first problem (with its refusal code)."""
    if len(items) > limits.per_reply:
        return AttachmentProblem(
            RefusalReason.CONTENT_TOO_LARGE,
            f"{len(items)} attachments; a reply carries at most {limits.per_reply}",
        )
    checked = []
    for number, item in enumerate(items, start=1):
        where = f"attachment {number} ({item.name!r})"
        # the size the base64 stands for, known before decoding anything that large
        if len(item.data_base64) * 3 // 4 > limits.max_bytes + 2:
            return _too_large(where, len(item.data_base64) * 3 // 4, limits)
        data = _decode(item)
        if not data:
            return AttachmentProblem(
                RefusalReason.ATTACHMENT_UNSUPPORTED, f"{where}: data_base64 is not base64"
            )
        if len(data) > limits.max_bytes:
            return _too_large(where, len(data), limits)
        mime = sniff(data, item.name)
        form = outbound_form(mime, item.name)
        if form is None:
            return AttachmentProblem(
                RefusalReason.ATTACHMENT_UNSUPPORTED,
                f"{where}: its bytes are {mime}; DingTalk takes {ACCEPTED_TYPES}",
            )
        if any(secret and (secret in item.name or secret.encode() in data) for secret in secrets):
            return AttachmentProblem(
                RefusalReason.SECRET_IN_CONTENT, f"{where} contains a configured secret"
            )
        ref = AttachmentRef(
            name=item.name,
            kind=form.kind,
            file_type=form.file_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        checked.append(CheckedAttachment(ref, data))
    return checked


def _too_large(where: str, size: int, limits: AttachmentLimits) -> AttachmentProblem:
    return AttachmentProblem(
        RefusalReason.CONTENT_TOO_LARGE, f"{where}: {size} bytes; limit {limits.max_bytes}"
    )
