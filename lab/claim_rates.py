"""How well the claim checks (gates/claims.py) find claims and promises, per labelled set
and per class: recall on claims and on promises, false alarms on ordinary answers.

    python -m lab.claim_rates            # every set in lab/claims/
    python -m lab.claim_rates --show final4.json   # and each miss and false alarm of one set
    python -m lab.claim_rates --detector mypkg.judge:find_claims   # another detector

The sets and what each is for (``about`` in each file says where its sentences come from):

- ``sentences.json`` — the table the patterns were first written against;
- ``heldout.json``, ``fresh.json``, ``final.json``, ``final2.json``, ``final3.json`` —
  written apart from the patterns, measured once (that first figure is their measure,
  docs/lab.md), then used to develop them;
- ``final4.json`` — written apart from the patterns and never used to tune them: the
  current measure.

A detector is any ``(text) -> list[Claim-like]`` whose items have a ``tense`` of
``"done"`` or ``"promise"`` (``--detector module:function``), so a learned judge can be
measured the same way.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gates.claims import find_claims

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "lab/claims"
# the old table's shape ({"claims": [...], "promises": [...], "ordinary": [...]})
_OLD_LABELS = {"claims": "claim", "promises": "promise", "ordinary": "ordinary"}


def entries(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if "sentences" in data:
        return list(data["sentences"])
    return [
        {"text": text, "label": label, "kind": label}
        for key, label in _OLD_LABELS.items()
        for text in data.get(key, [])
    ]


Detector = Callable[[str], list[Any]]


def judged(entry: dict[str, Any], detect: Detector = find_claims) -> bool:
    """Did the checks read the sentence as its label says?"""
    found = detect(entry["text"])
    if entry["label"] == "claim":
        return any(c.tense == "done" for c in found)
    if entry["label"] == "promise":
        return any(c.tense == "promise" for c in found)
    return not found


def rates(items: list[dict[str, Any]], detect: Detector = find_claims) -> dict[str, Any]:
    """Recall per claim and promise, false alarms per ordinary class."""
    total: Counter[str] = Counter()
    right: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    alarms: Counter[str] = Counter()
    for entry in items:
        ok = judged(entry, detect)
        total[entry["label"]] += 1
        right[entry["label"]] += ok
        if entry["label"] == "ordinary":
            kind = str(entry.get("kind") or "ordinary")
            classes[kind] += 1
            alarms[kind] += not ok
    report: dict[str, Any] = {}
    for label in ("claim", "promise"):
        if total[label]:
            report[f"{label}_recall"] = (right[label], total[label])
    if total["ordinary"]:
        report["false_alarms"] = (total["ordinary"] - right["ordinary"], total["ordinary"])
        report["false_alarms_by_class"] = {k: (alarms[k], classes[k]) for k in sorted(classes)}
    return report


def _ratio(pair: tuple[int, int]) -> str:
    hit, of = pair
    return f"{hit}/{of} = {hit / of:.3f}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    show = args[args.index("--show") + 1] if "--show" in args else None
    detect: Detector = find_claims
    if "--detector" in args:
        module, _, name = args[args.index("--detector") + 1].partition(":")
        detect = getattr(importlib.import_module(module), name or "find_claims")
    for path in sorted(SETS.glob("*.json")):
        report = rates(entries(path), detect)
        lines = [f"{k}: {_ratio(v)}" for k, v in report.items() if isinstance(v, tuple)]
        print(f"{path.name}: " + "; ".join(lines))
        by_class = report.get("false_alarms_by_class", {})
        shown = ", ".join(f"{k} {a}/{n}" for k, (a, n) in by_class.items())
        print(f"  false alarms by class: {shown}")
        if show == path.name:
            for entry in entries(path):
                if not judged(entry, detect):
                    found = [
                        (c.tense, getattr(c, "effect", ""), getattr(c, "text", ""))
                        for c in detect(entry["text"])
                    ]
                    print(f"    {entry['label']:8} {entry['text'][:100]!r} -> {found}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
