"""One conversation's messages go one after another, ``gap_s`` apart; others never wait."""

from __future__ import annotations

import asyncio
from itertools import pairwise

from agent.run.spacing import SendSpacing


async def test_one_chat_is_spaced_and_another_does_not_wait() -> None:
    spacing = SendSpacing(0.2)
    loop = asyncio.get_running_loop()
    started: list[tuple[str, float]] = []

    async def send(conversation: str) -> None:
        async with spacing.turn(conversation):
            started.append((conversation, loop.time()))
            await asyncio.sleep(0.01)  # the request itself

    t0 = loop.time()
    await asyncio.gather(send("c1"), send("c1"), send("c2"), send("c1"))
    mine = [at - t0 for who, at in started if who == "c1"]
    other = [at - t0 for who, at in started if who == "c2"]
    assert len(mine) == 3 and all(b - a >= 0.2 for a, b in pairwise(mine))
    assert other[0] < mine[1], "another conversation never waits on this one"


async def test_no_gap_means_no_waiting() -> None:
    spacing = SendSpacing(0.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(5):
        async with spacing.turn("c1"):
            pass
    assert loop.time() - t0 < 0.2  # nothing slept a gap


async def test_conversations_whose_gap_has_passed_are_forgotten() -> None:
    """Memory holds about a gap's worth of conversations, not every one ever seen."""
    spacing = SendSpacing(0.05)
    for n in range(200):
        async with spacing.turn(f"c{n}"):
            pass
    await asyncio.sleep(0.06)
    async with spacing.turn("last"):
        pass
    assert len(spacing._next) == len(spacing._locks) == 1
