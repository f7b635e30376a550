"""``dta lab eval``: run case files, print one line per case, write JSON/HTML reports.

Exit status: 0 when every case passes, 1 when any fails, 2 when a case file is invalid or a
path given holds no case (a missing folder is an error, never an empty selection). An
invalid file does not stop the others: every valid case runs and the run ends with 2.

Every report — the terminal's, the JSON and the HTML — says what the run did not prove
(``lab/report.py``): in-process runs skip the websocket and the connector, ``--live`` runs
use them against a fake platform, and no lab run proves behaviour against the real
DingTalk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from jinja2 import Environment, PackageLoader, select_autoescape

from lab.eval.cases import CaseError, discover_all
from lab.eval.live import run_live_case
from lab.eval.runner import CaseResult, run_case, run_cases
from lab.report import not_proven

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def result_line(result: CaseResult) -> str:
    if result.skipped is not None:
        return f"SKIP  {result.case.category.value:<24} {result.case.id}  ({result.skipped})"
    verdict = "PASS" if result.passed else "FAIL"
    line = f"{verdict}  {result.case.category.value:<24} {result.case.id}  ({result.seconds:.2f}s)"
    details = [f"    - {problem}" for problem in result.problems]
    if result.error:
        details.append(f"    - error: {result.error}")
    return "\n".join([line, *details])


def summarise(results: list[CaseResult], seconds: float) -> dict[str, Any]:
    passed = Counter(r.case.category.value for r in results if r.passed)
    skipped = Counter(r.case.category.value for r in results if r.skipped is not None)
    total = Counter(r.case.category.value for r in results)
    return {
        "cases": len(results),
        "passed": sum(passed.values()),
        "skipped": sum(skipped.values()),
        "failed": len(results) - sum(passed.values()) - sum(skipped.values()),
        "seconds": round(seconds, 3),
        "cases_per_second": round(len(results) / seconds, 2) if seconds > 0 else None,
        "by_category": {
            category: {
                "passed": passed[category],
                "skipped": skipped[category],
                "failed": total[category] - passed[category] - skipped[category],
            }
            for category in sorted(total)
        },
    }


def _case_document(r: CaseResult) -> dict[str, Any]:
    return {
        "id": r.case.id,
        "title": r.case.title,
        "category": r.case.category.value,
        "path": r.case.path,
        "passed": r.passed,
        "skipped": r.skipped,
        "seconds": round(r.seconds, 3),
        "problems": [
            {"check": p.name, "expected": p.expected, "actual": p.actual, "note": p.note}
            for p in r.problems
        ],
        "error": r.error,
        "transcript": r.transcript.lines() if r.transcript else [],
    }


def report_document(
    results: list[CaseResult],
    summary: dict[str, Any],
    invalid: list[str] | None = None,
    live: bool = False,
) -> dict[str, Any]:
    return {
        "schema": "dta.lab.report/1",
        "mode": "live" if live else "in-process",
        "not_proven": not_proven(live),
        "summary": {**summary, "invalid_files": len(invalid or [])},
        "invalid": list(invalid or []),
        "cases": [_case_document(r) for r in results],
    }


def _ordered(results: list[CaseResult]) -> list[CaseResult]:
    """Failures first (a person opens the report to see them), then skips, then passes."""

    def rank(r: CaseResult) -> int:
        return 2 if r.passed else 1 if r.skipped is not None else 0

    return sorted(results, key=rank)


def render_html(
    results: list[CaseResult],
    summary: dict[str, Any],
    invalid: list[str] | None = None,
    live: bool = False,
) -> str:
    env = Environment(
        loader=PackageLoader("lab", "templates"), autoescape=select_autoescape(["html", "j2"])
    )
    env.filters["json"] = lambda v: json.dumps(v, ensure_ascii=False, indent=1, default=str)
    return env.get_template("report.html.j2").render(
        results=_ordered(results),
        failures=[r for r in results if not r.passed and r.skipped is None],
        summary=summary,
        invalid=invalid or [],
        not_proven=not_proven(live),
        mode="live" if live else "in-process",
    )


def evaluate(
    paths: list[Path],
    report: Path | None = None,
    html: Path | None = None,
    out: TextIO | None = None,
    live: bool = False,
    as_json: bool = False,
) -> int:
    def say(text: str) -> None:
        if out is not None and not as_json:
            print(text, file=out, flush=True)

    # The runtime's own logs are not evidence here; keep the output to verdicts.
    logging.getLogger("dta").setLevel(logging.ERROR)
    cases, errors = discover_all(paths)
    invalid = [str(error) for error in errors]
    for error in errors:
        say(f"invalid case file: {error}" if type(error) is CaseError else f"cannot run: {error}")
    if not cases and not errors:
        say("no cases found")
        return EXIT_INVALID
    started = time.perf_counter()
    runner = run_live_case if live else run_case
    results = asyncio.run(run_cases(cases, lambda r: say(result_line(r)), runner))
    summary = summarise(results, time.perf_counter() - started)
    say("")
    for category, counts in summary["by_category"].items():
        skipped = f", {counts['skipped']} skipped" if counts["skipped"] else ""
        say(f"{category:<26} {counts['passed']} passed, {counts['failed']} failed{skipped}")
    skipped = f" ({summary['skipped']} skipped)" if summary["skipped"] else ""
    say(
        f"{summary['passed']}/{summary['cases']} cases passed{skipped} in {summary['seconds']}s"
        f" ({summary['cases_per_second']} cases/s)"
    )
    if invalid:
        say(f"{len(invalid)} case file(s) invalid or missing (listed at the top): exit 2")
    say("not proven by this run:")
    for line in not_proven(live):
        say(f"  - {line}")
    document = report_document(results, summary, invalid, live)
    if report is not None:
        report.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
    if html is not None:
        html.write_text(render_html(results, summary, invalid, live), encoding="utf-8")
    if as_json and out is not None:
        print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
    if invalid:
        return EXIT_INVALID
    return EXIT_OK if summary["failed"] == 0 else EXIT_FAILED
