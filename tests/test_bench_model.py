"""``dta lab bench --only model`` in miniature: every figure there, every message answered once.

The daemon runs as a subprocess against the fake DingTalk and the paced fake model, so this
is slow-marked. No figure is judged against a threshold (speed is measured in the
benchmark, never asserted in tests): what is checked is that each run reached its end with
one answer per conversation and that every figure it reports is a positive, finite number.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lab.bench.model import ModelLoad, bench_model, lines

pytestmark = pytest.mark.slow

RUN_FIGURES = (
    "seconds",
    "replies_per_s",
    "ideal_replies_per_s",
    "efficiency",
    "model_seconds_mean",
    "cpu_ms_per_run",
    "rss_before_kib",
    "rss_peak_kib",
    "peak_runs_in_flight",
    "peak_model_requests_open",
)
CARD_FIGURES = (
    "card_first_frame_p50_ms",
    "card_first_frame_p99_ms",
    "card_after_first_token_p50_ms",
    "card_after_first_token_p99_ms",
    "card_calls_per_card",
)


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


@pytest.mark.timeout(170)
async def test_a_tiny_model_bench_reports_every_figure(tmp_path: Path) -> None:
    load = ModelLoad(conversations=6, concurrency=(2, 4), latency_s=(0.05, 0.1), tokens_per_s=300)
    report = await bench_model(load, tmp_path)
    json.dumps(report)  # the report goes out as JSON: nothing in it may refuse to
    runs = report["runs"]
    assert [(r["mode"], r["max_concurrent_runs"]) for r in runs] == [
        ("text", 2),
        ("text", 4),
        ("card", 4),
        ("card", 4),
    ]
    assert [r["card_frames_per_second"] for r in runs] == [None, None, 10, 100]
    for run in runs:
        assert run["conversations"] == 6
        assert run["replies"] == run["answered_once"] == 6  # one answer each, none twice
        assert run["whole"] == 6  # and each one the model's whole answer
        assert run["model_requests"] >= 6
        for name in RUN_FIGURES:
            assert _positive(run[name]), (run["mode"], name, run[name])
        # The memory figure may be 0 when the burst fits in pages already held; never NaN.
        assert math.isfinite(run["rss_kib_per_run_in_flight"])
        assert run["rss_kib_per_run_in_flight"] >= 0
        card_figures = [run[name] for name in CARD_FIGURES]
        if run["mode"] == "card":
            assert all(_positive(v) for v in card_figures), card_figures
        else:
            assert card_figures == [None] * len(CARD_FIGURES)
    assert _positive(report["expected_model_seconds"])
    printed = list(lines(report))
    assert len(printed) == 1 + len(runs) + 2  # a heading, a line per run, a card line each
