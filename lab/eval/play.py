"""One case, played: the fake DingTalk and model up, the steps in order, one judge call.

``dta lab eval`` plays a case in one of two ways — in-process on a virtual clock
(``lab.eval.runner.CaseRun``) or through the real connector and websocket
(``lab.eval.live.LiveCaseRun``). Each is a ``Driver``: it opens the runtimes, plays one step
on the platform's side, settles what the steps left and says which records the judge
reads. Everything around that is the same for both and lives here, once: the fake platform
and the fake model started and stopped, the steps played in order, the verdict from the
judge (and any check the driver adds, as a crash point armed and never hit), the transcript,
a runner error shown as the case's error.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from lab.eval.case_settings import uses_model
from lab.eval.cases import Case, Step
from lab.eval.judge import Check, judge
from lab.eval.stores import Records
from lab.eval.transcript import Transcript, collect_transcript
from lab.fake import FakeDingTalk
from lab.fake.calls import call_counts
from lab.models.fake_model import FakeModel


@dataclass
class CaseResult:
    case: Case
    problems: list[Check] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    transcript: Transcript | None = None
    skipped: str | None = None  # why the case was not run (live mode only)

    @property
    def passed(self) -> bool:
        return not self.problems and self.error is None and self.skipped is None


class Driver(Protocol):
    """How a case's steps reach the runtime: in-process or over the stream."""

    case: Case
    fake: FakeDingTalk

    async def open(self, model_url: str | None) -> None:
        """The case's settings (the fake model at ``model_url``, if it uses one) and every
        robot's runtime, started."""

    async def play(self, step: Step, following: Step | None) -> None:
        """One step on the platform's side (``following``: the next one, or None)."""

    async def finish(self) -> None:
        """Settle what the steps left, right before the judge."""

    def records(self) -> Records:
        """What the judge reads: the one robot's store, or every robot's side by side."""

    def checks(self) -> list[Check]:
        """Checks of the driver's own beside the judge's (a crash point never hit)."""

    async def close(self) -> None:
        """Every runtime (and connector) stopped; the stores stay."""


async def play_case(driver: Driver) -> CaseResult:
    """Play ``driver``'s case from start to verdict."""
    case, fake = driver.case, driver.fake
    started = time.perf_counter()
    result = CaseResult(case)
    await fake.start()
    model = FakeModel(case.fixtures.model_script) if uses_model(case) else None
    try:
        await driver.open(await model.start() if model else None)
        steps = case.steps
        for at, step in enumerate(steps):
            await driver.play(step, steps[at + 1] if at + 1 < len(steps) else None)
        await driver.finish()
        records = driver.records()
        received = [message.to_dict() for message in fake.received]
        result.problems = judge(
            case.expect,
            received,
            records,
            fake.downloads,
            [card.to_dict() for card in fake.cards],
            call_counts(fake.request_log),
            model.requests if model is not None else None,
            fake.workspace_view(),
            fake.reactions,
        )
        result.problems += driver.checks()
        result.transcript = collect_transcript(records, received, fake.faults_seen)
    except Exception as exc:  # a runner error is a failed case, with the reason shown
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        await driver.close()
        if model is not None:
            await model.stop()
        await fake.stop()
    result.seconds = time.perf_counter() - started
    return result


async def reply_card_once_streaming(
    store: Any,
    fake: FakeDingTalk,
    msg: str,
    frames: int,
    card: int | None = None,
    timeout_s: float = 10.0,
) -> str:
    """The outTrackId of the reply card the run of ``msg`` streams, once the fake holds
    ``frames`` frames of it (real time: the run streams meanwhile); with ``card``, of the
    answer's ``card``-th card once a later one holds them; ``ValueError`` if none."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tracks = {stored.out_track_id for stored in store.cards.all() if stored.event_id == msg}
        held = [shown for shown in fake.cards if shown.out_track_id in tracks]
        later = card is None or len(held) > card
        if held and later and len(held[-1].frames) >= frames:
            return held[-1 if card is None else card - 1].out_track_id
        await asyncio.sleep(0.01)
    which = "no reply card" if card is None else f"no card after card {card}"
    raise ValueError(f"click: {which} of {msg!r} reached {frames} frames")


FEEDBACK_CHOICES = ("up", "down")


def answer_card(store: Any, msg: str, card: int | None = None) -> str:
    """The outTrackId of the answer card the run of ``msg`` sent (its ``card``-th when an
    answer took several; its last by default): where its feedback buttons are."""
    tracks = [stored.out_track_id for stored in store.cards.all() if stored.event_id == msg]
    if not tracks or (card is not None and card > len(tracks)):
        raise ValueError(f"click: no answer card of {msg!r} to rate")
    return tracks[-1 if card is None else card - 1]
