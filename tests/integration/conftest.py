"""Shared by the daemon tests: a fake DingTalk on 127.0.0.1 that redelivers unacked
frames after a second (the real platform waits longer; the tests should not)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.clock import SystemClock
from lab.fake import FakeDingTalk


@pytest.fixture
async def fake() -> AsyncIterator[FakeDingTalk]:
    platform = FakeDingTalk(SystemClock(), redelivery_delay_s=1.0)
    await platform.start()
    yield platform
    await platform.stop()
