"""The reliability scripts at their reduced sizes: the daemon as a subprocess on real sockets.

Each script judges itself (``passed``); the figures that carry the claim are asserted here
too, so a script whose own verdict went soft would still be caught. Full sizes are for
``python -m lab.reliability.<name>``.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from lab.fake import FakeDingTalk
from lab.reliability import approvals, backlog, chaos, crashloop, soak, storm

# The scripts run the fake with its default credentials: this is the secret to look for.
APP_SECRET = inspect.signature(FakeDingTalk).parameters["app_secret"].default


def _no_secret(report: dict[str, Any]) -> None:
    """The app secret never appears in a report (the scripts check it too, by value)."""
    secret = APP_SECRET
    assert isinstance(secret, str) and secret
    assert secret not in json.dumps(report, ensure_ascii=False)


async def test_redelivery_storm(tmp_path: Path) -> None:
    report = await storm.run("reduced", tmp_path)
    assert report["passed"], report
    assert report["distinct_msgids"] == 200 and report["frames_injected"] == 2000
    assert report["replies"] == 200 and report["msgids_not_answered_once"] == 0
    assert report["runs_not_once"] == 0 and report["restarts"] == 1
    assert report["duplicates_counted"] == report["frames_acked"] - 200
    assert report["redeliveries_after_restart"] > 0 and report["redeliveries_after_reply"] > 0
    _no_secret(report)


async def test_crash_loop(tmp_path: Path) -> None:
    report = await crashloop.run("reduced", tmp_path)
    assert report["passed"], report
    assert report["kills"] >= 6 and report["injected"] > 100
    assert report["lost"] == 0 and report["answered_twice"] == 0
    assert report["decisions_not_once"] == 0 and report["attempts_left_started"] == 0
    assert report["without_accepted_or_uncertain"] == 0
    assert report["replied"] + report["uncertain"] >= report["injected"]
    # Counted on the platform: a message nobody answered is one whose attempt a kill cut
    # before it reached DingTalk, owned up to as uncertain (resending it could answer twice).
    assert report["unanswered_not_uncertain"] == 0
    assert report["unanswered"] == report["uncertain"] - report["uncertain_but_delivered"]
    assert report["replied"] + report["unanswered"] == report["injected"]
    _no_secret(report)


async def test_connection_chaos(tmp_path: Path) -> None:
    report = await chaos.run("reduced", tmp_path)
    assert report["passed"], report
    assert report["strikes"] == 4 and all(report["strikes_by_kind"].values())
    assert report["lost"] == 0 and report["answered_twice"] == 0
    assert report["answered_once"] == report["injected"] > 0
    # two robots, each struck and each answering only its own people
    assert report["robots"] == ["chaos-a", "chaos-b"]
    assert all(n > 0 for n in report["injected_per_robot"].values())
    assert {strike["robot"] for strike in report["strike_log"]} == {"chaos-a", "chaos-b"}
    assert report["answered_by_another_robot"] == 0
    assert report["recovery_s_max"] <= 30
    _no_secret(report)


async def test_soak(tmp_path: Path) -> None:
    report = await soak.run("reduced", tmp_path)
    assert report["passed"], report
    assert report["events_stored"] == report["replies"] == 10_000  # 5,000 warm-up + 5,000
    assert report["not_answered_once"] == 0
    assert report["rss_growth_pct"] <= 10
    assert report["store_bytes_per_event"] > 0 and report["events_per_s"] > 0
    _no_secret(report)


async def test_backlog_beyond_the_pool_a_stop_amid_it_and_the_first_word_on_time(
    tmp_path: Path,
) -> None:
    report = await backlog.run("reduced", tmp_path)
    assert report["passed"], report
    pool, stop, burst = (report[k] for k in ("beyond_the_pool", "stop_while_waiting", "first_word"))
    # Waiting for a pool place is not failing: all answered, each once, nothing uncertain.
    assert pool["injected"] == pool["replied"] == 40 and pool["receipt_statuses"] == ["accepted"]
    # Sends still waiting at the stop went after the restart; those on the wire were owned
    # up to as uncertain, and the platform has every one of them once.
    assert stop["replied"] == stop["injected"] == 16 and stop["unanswered"] == 0
    assert stop["answered_twice"] == 0 and stop["uncertain"] == stop["uncertain_but_delivered"]
    assert stop["on_platform_at_stop"] < stop["injected"], "the stop came amid the backlog"
    # The burst's first word: within ack_after_s of arrival, though runs queue for the model.
    assert burst["first_word_late"] == 0 and burst["answered_once"] == burst["injected"] == 60
    assert burst["acks"] > 0
    _no_secret(report)


async def test_approvals_survive_kills_wrong_clickers_and_expiry(tmp_path: Path) -> None:
    report = await approvals.run("reduced", tmp_path)
    assert report["passed"], report
    assert report["kills"] >= 3 and report["approvals"] == report["requests"] == 40
    statuses = report["approvals_by_status"]
    assert statuses.get("approved", 0) > 0 and statuses.get("denied", 0) > 0
    assert statuses.get("expired", 0) > 0 and "pending" not in statuses
    assert report["todos_created"] == statuses["approved"]  # each approved act once
    assert report["wrong_person_clicks"] > 0 and report["decided_by_someone_else"] == 0
    assert report["clicks_not_recorded"] == 0 and report["uncertain_acts_left"] == 0
    _no_secret(report)
