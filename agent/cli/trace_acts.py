"""What ``dta trace`` shows of acts: an act intent's tool and arguments, and the approvals
a run asked for with every click on them (agent/acts/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from storage import Store


def act_text(intent: Any) -> str:
    """An act's line: the tool and its final arguments (what was authorized)."""
    if intent.tool is None:
        return ""
    return f"{intent.tool} {json.dumps(intent.arguments or {}, ensure_ascii=False)}"


def approvals_of(
    store: Store, event_id: str, when: Callable[[float | None], str | None]
) -> list[dict[str, Any]]:
    """The approvals the run of ``event_id`` asked for, with every click on them."""
    return [
        {
            "approval_id": a.approval_id,
            "tool": a.tool,
            "status": a.status.value,
            "object": a.authorization.object,
            "audience": a.authorization.audience,
            "impact": a.authorization.impact,
            "decided_by": a.decided_by,
            "decided_at": when(a.decided_at),
            "expires_at": when(a.expires_at),
            "clicks": [
                {"user": c["user_id"], "action": c["action"], "outcome": c["outcome"]}
                for c in store.clicks(a.approval_id)
            ],
        }
        for a in store.approvals(event_id)
    ]
