"""A card callback (the ``data`` of topic ``/v1.0/card/instances/callback``) as a click.

DingTalk's fields (``../shared/dingtalk-workspace-apis.md`` §6): ``outTrackId`` (the card
the caller chose the id of), ``userId`` (the clicker, a staff id with ``userIdType: 1``),
and ``content`` — a JSON string ``{"cardPrivateData": {"actionIds": [...], "params":
{...}}}``; some callbacks carry ``value`` instead. The button's ``action`` param (or its
first action id) says which it was; the official tutorial's ``accept`` / ``reject`` are read
as ``approve`` / ``deny``.

Standing work's cards (``../shared/dingtalk-knowledge-and-forms-apis.md`` §3): an ask-user
form's submit carries ``params.form`` (``{field name: value}``; its action id is the form's),
a cancel button ``user_cancel = "true"``; an answer's feedback buttons are the action ids
``feedback_up`` / ``feedback_down`` (read as ``up`` / ``down``), a 👎 perhaps with a
``reason``.
"""

from __future__ import annotations

import json
from typing import Any

from agent.contracts import CardClick

APPROVE, DENY, STOP = "approve", "deny", "stop"
UP, DOWN, SUBMIT, CANCEL_FORM = "up", "down", "submit", "cancel_form"
_NAMES = {
    "accept": APPROVE,
    "agree": APPROVE,
    "yes": APPROVE,
    "reject": DENY,
    "refuse": DENY,
    "no": DENY,
    "btn_stop": STOP,
    "stop_stream": STOP,
    "cancel": STOP,
    "feedback_up": UP,
    "like": UP,
    "feedback_down": DOWN,
    "dislike": DOWN,
}


def _decoded(value: Any) -> Any:
    """A JSON string decoded (None when it is not JSON); anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return None


def parse_click(data: dict[str, Any], frame_id: str, received_at: float) -> CardClick:
    """The click in a card callback's data; ``ValueError`` when it is not one."""
    track = data.get("outTrackId")
    user = data.get("userId")
    if not isinstance(track, str) or not track or not isinstance(user, str) or not user:
        raise ValueError("a card callback needs outTrackId and userId")
    content = _decoded(
        data.get("content") if data.get("content") is not None else data.get("value")
    )
    private = content.get("cardPrivateData") if isinstance(content, dict) else None
    private = private if isinstance(private, dict) else {}
    params = private.get("params") if isinstance(private.get("params"), dict) else {}
    ids = private.get("actionIds") if isinstance(private.get("actionIds"), list) else []
    form = _decoded(params.get("form"))  # some clients send the form JSON-encoded
    if str(params.get("user_cancel", "")).lower() == "true":
        action = CANCEL_FORM
    elif isinstance(form, dict):
        action = SUBMIT
    else:
        action = str(params.get("action") or (ids[0] if ids else "")).lower()
        action = _NAMES.get(action, action)
    values = {k: v for k, v in form.items() if k != "fromConfig"} if isinstance(form, dict) else {}
    reason = params.get("reason")
    return CardClick(
        frame_id=frame_id,
        out_track_id=track,
        user_id=user,
        action=action,
        received_at=received_at,
        values=values,
        reason=str(reason)[:500] if reason else None,
    )
