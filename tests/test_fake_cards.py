"""The fake DingTalk's AI card endpoints over real loopback HTTP, and the card API client
against them: per-card state, DingTalk's answers, the card faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent.cards.api import FLOW_FAILED, FLOW_FINISHED, CardAPI, CardOutcome
from agent.cli.card_doctor import _checks, card_checks
from agent.clock import VirtualClock
from agent.config import Settings
from agent.contracts import CardReason, ConversationType, Origin
from agent.dingtalk.openapi import DingTalkAPI
from lab.fake import FakeDingTalk
from tests.factories import fake_transport_config
from tests.test_fake_dingtalk import START, token

DM = Origin(conversation_id="cid-dm-u1", conversation_type=ConversationType.DM, user_id="u1")
GROUP = Origin(
    conversation_id="cid-g", conversation_type=ConversationType.GROUP, user_id="u2", nick="Li"
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDingTalk]:
    platform = FakeDingTalk(VirtualClock(START), timeout_fault_s=0.3)
    await platform.start()
    try:
        yield platform
    finally:
        await platform.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        yield client


@pytest.fixture
async def api(fake: FakeDingTalk) -> AsyncIterator[CardAPI]:
    config = fake_transport_config(fake, read_timeout_s=0.2)
    openapi = DingTalkAPI(config, fake.clock)
    yield CardAPI(openapi, fake.robot_code, "tpl.schema", "content")
    await openapi.aclose()


async def create(api: CardAPI, out: str, target: Origin = DM) -> Any:
    space = f"dtv1.card//IM_ROBOT.{target.user_id}"
    if target.conversation_type is ConversationType.GROUP:
        space = f"dtv1.card//IM_GROUP.{target.conversation_id}"
    return await api.create(api.create_body(out, target, space))


async def test_a_card_is_created_streamed_and_finished(fake: FakeDingTalk, api: CardAPI):
    created = await create(api, "c1")
    assert created.ok and created.carrier_id
    assert (await api.frame("c1", "半句", final=False)).ok
    assert (await api.frame("c1", "一整句话。", final=True)).ok
    assert (await api.set_state("c1", FLOW_FINISHED, "一整句话。")).ok
    (card,) = [c.to_dict() for c in fake.cards]
    assert card["frames"] == ["半句", "一整句话。"] and card["content"] == "一整句话。"
    assert card["finalized"] and card["finished"] and card["user_ids"] == ["u1"]
    assert fake.received[0].channel == "card" and fake.received[0].text == "一整句话。"


async def test_a_group_card_at_s_the_asker_and_an_unknown_space_is_refused_inside_a_200(
    fake: FakeDingTalk, api: CardAPI
):
    assert (await create(api, "g1", GROUP)).ok
    assert fake.cards[0].conversation_id == "cid-g" and fake.cards[0].at_user_ids == ["u2"]
    refused = await api.create(api.create_body("x", DM, "dtv1.card//SOMEWHERE.else"))
    assert refused.outcome is CardOutcome.REFUSED and "illegal" in (refused.detail or "")
    assert len(fake.cards) == 1


async def test_updates_by_key_keep_other_data_and_a_full_update_replaces_it(
    fake: FakeDingTalk, api: CardAPI, http: httpx.AsyncClient
):
    await create(api, "c1")
    await api.frame("c1", "答案", final=False)
    assert (await api.set_state("c1", FLOW_FAILED, None)).ok
    card = fake.cards[0]
    assert card.data == {"flowStatus": "5"} and card.finalized and card.content == "答案"
    headers = {"x-acs-dingtalk-access-token": await token(fake, http)}
    body = {"outTrackId": "c1", "cardData": {"cardParamMap": {"flowStatus": 3}}}
    answer = await http.put(f"{fake.base_url}/v1.0/card/instances", json=body, headers=headers)
    assert answer.status_code == 400  # every cardParamMap value is a string


async def test_concurrent_updates_to_one_card_are_refused(fake: FakeDingTalk, api: CardAPI):
    await create(api, "c1")
    fake.card_latency_s = 0.05
    first, second = await asyncio.gather(
        api.frame("c1", "一", final=False), api.frame("c1", "一二", final=False)
    )
    assert sorted([first.http_status, second.http_status]) == [200, 403]


@pytest.mark.parametrize(
    ("fault", "call", "outcome", "reason"),
    [
        ({"card_create": {"qps_limit": True}}, "create", CardOutcome.THROTTLED, None),
        (
            {"card_create": {"error": "template_unpublished"}},
            "create",
            CardOutcome.REFUSED,
            CardReason.TEMPLATE_UNPUBLISHED,
        ),
        (
            {"card_create": {"error": "no_permission"}},
            "create",
            CardOutcome.REFUSED,
            CardReason.NO_PERMISSION,
        ),
        (
            {"card_stream": {"error": "unknown_error"}},
            "frame",
            CardOutcome.REFUSED,
            CardReason.KEY_MISMATCH,
        ),
        ({"card_stream": {"status": 503}}, "frame", CardOutcome.UNCERTAIN, None),
        ({"card_stream": {"timeout": True}}, "frame", CardOutcome.UNCERTAIN, None),
        ({"card_update": {"qps_limit": True}}, "update", CardOutcome.THROTTLED, None),
    ],
)
async def test_card_faults_answer_as_dingtalk_does(
    fake: FakeDingTalk, api: CardAPI, fault: Any, call: str, outcome: Any, reason: Any
):
    if call != "create":
        await create(api, "c1")
    fake.arm_fault(fault)
    if call == "create":
        answer = await create(api, "c2")
    elif call == "frame":
        answer = await api.frame("c1", "text", final=False)
    else:
        answer = await api.set_state("c1", FLOW_FINISHED, "text")
    assert answer.outcome is outcome
    if reason is not None:
        assert answer.reason is reason
    if fault.get("card_create", {}).get("error") == "no_permission":
        assert "Card.Instance.Write" in (answer.detail or "")
    if call == "create":
        assert fake.cards == []  # a refused or throttled create keeps nothing


async def test_an_update_to_an_unknown_card_is_refused(api: CardAPI):
    answer = await api.frame("never-created", "text", final=True)
    assert answer.outcome is CardOutcome.REFUSED and answer.http_status == 400


def test_card_fault_specs_are_checked_before_arming():
    fake = FakeDingTalk(VirtualClock(START))
    for bad in (
        {"card_stream": {"error": "made_up"}},
        {"card_create": {"error": "no_permission", "status": 500}},
        {"card_update": {"error": "unknown_error", "qps_limit": True}},
    ):
        with pytest.raises(ValueError):
            fake.arm_fault(bad)


def doctor_settings(fake: FakeDingTalk) -> Settings:
    return Settings(
        openapi_base_url=fake.base_url,
        client_id=fake.app_key,
        client_secret=fake.app_secret,
        robot_code=fake.robot_code,
        reply_mode="card",
        card_template_id="tpl.schema",
    )


async def test_doctor_probes_the_card_permissions_without_sending_anything(fake: FakeDingTalk):
    lines = await _checks(doctor_settings(fake), None)
    assert [(c["name"], c["ok"]) for c in lines] == [
        ("card streaming", True),
        ("card instances", True),
        ("card template", True),
    ]
    assert fake.cards == [] and "--card-to" in lines[-1]["detail"]
    assert not lines[-1]["checked"] and all(line["checked"] for line in lines[:-1])
    fake.arm_fault({"card_stream": {"error": "no_permission"}})
    missing = await _checks(doctor_settings(fake), None)
    assert not missing[0]["ok"] and "Card.Streaming.Write" in missing[0]["fix"]
    assert card_checks(doctor_settings(fake).with_overrides({"reply_mode": "text"})) == []


async def test_doctor_with_a_test_card_proves_the_template_and_the_key(fake: FakeDingTalk):
    lines = await _checks(doctor_settings(fake), "u1")
    assert all(c["ok"] for c in lines) and fake.cards[0].finalized
    fake.arm_fault({"card_create": {"error": "template_unpublished"}})
    unpublished = await _checks(doctor_settings(fake), "u1")
    assert not unpublished[-1]["ok"] and "publish" in unpublished[-1]["fix"]
    # the first is the permission probe's (a card that does not exist), the second the card's
    fake.arm_fault({"card_stream": {"error": "unknown_error", "times": 2}})
    wrong_key = await _checks(doctor_settings(fake), "u1")
    assert wrong_key[-1]["name"] == "card key" and not wrong_key[-1]["ok"]
