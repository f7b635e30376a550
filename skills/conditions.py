"""The conditions a skill names for when it applies: ``key:v1|v2`` or ``has-tools``.

Parsed once when the skill loads (``skills/loader.py``: a malformed one refuses the skill, an
unknown key only makes it never apply) and held against each message's facts.
"""

from __future__ import annotations

#: Condition keys a skill may use, and (where the set is closed) the values they accept.
#: ``tool:<name>`` applies when that tool is enabled; the bare ``has-tools`` when any is.
CONDITION_KEYS: dict[str, frozenset[str] | None] = {
    "msgtype": None,
    "scene": frozenset({"dm", "group"}),
    "provider": None,
    "tool": None,
}
HAS_TOOLS = "has-tools"


class UnknownCondition(ValueError):
    """A condition this dta does not know (a newer or another host's): the skill is loaded
    and listed with a warning, and never applies."""


def parse_condition(condition: str) -> tuple[str, frozenset[str]]:
    """Split ``key:v1|v2`` into its key and accepted values; raise ValueError if malformed."""
    key, sep, raw_values = condition.partition(":")
    key = key.strip().lower()
    values = frozenset(v.strip() for v in raw_values.split("|") if v.strip())
    if not sep or not key or not values:
        raise ValueError(f"condition {condition!r} is not of the form key:value or key:v1|v2")
    if key not in CONDITION_KEYS:
        known = ", ".join([*sorted(CONDITION_KEYS), HAS_TOOLS])
        raise UnknownCondition(f"condition {condition!r} has unknown key {key!r} (known: {known})")
    closed = CONDITION_KEYS[key]
    if closed is not None and not values <= closed:
        bad = ", ".join(sorted(values - closed))
        raise ValueError(f"condition {condition!r}: {key} must be one of {sorted(closed)}: {bad}")
    return key, values


def holds(condition: str, facts: dict[str, str], tools: frozenset[str]) -> bool:
    """Whether one condition holds for the message's facts and the enabled tools."""
    if condition.strip().lower() == HAS_TOOLS:
        return bool(tools)
    key, values = parse_condition(condition)
    if key == "tool":
        return bool(values & tools)
    return facts[key] in values
