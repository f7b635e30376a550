"""Named places where the lab can make the runtime die, as ``kill -9`` would.

Production code calls ``crash.hit("after_send")`` at the points where a crash is most
dangerous; ``mid_stream`` is an AI card's, after DingTalk took a frame and before the answer
is complete; ``card_call_waits`` a card call's, waiting for its pacing slot or a throttle's
back-off. Nothing is armed outside the lab, so a hit is a dictionary lookup.
"""

from __future__ import annotations

from typing import Literal

CrashPoint = Literal[
    "after_ingest",
    "after_attempt_started",
    "after_send",
    "mid_stream",
    "between_pieces",
    "card_call_waits",
]
CRASH_POINTS: tuple[CrashPoint, ...] = (
    "after_ingest",
    "after_attempt_started",
    "after_send",
    "mid_stream",
    "between_pieces",  # a piece of a long answer sent and receipted, the next not yet tried
    "card_call_waits",  # a card call waits for its slot in the app's budget, or after a 403
)


class Crash(BaseException):
    """Raised at an armed point. A BaseException so that no ``except Exception`` absorbs it."""

    def __init__(self, point: str) -> None:
        super().__init__(f"simulated crash at {point}")
        self.point = point


class CrashPoints:
    def __init__(self) -> None:
        self._armed: set[str] = set()

    def arm(self, point: CrashPoint) -> None:
        if point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}; known: {', '.join(CRASH_POINTS)}")
        self._armed.add(point)

    @property
    def armed(self) -> tuple[str, ...]:
        """The points armed and not yet hit."""
        return tuple(sorted(self._armed))

    def hit(self, point: CrashPoint) -> None:
        if point in self._armed:
            self._armed.discard(point)
            raise Crash(point)
