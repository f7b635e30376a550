"""A card callback (the ``data`` of topic ``/v1.0/card/instances/callback``) as a click.

DingTalk's fields (``../shared/dingtalk-workspace-apis.md`` §6): ``outTrackId`` (the card
the caller chose the id of), ``userId`` (the clicker, a staff id with ``userIdType: 1``),
and ``content`` — a JSON string ``{"cardPrivateData": {"actionIds": [...], "params":
{...}}}``; some callbacks carry ``value`` instead. The button's ``action`` param (or its
first action id) says which it was; the official tutorial's ``accept`` / ``reject`` are read
as ``approve`` / ``deny``.
"""

from __future__ import annotations

import json
from typing import Any

from agent.contracts import CardClick

APPROVE, DENY, STOP = "approve", "deny", "stop"


def parse_click(data: dict[str, Any], frame_id: str, received_at: float) -> CardClick:
    """The click in a card callback's data; ``ValueError`` when it is not one."""
    track = data.get("outTrackId")
    user = data.get("userId")
    if not isinstance(track, str) or not track or not isinstance(user, str) or not user:
        raise ValueError("a card callback needs outTrackId and userId")
    content = data.get("content") if data.get("content") is not None else data.get("value")
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError:
            content = {}
    private = content.get("cardPrivateData") if isinstance(content, dict) else None
    private = private if isinstance(private, dict) else {}
    params = private.get("params") if isinstance(private.get("params"), dict) else {}
    ids = private.get("actionIds") if isinstance(private.get("actionIds"), list) else []
    action = params.get("action") or (ids[0] if ids else "")
    action = str(action).lower()
    if action in ("accept", "agree", "yes"):
        action = APPROVE
    elif action in ("reject", "refuse", "no"):
        action = DENY
    elif action in ("btn_stop", "stop_stream", "cancel"):
        action = STOP
    return CardClick(
        frame_id=frame_id, out_track_id=track, user_id=user, action=action, received_at=received_at
    )
