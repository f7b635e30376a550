"""``dta lab bench --quick --json``: every figure is there, next to its baseline.

No figure is judged here (speed is measured, never asserted in tests); what is checked is
that each benchmark ran to the end against its baseline and reports the keys README and
the issue tracker quote.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_bench_reports_every_figure_with_its_baseline() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli.main", "lab", "bench", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    pipeline = report["pipeline"]
    assert pipeline["replies"] == pipeline["events"] == 1000
    assert pipeline["ratio"] > 0
    # The pipeline and its bare writes alternate; the ratio is the rounds' median.
    assert pipeline["rounds"] == len(pipeline["round_ratios"]) == 2
    assert 0 < pipeline["bare_commit_share"] < 1
    # Its store calls alone run faster than the whole pipeline, which also does the rest.
    assert pipeline["store_calls_ratio"] > pipeline["ratio"]
    assert 0 < pipeline["outside_store_share"] < 1
    full = report["pipeline_synchronous_full"]
    assert full["replies"] == 1000 and full["full_over_normal"] > 0
    by_latency: dict[float, dict[str, dict[str, float]]] = {}
    for figures in report["stream"]:
        assert figures["replies"] == figures["burst_messages"]  # every burst message answered
        assert figures["steady_rate_per_s"] == 100  # the quick run's rate (full: 200)
        assert figures["cpu_ms_per_message"] > 0
        # Bursts alternate between the contestants; each figure is its rounds' median.
        assert len(figures["burst_rounds"]) == 2  # the quick run's rounds (full: 3)
        # The daemon's own view of its acks (a histogram bucket's bound); the bare bot has none.
        in_daemon = figures["daemon_ack_p99_at_most_ms"]
        assert (in_daemon is None) == (figures["contestant"] == "bare")
        by_latency.setdefault(figures["platform_latency_ms"], {})[figures["contestant"]] = figures
    assert sorted(by_latency) == [0, 30]
    assert all(set(pair) == {"bare", "dta"} for pair in by_latency.values())
    for ratios in report["stream_ratios"].values():
        assert set(ratios) == {
            "replies_per_s_dta_over_bare",
            "ack_p99_dta_over_bare",
            "cpu_per_message_dta_over_bare",
        }
    assert report["cards"]["frames_per_card"] > 0
