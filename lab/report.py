"""How lab results are told to a person: words and counts, never Python reprs, and always
what the run did not prove.

The lab's scripts produce JSON-able documents; this module renders them as lines (a
``True`` becomes ``yes``, a dict of counts becomes ``schema_invalid 18, …``) and adds the
limits of the evidence, as the behavior contract asks of live evidence: a result proves
only what its path exercised.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import io
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

FAKE_PLATFORM = (
    "no lab run proves behaviour against the real DingTalk: the platform here is the bundled"
    " fake (its answers, rate limits, session webhooks, @ rendering and redelivery timing are"
    " modelled, not DingTalk's); only a dedicated test robot shows those"
)
IN_PROCESS = (
    "in-process: frames went straight to ingest on a virtual clock — no websocket and no"
    " Stream Mode connector were exercised (`dta lab eval --live` runs those)"
)
LIVE = (
    "--live: the real connector and websocket ran against the fake's stream gateway; cases"
    " that need the virtual clock were skipped, not run"
)
DAEMON = (
    "the daemon ran as a subprocess over loopback sockets against the fake DingTalk: real"
    " processes and sockets, not the real network or platform"
)


def not_proven(live: bool) -> list[str]:
    """What a ``dta lab eval`` run did not prove, for its mode."""
    return [LIVE if live else IN_PROCESS, FAKE_PLATFORM]


def human(value: Any) -> str:
    """A value as a person reads it: yes/no, counts as ``name n``, lists joined."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join(f"{key} {human(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(human(item) for item in value) if value else "none"
    return str(value)


def print_lines(report: dict[str, Any], out: TextIO, limits: list[str]) -> None:
    width = max((len(key) for key in report), default=0)
    for key, value in report.items():
        print(f"{key:<{width}}  {human(value)}", file=out)
    print("not proven by this run:", file=out)
    for line in limits:
        print(f"  - {line}", file=out)


def reliability(
    name: str, reduced: bool, workdir: Path | None, as_json: bool, out: TextIO = sys.stdout
) -> int:
    """``dta lab reliability NAME``: the script's JSON report, rendered for a person."""
    module = importlib.import_module(f"lab.reliability.{name}")
    argv = ["--json", *(["--reduced"] if reduced else [])]
    if workdir is not None:
        argv += ["--workdir", str(workdir)]
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = int(module.main(argv))
    try:
        report = json.loads(captured.getvalue())
    except ValueError:
        out.write(captured.getvalue())
        return code
    report["not_proven"] = [DAEMON, FAKE_PLATFORM]
    if as_json:
        print(json.dumps(report, ensure_ascii=False, indent=2), file=out)
    else:
        limits = report.pop("not_proven")
        print_lines(report, out, limits)
    return code


def security(keep: Path | None, as_json: bool, out: TextIO = sys.stdout) -> int:
    """``dta lab security``: one verdict line per provider, refusals as counts."""
    from lab.eval.security import run

    with tempfile.TemporaryDirectory(prefix="dta-security-") as tmp:
        reports = asyncio.run(run(keep or Path(tmp)))
    passed = all(r.passed for r in reports)
    limits = [IN_PROCESS, FAKE_PLATFORM]
    if as_json:
        document = {
            "passed": passed,
            "providers": [{**asdict(r), "passed": r.passed} for r in reports],
            "not_proven": limits,
        }
        print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
        return 0 if passed else 1
    for r in reports:
        verdict = "PASS" if r.passed else "FAIL"
        print(
            f"{verdict}  {r.provider}: {r.messages} hostile messages, {r.platform_messages} sent,"
            f" {len(r.off_origin)} off-origin, {r.at_all} @all; refusals: {human(r.refusals)};"
            f" secret found in: {human(r.secret_found_in)}",
            file=out,
        )
    print("not proven by this run:", file=out)
    for line in limits:
        print(f"  - {line}", file=out)
    return 0 if passed else 1


def bench(
    events: int | None, quick: bool, only: str | None, as_json: bool, out: TextIO = sys.stdout
) -> int:
    """``dta lab bench``: each figure next to its baseline, ratios as numbers."""
    from lab.bench.pipeline import bench as run_bench

    report = run_bench(events, quick, only)
    if as_json:
        print(json.dumps(report, ensure_ascii=False, indent=2), file=out)
        return 0
    for line in _bench_lines(report):
        print(line, file=out)
    print(f"not proven by this run:\n  - {DAEMON}\n  - {FAKE_PLATFORM}", file=out)
    return 0


def _bench_lines(report: dict[str, Any]) -> Iterator[str]:
    if pipeline := report.get("pipeline"):
        yield (
            f"pipeline: {pipeline['events']} events in {pipeline['pipeline_seconds']} s ="
            f" {pipeline['pipeline_events_per_s']} events/s ({pipeline['replies']} replies;"
            f" median of {pipeline.get('rounds', 1)} rounds alternating with the bare writes)"
        )
        share = pipeline.get("bare_commit_share")
        committing = f", {share:.0%} of their time in COMMIT" if share else ""
        yield (
            "  bare store writes (same rows, same transactions):"
            f" {pipeline['bare_events_per_s']} events/s{committing}"
        )
        each = ", ".join(f"{r:g}" for r in pipeline.get("round_ratios", ()))
        rounds = f" (rounds: {each})" if each else ""
        yield f"  ratio pipeline / bare = {pipeline['ratio']}{rounds}"
        if pipeline.get("store_calls_seconds"):
            yield (
                "  its store calls alone, replayed: ratio to bare"
                f" {pipeline['store_calls_ratio']} (the most its store layer allows);"
                f" {pipeline['outside_store_share']:.0%} of the pipeline's time is outside them"
            )
    if full := report.get("pipeline_synchronous_full"):
        yield (
            f"  store_synchronous = full: {full['pipeline_events_per_s']} events/s"
            f" ({full['full_over_normal']} of normal); bare writes {full['bare_events_per_s']}"
            f" events/s; ratio {full['ratio']}"
        )
    if report.get("stream"):
        yield "stream (real connector, fake gateway, same run; bursts alternate, medians):"
        for f in report["stream"]:
            rounds = ", ".join(f"{r:g}" for r in f.get("burst_rounds", ()))
            yield (
                f"  platform {f['platform_latency_ms']:g} ms  {f['contestant']:<5}"
                f" ack p50 {f['ack_p50_ms']} ms, p99 {f['ack_p99_ms']} ms"
                f" ({f['steady_messages']} msgs at {f['steady_rate_per_s']:g}/s);"
                f" burst {f['burst_messages']} → {f['replies_per_s']} replies/s"
                f"{f' (rounds: {rounds})' if rounds else ''},"
                f" {f['cpu_ms_per_message']} CPU ms/message"
            )
            if f.get("daemon_ack_p99_at_most_ms") is not None:
                yield (
                    "    its own histogram: 99 % of acks sent within"
                    f" {f['daemon_ack_p99_at_most_ms']:g} ms of the frame's arrival"
                )
        for latency, ratio in report.get("stream_ratios", {}).items():
            yield (
                f"  platform {latency}: replies/s dta/bare"
                f" {ratio['replies_per_s_dta_over_bare']}, ack p99 dta/bare"
                f" {ratio['ack_p99_dta_over_bare']}, CPU per message dta/bare"
                f" {ratio['cpu_per_message_dta_over_bare']}"
            )
    if cards := report.get("cards"):
        yield (
            f"cards ({cards['questions']} questions, {cards['answer_chars']}-character"
            f" answers streamed by the fake model): plain reply p50"
            f" {cards['plain_reply_p50_ms']} ms; card shown p50 {cards['card_shown_p50_ms']} ms,"
            f" first frame p50 {cards['card_first_frame_p50_ms']} ms"
            f" (x{cards['first_frame_over_plain']}), final frame p50"
            f" {cards['card_final_p50_ms']} ms; {cards['frames_per_card']} frames per card"
        )
    if model := report.get("model"):
        from lab.bench.model import lines

        yield from lines(model)
    if pg := report.get("postgres"):
        pipe = pg["pipeline"]
        yield (
            f"postgres pipeline: {pipe['pipeline_events_per_s']} events/s; bare writes of the"
            f" same rows {pipe['bare_events_per_s']} events/s; ratio {pipe['ratio']}"
        )
        for f in pg["replicas"]:
            yield (
                f"  {f['replicas']} replica(s), platform {f['platform_latency_ms']:g} ms:"
                f" burst {f['burst_messages']} → {f['replies_per_s']} replies/s"
            )
        yield f"  three replicas / one = {pg['three_over_one']}"
