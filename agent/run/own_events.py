"""The runtime's own events, and the one table that routes them (``OwnEvents``).

An engaged run is the runtime's own business — an operator's send, an approval's decision
(``approval:<id>``), an act read back (``act-checked:<intent>``), a due item of the
heartbeat, 「取消提醒」, a code reply 「确认 4F2A」 — when a row of the table matches its
event; the first row that matches decides (``Pipeline._work`` asks before anything else).
Any other event goes straight to the answering path: an ordinary message reaches no handle
in ``agent/proactive/`` or the approval desk (only the rows' pure ``matches`` read it).

Each row (``OwnRoute``) is a name, ``matches(event)`` (pure, over the event alone) and
``handle(event, run, hands)``: the run's end, or None when on a closer look it is not the
runtime's after all (a code we never gave) and the answering path takes it — or when the
runtime's own event is to be answered like a question (a recurring job's slot), whose
answer the row's ``review`` then sees before it goes. ``held``: its
events wait while the robot is paused and are carried out once it resumes, never dropped
as a paused message would be (the asker decided; the asker is owed word).

The rows live with their work — approvals' in ``agent/acts/routes.py``, proactive work's
in ``agent/proactive/work.py`` — and the table, in order, is assembled in one place:
``agent/components/own_events.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from agent.contracts import Event, Run
from agent.run.acting import Acting
from agent.run.endings import Endings
from agent.run.outcome import RunOutcome
from agent.run.ways import ActAs


@dataclass(frozen=True)
class Hands:
    """What a route acts and ends its run with: the pipeline's acting step and endings."""

    acting: Acting
    endings: Endings

    async def say(self, run: Run, text: str) -> Run:
        """The host's own short words as the run's reply, and the run's end."""
        outcome = RunOutcome()
        await self.acting.act(run, [{"kind": "reply", "text": text}], outcome, ActAs.HOST_WORDS)
        return self.endings.finish(run, outcome, outcome.final_state())


# A row's look at the answer the answering path made for its event, before it goes: the
# run's end (e.g. a job's ``nothing_new``), or None to let it go.
Review = Callable[[Event, Run, Sequence[Any], RunOutcome, Hands], Run | None]


class OwnRoute(NamedTuple):
    name: str
    matches: Callable[[Event], bool]
    handle: Callable[[Event, Run, Hands], Awaitable[Run | None]]
    held: bool = False  # waits while the robot is paused (carried out once resumed)
    review: Review | None = None  # its answer looked at before it goes (handle gave None)


class OwnEvents:
    """The routing table: its rows in order, the first match decides."""

    def __init__(self, routes: Sequence[OwnRoute]) -> None:
        self.routes = tuple(routes)

    def route(self, event: Event) -> OwnRoute | None:
        """The row that takes ``event``; None: not the runtime's own, an ordinary message."""
        return next((r for r in self.routes if r.matches(event)), None)

    def held(self, event: Event) -> bool:
        """The event waits while the robot is paused (its row says so)."""
        route = self.route(event)
        return route is not None and route.held

    def review(
        self, event: Event, run: Run, requests: Sequence[Any], outcome: RunOutcome, hands: Hands
    ) -> Run | None:
        """The run's end if the event's row stops the answer before it goes, else None."""
        route = self.route(event)
        if route is None or route.review is None:
            return None
        return route.review(event, run, requests, outcome, hands)

    async def handle(self, event: Event, run: Run, hands: Hands) -> Run | None:
        """The run's end if the event is the runtime's own, else None (the pipeline goes
        on as for any message)."""
        route = self.route(event)
        if route is None:
            return None
        return await route.handle(event, run, hands)
