"""What kind of request each of the fake's HTTP calls is, and how many of each it answered.

``platform.calls`` in a lab case counts these: a silent event must cost DingTalk nothing
at all — no token, no directory lookup, no download — and a count by kind says which
call broke that. The stream gateway's own ``connections/open`` and websocket, and the
fake's ``/_lab`` controls, are not platform traffic and are left out of every count.

    counts = call_counts(platform.request_log)   # {"total": 3, "token": 1, "send": 2, ...}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

CALL_KINDS = (
    "token",
    "directory",
    "send",
    "card",
    "download",
    "media_upload",
    "reaction",
    "todo",
    "calendar",
    "readback",
    "recall",
    "doc_read",
    "permission",
    "doc_list",
)

# Path prefixes (most specific first) and the kind of call they are.
_KINDS: tuple[tuple[str, str], ...] = (
    ("/v1.0/oauth2/accessToken", "token"),
    ("/topapi/v2/user/get", "directory"),
    ("/topapi/user/getbyunionid", "directory"),
    ("/v1.0/contact/users/search", "directory"),
    ("/v1.0/todo/", "todo"),
    ("/v1.0/calendar/", "calendar"),
    ("/robot/sendBySession", "send"),
    ("/v1.0/robot/oToMessages/batchSend", "send"),
    ("/v1.0/robot/groupMessages/send", "send"),
    ("/v1.0/robot/oToMessages/readStatus", "readback"),
    ("/v1.0/robot/groupMessages/query", "readback"),
    ("/v1.0/robot/messageFiles/download", "download"),
    ("/v1.0/card/", "card"),
    ("/v1.0/robot/emotion/", "reaction"),  # put and recall alike
    ("/media/upload", "media_upload"),
    # DingTalk knowledge (lab/fake/docs.py): a doc's content or a table's records, the
    # permission probe, and the listings (knowledge base, nodes, a table's sheets)
    ("/v1.0/doc/suites/documents/", "doc_read"),
    ("/v1.0/doc/workspaces/docs/infos/query", "permission"),
    ("/v2.0/wiki/", "doc_list"),
)
# Not platform traffic: the gateway's handshake and socket, and the lab's own controls.
_NOT_COUNTED = ("/v1.0/gateway/connections/open", "/connect", "/_lab/")


def call_kind(path: str) -> str | None:
    """The kind of a request by its path; None for one outside every kind (it still counts
    in ``total``, like the file bytes behind a download URL)."""
    if path.startswith("/v1.0/notable/"):  # an AI table: its records are its content
        return "doc_read" if path.endswith("/records/list") else "doc_list"
    for prefix, kind in _KINDS:
        if path.startswith(prefix):
            return kind
    return None


def call_counts(request_log: Iterable[dict[str, Any]]) -> dict[str, int]:
    """``total`` and each kind in ``CALL_KINDS`` (0 when none came)."""
    counts: Counter[str] = Counter()
    for entry in request_log:
        path = str(entry.get("path", ""))
        if path.startswith(_NOT_COUNTED):
            continue
        counts["total"] += 1
        kind = call_kind(path)
        if kind is not None:
            counts[kind] += 1
    return {"total": counts["total"], **{kind: counts[kind] for kind in CALL_KINDS}}
