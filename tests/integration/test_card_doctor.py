"""``dta doctor`` in card mode, as a subprocess against the fake DingTalk."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.clock import SystemClock
from lab.fake import FakeDingTalk
from tests.integration.test_cli import dta


@pytest.fixture
async def platform() -> AsyncIterator[FakeDingTalk]:
    fake = FakeDingTalk(SystemClock())
    await fake.start()
    yield fake
    await fake.stop()


async def test_doctor_checks_the_card_permissions_in_card_mode(platform: FakeDingTalk, tmp_path):
    config = tmp_path / "dta.toml"
    config.write_text('reply_mode = "card"\ncard_template_id = "tpl.schema"\n', encoding="utf-8")
    env = {
        "DINGTALK_CLIENT_ID": platform.app_key,
        "DINGTALK_CLIENT_SECRET": platform.app_secret,
        "DINGTALK_OPENAPI_ENDPOINT": platform.base_url,
        "DTA_STORE_PATH": str(tmp_path / "d.db"),
    }
    code, out, _ = await dta("--config", str(config), "doctor", env=env)
    assert code == 0, out
    assert "ok    card streaming: Card.Streaming.Write granted" in out
    assert "ok    card instances" in out and "----  card template: not checked" in out
    assert platform.cards == []  # probing sends nobody anything
