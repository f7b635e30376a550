"""A case that does not need the virtual clock gives the same verdict through the real
connector and websocket as through direct ingest (a fixed sample of every folder here;
`dta lab eval --live` runs them all)."""

from pathlib import Path

import pytest

from lab.eval.cases import discover
from lab.eval.live import live_skip_reason, run_live_case
from lab.eval.runner import run_case
from tests.test_lab_eval import case_paths


def every_fourth_of_each_folder(cases: list) -> list:
    """A fixed sample that reaches every folder of cases: each folder's 1st, 5th, 9th, …
    (`dta lab eval --live lab/cases` runs them all; all of them here took CI two minutes)."""
    folders: dict[Path, list] = {}
    for case in cases:
        folders.setdefault(Path(case.path).parent, []).append(case)
    return [case for group in folders.values() for case in group[::4]]


@pytest.mark.timeout(300)  # each sampled case twice: in-process and over the wire
async def test_live_and_direct_verdicts_agree():
    cases = discover(case_paths())
    live_cases = every_fourth_of_each_folder(
        [case for case in cases if live_skip_reason(case) is None]
    )
    assert len(live_cases) >= 40
    disagreements = []
    for case in live_cases:
        direct, live = await run_case(case), await run_live_case(case)
        if direct.passed != live.passed:
            disagreements.append((case.id, [str(p) for p in live.problems], live.error))
    assert not disagreements


async def test_virtual_clock_cases_are_skipped_with_a_reason():
    reasons = {case.id: live_skip_reason(case) for case in discover(case_paths())}
    assert "restart" in reasons["crash-after-send"]
    assert "same instant" in reasons["three-quick-messages-one-reply"]
    assert reasons["dm-decimal-arithmetic"] is None
    skipped = await run_live_case(
        next(c for c in discover(case_paths()) if c.id == "crash-after-send")
    )
    assert skipped.skipped and not skipped.passed
