"""``dta doctor``'s checks of card mode: the two permissions, the template, the key.

The permissions are probed without touching anyone's chat: an update to a card that does not
exist (``outTrackId`` ``dta-doctor-…``) is refused by DingTalk either for a missing scope
(403 ``…PermissionDenied``, naming the scope) or for the card — and the second answer proves
the scope is there. The template and the key can only be proven by a card: with ``card_to``
(a staff id, usually the operator's own) doctor sends one small card to that person, streams
one frame into ``card_content_key`` and finishes it. Without it, the template's line says
"not checked" (never a pass) and how a problem will show instead: the first reply falls back
to markdown with the reason on its receipt.

Each check is a plain dict with ``agent.cli.doctor.Check``'s fields (name, ok, detail, fix,
cause), so the doctor can take them as they are.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from agent.cards.api import FLOW_FINISHED, CardAnswer, CardAPI, CardOutcome
from agent.clock import SystemClock
from agent.components import transport_config
from agent.config import Settings
from agent.contracts import CardReason, ConversationType, Origin
from agent.dingtalk.openapi import DingTalkAPI

CONSOLE = "open-dev.dingtalk.com → the app → 权限管理 (permissions)"


def _check(
    name: str, ok: bool, detail: str, fix: str = "", cause: str = "", checked: bool = True
) -> dict[str, Any]:
    return {
        "name": name,
        "ok": ok,
        "detail": detail,
        "fix": fix,
        "cause": cause,
        "checked": checked,
    }


def _scope(name: str, scope: str, answer: CardAnswer) -> dict[str, Any]:
    if answer.outcome is CardOutcome.REFUSED and answer.reason is CardReason.NO_PERMISSION:
        fix = f'grant {scope} to the app ({CONSOLE}), or set reply_mode = "markdown"'
        return _check(name, False, f"DingTalk refused: {answer.describe()}", fix, "permission")
    if answer.outcome in (CardOutcome.NOT_SENT, CardOutcome.UNCERTAIN, CardOutcome.THROTTLED):
        return _check(
            name, False, f"no answer to judge by: {answer.describe()}", "try again", "platform"
        )
    return _check(name, True, f"{scope} granted")


async def _checks(settings: Settings, card_to: str | None) -> list[dict[str, Any]]:
    assert settings.robot_code and settings.card_template_id
    api = DingTalkAPI(transport_config(settings), SystemClock())
    cards = CardAPI(api, settings.robot_code, settings.card_template_id, settings.card_content_key)
    probe = f"dta-doctor-{secrets.token_hex(8)}"
    try:
        checks = [
            _scope("card streaming", "Card.Streaming.Write", await cards.frame(probe, "", False)),
            _scope(
                "card instances",
                "Card.Instance.Write",
                await cards.set_state(probe, FLOW_FINISHED, None),
            ),
        ]
        if not all(check["ok"] for check in checks):
            return checks
        if card_to is None:
            detail = (
                f"template {settings.card_template_id}, key {settings.card_content_key!r}:"
                " only a card proves them, and none was sent; the first reply does (a"
                " failure falls back to markdown, with card_template_unpublished or"
                " card_key_mismatch on its receipt); `dta doctor --card-to <staff id>`"
                " sends a test card now"
            )
            return [*checks, _check("card template", True, detail, checked=False)]
        return [*checks, *await _test_card(cards, settings, card_to, probe)]
    finally:
        await api.aclose()


async def _test_card(
    cards: CardAPI, settings: Settings, user: str, out: str
) -> list[dict[str, Any]]:
    target = Origin(conversation_id="", conversation_type=ConversationType.DM, user_id=user)
    created = await cards.create(cards.create_body(out, target, f"dtv1.card//IM_ROBOT.{user}"))
    if not created.ok:
        fix = "publish the template in the card platform (卡片平台), or check card_template_id"
        if created.reason is not CardReason.TEMPLATE_UNPUBLISHED:
            fix = f"check card_template_id and that {user} is a staff id of this organization"
        return [_check("card template", False, created.describe(), fix, "card_template")]
    text = "dta doctor: card mode works."
    frame = await cards.frame(out, text, final=True)
    await cards.set_state(out, FLOW_FINISHED, text)
    checks = [_check("card template", True, f"test card delivered to {user}")]
    if frame.reason is CardReason.KEY_MISMATCH:
        fix = "set card_content_key to the variable of the template's streaming component"
        return [*checks, _check("card key", False, frame.describe(), fix, "card_key")]
    if not frame.ok:
        return [*checks, _check("card key", False, frame.describe(), "try again", "platform")]
    detail = f"{settings.card_content_key!r} streams (the card says so)"
    return [*checks, _check("card key", True, detail)]


def card_checks(settings: Settings, card_to: str | None = None) -> list[dict[str, Any]]:
    """Doctor's card lines (none unless ``reply_mode = "card"``)."""
    if settings.reply_mode != "card":
        return []
    return asyncio.run(_checks(settings, card_to))
