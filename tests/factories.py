"""Small builders for unit tests: callbacks, frames, events, runs and policies."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, TypeVar

from agent.components import transport_config
from agent.config import Settings
from agent.contracts import ActionKind, Event, MemoryCandidate, Origin, Run, SessionWebhook
from agent.dingtalk.ingest import callback_to_event

Built = TypeVar("Built")


def built(build: Callable[[Settings], Built], /, **fields: Any) -> Built:
    """What ``agent/components/`` builds from the default ``Settings`` (the only place a
    default is written), with ``fields`` changed: ``built(action_policy, reminders=True)``."""
    return dataclasses.replace(build(Settings()), **fields)  # type: ignore[type-var]


T0 = 1_760_000_000.0  # a fixed "now" for unit tests
ROBOT = "robot-1"
BOT_USER = "$:LWCP_v1:$bot"


def callback(
    msg_id: str = "m1",
    user: str = "u1",
    text: str = "hello",
    group: str | None = None,
    at_bot: bool = False,
    created_at: float = T0,
    webhook_ttl_s: float = 5400,
    **extra: Any,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "msgId": msg_id,
        "msgtype": "text",
        "text": {"content": text},
        "conversationId": group or f"cid-dm-{user}",
        "conversationType": "2" if group else "1",
        "senderId": f"$:LWCP_v1:${user}",
        "senderStaffId": user,
        "senderNick": user.upper(),
        "chatbotUserId": BOT_USER,
        "robotCode": ROBOT,
        "isInAtList": at_bot,
        "createAt": int(created_at * 1000),
        "sessionWebhook": f"https://oapi.example/robot/sendBySession?session=s-{msg_id}",
        "sessionWebhookExpiredTime": int((created_at + webhook_ttl_s) * 1000),
    }
    if group:
        data["conversationTitle"] = "Team"
    data.update(extra)
    return data


def frame(data: Any, message_id: str = "f1") -> str:
    return json.dumps(
        {
            "specVersion": "1.0",
            "type": "CALLBACK",
            "headers": {
                "messageId": message_id,
                "topic": "/v1.0/im/bot/messages/get",
                "contentType": "application/json",
                "time": "0",
            },
            "data": data if isinstance(data, str) else json.dumps(data),
        }
    )


def event(**kwargs: Any) -> Event:
    return callback_to_event(callback(**kwargs), received_at=T0, frame_message_id="f1")


def run_for(
    ev: Event,
    generation: int = 1,
    allowed: list[ActionKind] | None = None,
    webhook: SessionWebhook | bool | None = True,
) -> Run:
    hook = ev.session_webhook if webhook is True else (webhook or None)
    return Run(
        run_id="run_1",
        event_id=ev.event_id,
        thread_key=ev.thread_key,
        generation=generation,
        allowed_actions=allowed or list(ActionKind),
        origin=Origin.of(ev).model_copy(update={"session_webhook": hook}),
        provider="rules",
        created_at=T0,
        updated_at=T0,
    )


def fake_transport_config(fake: Any, **fields: Any) -> Any:
    """The transport's config for the bundled fake DingTalk (``lab.fake.FakeDingTalk``)."""
    return built(
        transport_config,
        openapi_base_url=fake.base_url,
        client_id=fake.app_key,
        client_secret=fake.app_secret,
        robot_code=fake.robot_code,
        directory_base_url=None,
        oapi_base_url=fake.base_url,
        **fields,
    )


def memory_candidate(content: str, scope: str = "cid-1", **fields: Any) -> MemoryCandidate:
    """A candidate as a run would have proposed it (``fields`` override: kind, title, …)."""
    values: dict[str, Any] = {
        "candidate_id": MemoryCandidate.id_for(scope, content),
        "kind": "semantic",
        "scope_id": scope,
        "title": content[:10],
        "content": content,
        "source_refs": ["msg:m1"],
        "confidence": 0.6,
        "proposed_by_run": "run_1",
        "created_at": T0,
        "updated_at": T0,
    }
    return MemoryCandidate(**{**values, **fields})


def act_intent(run: Run, spec: Any, arguments: dict[str, Any], at: float = T0) -> Any:
    """An act's intent as the acting step stores it: authorized for the run's asker, keyed
    by the event and the arguments' hash."""
    from agent.acts.authority import authorize
    from agent.contracts import ActionIntent

    auth = authorize(spec, arguments, run.origin, at, 600)
    return ActionIntent(
        intent_id=f"int_{auth.arguments_hash[:6]}",
        run_id=run.run_id,
        event_id=run.event_id,
        kind=ActionKind.ACT,
        idempotency_key=f"{run.event_id}:act:{auth.arguments_hash[:24]}",
        target=run.origin,
        tool=spec.name,
        arguments=arguments,
        authorization=auth,
        gate_checks=[],
        created_at=at,
    )
