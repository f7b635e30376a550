"""The faults of the approvals run: their names, which are asked for, their timing and the
fake's fault specs armed in turn during the load."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FAULTS = (
    "timeout",
    "late",
    "keep_every_create",
    "throttled_readback",
    "reword",
    "paused",
    "kill_after_click",
    "kill_during_create",
    "sigterm",  # every other random stop is a SIGTERM with a 3 s grace, not a kill -9
)
# Faults asked for by name only (none now: ``sigterm`` joined the default set once a write
# cut before its bytes left stayed owed; docs/reliability.md, "SIGTERM amid approvals").
OPT_IN: frozenset[str] = frozenset()
UP_S = (1.0, 3.0)  # how long a daemon lives between kills
TARGETED_UP_S = (0.3, 1.0)  # before a targeted kill, which then waits for its moment
TARGETED = ("after_click", "during_create", "after_proposal")
# The write faults' timing: the daemon gives up on an answer after READ_TIMEOUT_S; the fake
# stalls a struck write 3 x FAKE_TIMEOUT_S (past it); a read-back that finds nothing is
# tried again SETTLE_S after the doubt began (act_settle_s) before the act is called not
# done. A late create lands LATE_SHORT_S after it came (before the client gives up) or
# LATE_LONG_S (after the first read-back, about READ_TIMEOUT_S + 0.5 s, found nothing;
# before READ_TIMEOUT_S + SETTLE_S, when the second one looks).
READ_TIMEOUT_S = 3.0
FAKE_TIMEOUT_S = 1.5
SETTLE_S = 3.0
LATE_SHORT_S = 1.5
LATE_LONG_S = 4.5
THROTTLED_READS = 6  # a burst: the client's retries (3) use up some, a read-back the rest
PAUSE_S = 4.0  # how long a daemon stays paused while clicks keep arriving
# The faults armed in turn during the load (each while its kind is chosen).
ARM_CYCLE = ("timeout", "late", "throttled_readback", "timeout", "late_long", "throttled_readback")
SPECS: dict[str, dict[str, Any]] = {
    "timeout": {"todo_create": {"error": "applied_then_timeout", "times": 1}},
    "late": {"todo_create": {"error": "applied_late", "after_s": LATE_SHORT_S, "times": 1}},
    "late_long": {"todo_create": {"error": "applied_late", "after_s": LATE_LONG_S, "times": 1}},
    "throttled_readback": {
        "todo_get": {"error": "throttled", "retry_after": 0.5, "times": THROTTLED_READS}
    },
}


def chosen_faults(names: Iterable[str] | None) -> tuple[str, ...]:
    """The faults asked for (all but the opt-in ones when None); ``ValueError`` naming an
    unknown one."""
    if names is None:
        return tuple(f for f in FAULTS if f not in OPT_IN)
    picked = tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
    unknown = [n for n in picked if n not in FAULTS and n != "none"]
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)} (known: {', '.join(FAULTS)})")
    return tuple(n for n in FAULTS if n in picked)
