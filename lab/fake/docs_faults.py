"""The fake's ``docs`` fault: how a lab case makes DingTalk's doc, wiki and AI-table reads
unhelpful (lab/fake/docs.py serves them). Pure data, like ``lab.fake.faults``, which parses
the rest of a fault spec and hands this target here.

    {"docs": {"throttled": 2, "retry_after": 1}}   the next 2 knowledge reads: 429
    {"docs": {"no_permission": "doc-1"}}           nobody may read doc-1 from now on
    {"docs": {"deleted": ["doc-1", "doc-2"]}}      deleted from now on (404, deleted: true)
    {"docs": {"slow": 3, "times": 2}}              the next 2 reads answer 3 s late

Keys combine in one spec. ``no_permission`` strikes every operator, the lab's reader too:
it is a person's access taken away after sync, which the probe must notice. ``slow`` is
real seconds (the fake's timeout faults are), at most ``SLOW_MAX_S``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DOCS_FAULT_KEYS = frozenset(
    {"throttled", "retry_after", "no_permission", "deleted", "slow", "times"}
)
SLOW_MAX_S = 30.0


@dataclass
class DocsFault:
    throttled: int = 0  # this many next reads answer 429
    retry_after: float | None = None  # the throttle's Retry-After
    no_permission: list[str] = field(default_factory=list)  # node ids nobody may read
    deleted: list[str] = field(default_factory=list)  # node ids deleted from now on
    slow_s: float | None = None  # the next ``slow_times`` reads answer this late
    slow_times: int = 1


def _ids(name: str, value: Any) -> list[str]:
    """A node id or a list of them."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) and v for v in items):
        raise ValueError(f"fault docs.{name} must be a node id or a list of them, got {value!r}")
    return list(items)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"fault docs.{name} must be a positive integer, got {value!r}")
    return value


def _seconds(name: str, value: Any, most: float) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value <= most
    if not ok:
        raise ValueError(f"fault docs.{name} must be seconds from 0 to {most:g}, got {value!r}")
    return float(value)


def parse_docs_fault(inner: Any) -> DocsFault:
    """Check a ``docs`` fault whole; ``ValueError`` names what is wrong."""
    if not isinstance(inner, dict) or not inner:
        raise ValueError(f"fault 'docs' must be a non-empty object, got {inner!r}")
    unknown = sorted(set(inner) - DOCS_FAULT_KEYS)
    if unknown:
        raise ValueError(f"fault 'docs': unknown key(s) {', '.join(map(repr, unknown))}")
    if "retry_after" in inner and "throttled" not in inner:
        raise ValueError("fault docs.retry_after goes with throttled")
    if "times" in inner and "slow" not in inner:
        raise ValueError("fault docs.times counts the slow reads; give slow with it")
    if set(inner) <= {"retry_after", "times"}:
        raise ValueError("fault 'docs' needs throttled, no_permission, deleted or slow")
    fault = DocsFault()
    if "throttled" in inner:
        fault.throttled = _count("throttled", inner["throttled"])
    if "retry_after" in inner:
        fault.retry_after = _seconds("retry_after", inner["retry_after"], 3600.0)
    if "no_permission" in inner:
        fault.no_permission = _ids("no_permission", inner["no_permission"])
    if "deleted" in inner:
        fault.deleted = _ids("deleted", inner["deleted"])
    if "slow" in inner:
        fault.slow_s = _seconds("slow", inner["slow"], SLOW_MAX_S)
        fault.slow_times = _count("times", inner.get("times", 1))
    return fault
