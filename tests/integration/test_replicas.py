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
    # A replica paused while it held runs, resumed after the others took them over, wrote
    # nothing into them and sent nothing for them (its writes are fenced by the lease).
    paused = report["pause"]
    assert paused["paused_replica_held_runs"] > 0 and paused["taken_over"]
    assert paused["writes_after_resume"] == 0 and paused["sends_after_resume"] == 0
    assert paused["events_with_two_last_words"] == 0
    # Several messages per person, spread over the replicas: replies in arrival order, each
    # message answered once (on its own or together with a later one that superseded it).
    order = report["order"]
    assert order["messages"] == 40 and order["replies"] > 0
    assert order["people_answered_out_of_order"] == 0 and order["answered_twice"] == 0
    assert order["neither_answered_nor_superseded"] == 0 and order["stray_replies"] == 0
