"""The store-fault script at its reduced size: a real daemon, real faults of its store.

The script judges itself; the figures that carry the claim are asserted here too, so a
script whose own verdict went soft would still be caught.
"""

from __future__ import annotations

from pathlib import Path

from lab.reliability import storefaults


async def test_store_faults_lose_nothing_and_ack_nothing_after_a_fatal_one(
    tmp_path: Path,
) -> None:
    report = await storefaults.run("reduced", tmp_path)
    assert report["passed"], report
    for transient in ("full", "locked"):
        phase = report[transient]
        assert phase["injected"] >= 60, phase
        assert phase["unanswered"] == 0 and phase["answered_twice"] == 0, phase
        assert phase["answered_once"] == phase["injected"], phase
        assert phase["attempts_left_started"] == 0 and phase["not_ready_during_fault"], phase
    for fatal in ("deleted", "corrupt"):
        phase = report[fatal]
        assert phase["exited"] and phase["exit_code"] == 3, phase  # the store-lost promise
        assert phase["acked_after_noticed"] == 0, phase
    assert report["deleted"]["restart_refused"], report["deleted"]
