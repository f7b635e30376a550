"""What a streamed answer carries while it is written: what the pipeline lends it
(``StreamHost``) and the state of one answer (``LiveAnswer``), shared by the consumer
(``agent/cards/stream.py``) and the ways it ends (``agent/cards/endings.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.cards.broker import OpenCard
from agent.contracts import ActionKind, ActionRequest, EnrichedInvocation, Run, RunEnding
from agent.run.outcome import RunOutcome
from gates.action import Refusal
from skills.providers.streaming import StreamingProvider

Act = Callable[..., Awaitable[RunOutcome]]
STOP_POLL_S = 0.2  # how often a streaming card looks for its asker's stop
STOPPED_NOTE = "已停止"


@dataclass(frozen=True)
class StreamHost:
    """What the pipeline lends a streamed answer: its provider, its way of acting on
    requests (``Acting.act``), its ack, its rule for how a run ends, its ack delay."""

    provider: StreamingProvider
    act: Act
    ack: Callable[[], Awaitable[None]]
    ending: Callable[[RunOutcome, ActionKind], RunEnding]
    ack_after_s: float  # from now: what is left of the ack's delay since the message came
    # The provider's places (``max_concurrent_runs``): the answer waits for one.
    slots: asyncio.Semaphore
    # The acting step's handling of an approved answer (``Acting.accept``): its memory
    # candidates and its reminder, exactly as for a text reply.
    accept: Callable[[Run, ActionRequest, float | None], None]


@dataclass
class LiveAnswer:
    run: Run
    outcome: RunOutcome
    last: float
    complete: dict[int, dict[str, Any]] = field(default_factory=dict)
    acted: set[int] = field(default_factory=set)
    declined: set[int] = field(default_factory=set)
    card: OpenCard | None = None
    index: int | None = None
    # what the answer was asked with: a refused frame's repair round asks again with it
    invocation: EnrichedInvocation | None = None
    skills: Sequence[Any] = ()
    refusal: Refusal | None = None  # a frame the gate refused: the stream stops
    stalled: bool = False
    acked: bool = False
    # A long answer goes on as the next card: where the current card's part begins in the
    # whole text, and which card it is (1, 2, …).
    start: int = 0
    part: int = 1
    broken: str | None = None  # why the next part's card could not open: the stream stops
    stopped: bool = False  # the asker pressed the card's stop button
    stop_checked: float = 0.0  # when the store was last asked about a stop (loop time)
