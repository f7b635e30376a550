"""Several replicas on one PostgreSQL, at the replicas script's reduced size.

Real daemons as subprocesses, a fake stream gateway that spreads frames over their
connections, a redelivery storm and ``kill -9`` of random replicas: the figures that carry
the claim are asserted here too, so a script whose verdict went soft would still be caught.
"""

from __future__ import annotations

from pathlib import Path

from lab.reliability import replicas
from tests.conftest import PG_URL, require_postgres


async def test_replicas_share_the_work_and_answer_each_message_once(tmp_path: Path) -> None:
    require_postgres()
    report = await replicas.run("reduced", tmp_path, PG_URL)
    assert report["passed"], report
    assert report["kills"] == 3 and report["injected"] > 100
    assert report["answered_twice"] == 0 and report["lost"] == 0
    assert report["runs_not_once"] == 0 and report["decisions_not_once"] == 0
    assert report["unanswered_not_uncertain"] == 0 and report["attempts_left_started"] == 0
    assert report["replied"] + report["unanswered"] == report["injected"]
    assert report["duplicate_deliveries"] >= report["redeliveries_injected"]
    assert len(report["runs_per_process"]) >= 3
