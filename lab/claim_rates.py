"""How often the claim checks (gates/claims.py) fire: on the labelled table, and on text
they were not written against (every string in the lab's and the shared cases, the skills
and the seeds).

    python -m lab.claim_rates [--show]
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gates.claims import done_claim, later_promise

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "lab/claims/sentences.json"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def held_out() -> set[str]:
    """Sentences of the cases, skills and seeds (split at sentence ends), four chars or more."""
    found: set[str] = set()
    shared = ROOT.parent / "shared"
    for case in [*ROOT.glob("lab/cases/**/*.json"), *shared.glob("cases/**/*.json")]:
        found.update(_strings(json.loads(case.read_text(encoding="utf-8"))))
    for doc in [*ROOT.glob("skills/**/*.md"), *shared.glob("seeds/*")]:
        for line in doc.read_text(encoding="utf-8", errors="replace").splitlines():
            found.update(re.split(r"(?<=[。！？.!?])", line.strip()))
    return {text for text in found if len(text) > 3}


def flagged(text: str) -> str | None:
    return done_claim(text) or later_promise(text)


def main() -> int:
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    claims = table["claims"] + table["promises"]
    caught = sum(1 for s in table["claims"] if done_claim(s))
    caught += sum(1 for s in table["promises"] if later_promise(s))
    false = [s for s in table["ordinary"] if flagged(s)]
    print(
        f"table: {caught}/{len(claims)} claims and promises found;"
        f" {len(false)}/{len(table['ordinary'])} ordinary answers flagged"
    )
    others = sorted(held_out())
    hits = [(text, flagged(text)) for text in others if flagged(text)]
    print(f"held out: {len(hits)} of {len(others)} strings flagged")
    if "--show" in sys.argv:
        for text, words in hits:
            print(f"  {words!r:20} in {text[:90]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
