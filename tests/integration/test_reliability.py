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

import pytest

from lab.fake import FakeDingTalk
from lab.reliability import approvals, backlog, chaos, crashloop, jobs, sigterm, soak, storm

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


@pytest.mark.timeout(300)  # strikes, then the pieces and revoked faults
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
    pieces = report["pieces"]  # long answers while the daemon is killed -9
    assert pieces["pieces_twice"] == 0 and pieces["pieces_lost_untold"] == 0
    assert pieces["answers_cut_by_a_kill"] > 0
    revoked = report["revoked"]  # one robot's credentials revoked for 15 s
    assert revoked["lost"] == 0 and revoked["answered_twice"] == 0
    assert revoked["answered_by_another_robot"] == 0 and revoked["delayed_by_the_revocation"] > 0
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
    # Long answers killed mid-way: every chunk and chart once, or the person told; none twice.
    pieces = report["pieces"]
    assert pieces["pieces_twice"] == 0 and pieces["pieces_lost_untold"] == 0
    assert pieces["answers_cut_by_a_kill"] > 0, "a kill fell amid the answers"
    _no_secret(report)


@pytest.mark.timeout(360)  # every other random stop a SIGTERM with its 3 s grace
async def test_approvals_survive_kills_wrong_clickers_and_expiry(tmp_path: Path) -> None:
    # the reduced size on SQLite, with every fault: write timeouts, late creates, a platform
    # that keeps every create, throttled read-backs, a model rewording a re-asked act, a
    # paused restart while clicks come, kills after a click, during a create and after a
    # proposal
    report = await approvals.run("reduced", tmp_path)
    assert report["passed"], report
    assert (
        report["store"] == "sqlite"
        and set(report["faults"]) == set(approvals.FAULTS) - approvals.OPT_IN
    )
    assert report["kills"] >= 3 + 1 + 1 + 2 and report["requests"] == 40
    assert report["approvals"] >= report["requests"]  # a re-asked act may open another
    kinds = report["kills_by_kind"]
    assert kinds.get("random", 0) + kinds.get("sigterm", 0) >= 3 and report["pauses"] == 1
    assert kinds.get("sigterm", 0) >= 1  # every other random stop: its grace, then cut
    statuses = report["approvals_by_status"]
    assert statuses.get("approved", 0) > 0 and statuses.get("denied", 0) > 0
    assert statuses.get("expired", 0) > 0 and "pending" not in statuses
    outcomes = report["requests_by_outcome"]
    assert report["todos_created"] == outcomes["done"]  # each approved act once, by its id
    struck = report["faults_struck"]
    assert struck.get("timeout", 0) > 0 and struck.get("late", 0) > 0
    assert struck.get("throttled_readback", 0) > 0
    assert report["acts_uncertain_at_first"] > 0 and report["askers_told_checked"] > 0
    assert report["wrong_person_clicks"] > 0 and report["decided_by_someone_else"] == 0
    assert report["clicks_not_recorded"] == 0 and report["uncertain_acts_left"] == 0
    for key in approvals.MUST_BE_ZERO:  # told the truth, nothing stuck, nothing twice
        assert report[key] == 0, (key, report)
    assert report["settlement_events"] > 0 and report["unfinished_runs"] == 0
    _no_secret(report)


@pytest.mark.timeout(360)  # every other random stop a SIGTERM with its 3 s grace
async def test_approvals_decided_by_text_code(tmp_path: Path) -> None:
    # no card template: the prompt asks in words and the asker replies its code (「确认
    # 4F2A」, half the requests in a group of their own), as a message: some first from a
    # stranger, some sent twice, some delivered again; every fault, kills after a reply;
    # a reply a pause silenced is sent again after the resume
    # a prompt a stop cut before it left is owed its code in a line of its own
    # (requests_never_asked, a MUST_BE_ZERO figure)
    faults = tuple(f for f in approvals.FAULTS if f not in approvals.OPT_IN)
    report = await approvals.run("reduced", tmp_path, faults, codes=True)
    assert report["passed"], report
    assert report["decided_by"] == "text code" and report["cards_sent"] == 0
    assert report["store"] == "sqlite" and set(report["faults"]) == set(faults)
    assert report["kills"] >= 3 + 1 + 1 + 2 and report["requests"] == 40
    assert report["kills_by_kind"].get("after_reply", 0) >= 1 and report["pauses"] == 1
    assert report["kills_by_kind"].get("sigterm", 0) >= 1
    statuses = report["approvals_by_status"]
    assert statuses.get("approved", 0) > 0 and statuses.get("denied", 0) > 0
    assert statuses.get("expired", 0) > 0 and "pending" not in statuses
    assert report["todos_created"] == report["requests_by_outcome"]["done"]
    assert report["prompts_in_words"] >= report["requests"]
    assert 0 < report["requests_asked_in_groups"] < report["requests"]
    assert report["wrong_person_replies"] > 0 and report["decided_by_someone_else"] == 0
    assert report["replies_delivered"] > report["requests"] // 2
    # a reply silenced by the pause is sent again, and its approval ends truthfully
    assert report["replies_sent_again_after_pause"] <= report["replies_silenced_by_pause"]
    assert "pending" not in report["after_reply_again"]
    for key in approvals.CODES_MUST_BE_ZERO:  # every reply recorded and one finished run
        assert report[key] == 0, (key, report)
    assert report["unfinished_runs"] == 0 and report["runs_not_once"] == 0
    _no_secret(report)


async def test_sigterm_amid_cards_answers_everyone_once(tmp_path: Path) -> None:
    """20 DMs in card mode, 4 card calls a second, SIGTERM one second in (3 s grace): the
    creates and final frames still waiting for their slots are left to the next start, which
    answers each question once — no card left spinning, none blank, nobody with nothing."""
    report = await sigterm.run("reduced", tmp_path)
    assert report["passed"], report
    assert report["answered_once"] == report["injected"] == 20
    assert report["answered_twice"] == 0 and report["unanswered"] == 0
    assert report["cards_left_spinning"] == 0 and report["stop_exit_code"] == 0
    assert report["finished_at_stop"] < report["injected"], "the stop came amid the cards"
    _no_secret(report)


async def test_jobs_over_days_on_two_replicas_with_kills(tmp_path: Path) -> None:
    """Ten jobs over two virtual days on two replicas of one PostgreSQL store, killed now
    and then (a crash right after a send, a runtime thrown away): every slot that came due
    ran once — delivered once, or silent nothing_new only when its words were the last
    delivered ones — none early, none twice."""
    report = await jobs.run("reduced", tmp_path)
    assert report["passed"], report
    figures = report["figures"]
    for key in jobs.MUST_BE_ZERO:
        assert figures.get(key, 0) == 0, (key, report)
    assert figures["slots"] == figures["delivered"] + figures["silent_nothing_new"] > 20
    assert figures["delivered"] > 0 and figures["silent_nothing_new"] > 0
    assert sum(report["kills"].values()) > 0, "the run killed a replica"
    _no_secret(report)
