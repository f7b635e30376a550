"""Quiet hours: a daily span in local time when follow-ups wait (a value the settings
validate and the schedule reads, so it lives at the bottom with the other contracts)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

_SPAN = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@dataclass(frozen=True)
class QuietHours:
    """A daily span in local time, ``start`` to ``end`` (minutes after midnight); it may
    cross midnight (22:00-08:00)."""

    start: int
    end: int

    def _minute(self, moment: float, tz: ZoneInfo) -> int:
        local = datetime.fromtimestamp(moment, tz)
        return local.hour * 60 + local.minute

    def contains(self, moment: float, tz: ZoneInfo) -> bool:
        minute = self._minute(moment, tz)
        if self.start <= self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end


def parse_quiet_hours(text: str) -> QuietHours | None:
    """``"22:00-08:00"`` → QuietHours; None when it is not such a span (or is empty)."""
    match = _SPAN.match(text)
    if match is None:
        return None
    h1, m1, h2, m2 = (int(part) for part in match.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59 or (h1, m1) == (h2, m2):
        return None
    return QuietHours(h1 * 60 + m1, h2 * 60 + m2)
