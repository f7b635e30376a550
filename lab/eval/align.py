"""Explain ``platform.messages`` failures without cascading.

The expectation is positional (the i-th entry against the i-th message received). Compared
naively, one missing or one extra message makes every later entry "mismatch" its
neighbour, and the report buries the one real difference under a page of false ones. So
when the positional check fails, the entries are aligned with what was received (the
longest in-order matching) and only the real differences are reported: an entry nothing
matched (with the field-by-field difference against the message in its place, if any), or
an extra message that pushed the later ones out of place. The verdict is unchanged — a
positional failure still fails — only the wording differs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, TypeVar

W = TypeVar("W")
P = TypeVar("P")

Finding = tuple[str, Any, Any]  # (check name, expected, actual)


def _shown(message: dict[str, Any]) -> str:
    text = (message.get("text") or "").replace("\n", " ")
    return f"{message.get('channel')}: {text[:60]}"


def _longest_matching(ok: list[list[bool]]) -> list[tuple[int, int]]:
    """Pairs (entry, message), in order on both sides, as many as possible."""
    n, m = len(ok), len(ok[0]) if ok else 0
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            take = best[i + 1][j + 1] + 1 if ok[i][j] else 0
            best[i][j] = max(take, best[i + 1][j], best[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n and j < m:
        if ok[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def message_findings(
    wanted: list[W],
    received: list[dict[str, Any]],
    problems_of: Callable[[int, W, dict[str, Any]], list[P]],
    describe: Callable[[W], Any],
) -> list[P | Finding]:
    """The problems to report for ``platform.messages``: none when every entry matches its
    position; otherwise one finding per real difference."""
    positional = [
        problems_of(i, want, received[i]) if i < len(received) else None
        for i, want in enumerate(wanted)
    ]
    if all(p == [] for p in positional):
        return []
    ok = [[not problems_of(i, want, got) for got in received] for i, want in enumerate(wanted)]
    pairs = _longest_matching(ok)
    matched_entries = {i for i, _ in pairs}
    used = {j for _, j in pairs}
    findings: list[P | Finding] = []
    bounds = [(-1, -1), *pairs, (len(wanted), len(received))]
    for (i0, j0), (i1, j1) in itertools.pairwise(bounds):
        gap_entries = [i for i in range(i0 + 1, i1) if i not in matched_entries]
        gap_messages = [j for j in range(j0 + 1, j1) if j not in used]
        for i in gap_entries:
            if gap_messages:
                j = gap_messages.pop(0)
                used.add(j)
                findings.extend(problems_of(i, wanted[i], received[j]))
            else:
                findings.append(
                    (
                        f"platform.messages[{i}]",
                        describe(wanted[i]),
                        f"missing: no message matched it ({len(received)} received)",
                    )
                )
        if i1 < len(wanted):  # extra messages before a matched entry pushed it out of place
            for j in gap_messages:
                extra = f"an extra message #{j}: {_shown(received[j])}"
                findings.append(("platform.messages", "no message here", extra))
    return findings


def as_text(value: Any) -> str:
    """Evidence for a person: JSON (never a Python repr), short strings as they are."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str)
