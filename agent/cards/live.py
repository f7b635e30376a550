"""What a streamed answer carries while it is written: the state of one answer
(``LiveAnswer``), shared by the consumer (``agent/cards/stream.py``) and the ways it ends
(``agent/cards/endings.py``). What the run lends it is ``StreamHost``
(``agent/run/streaming.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.cards.broker import OpenCard
from agent.contracts import (
    EnrichedInvocation,
    Run,
)
from agent.run.outcome import RunOutcome
from gates.action import Refusal

STOP_POLL_S = 0.2  # how often a streaming card looks for its asker's stop
STOPPED_NOTE = "已停止"


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
    stopped: bool = False  # the asker pressed the stop button of one of its cards
    # the outTrackIds of the answer's cards so far: a stop on any of them stops it (the
    # first card still shows its button while the answer goes on in the next)
    tracks: list[str] = field(default_factory=list)
    stop_checked: float = 0.0  # when the store was last asked about a stop (loop time)
