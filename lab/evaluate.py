"""``dta lab eval``: run case files, print one line per case, write JSON/HTML reports.

Exit status: 0 when every case passes, 1 when any fails, 2 when a case file is invalid or a
path given holds no case (a missing folder is an error, never an empty selection).
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

from lab.cases import CaseError, CasePathError, discover
from lab.live import run_live_case
from lab.runner import CaseResult, run_case, run_cases

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


def report_document(results: list[CaseResult], summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "schema": "dta.lab.report/1",
        "summary": summary,
        "cases": [
            {
                "id": r.case.id,
                "title": r.case.title,
                "category": r.case.category.value,
                "path": r.case.path,
                "passed": r.passed,
                "skipped": r.skipped,
                "seconds": round(r.seconds, 3),
                "problems": [
                    {"check": p.name, "expected": p.expected, "actual": p.actual}
                    for p in r.problems
                ],
                "error": r.error,
                "transcript": r.transcript.lines() if r.transcript else [],
            }
            for r in results
        ],
    }


def render_html(results: list[CaseResult], summary: dict[str, Any]) -> str:
    env = Environment(
        loader=PackageLoader("lab", "templates"), autoescape=select_autoescape(["html", "j2"])
    )
    return env.get_template("report.html.j2").render(results=results, summary=summary)


def evaluate(
    paths: list[Path],
    report: Path | None = None,
    html: Path | None = None,
    out: TextIO | None = None,
    live: bool = False,
) -> int:
    def say(text: str) -> None:
        if out is not None:
            print(text, file=out, flush=True)

    # The runtime's own logs are not evidence here; keep the output to verdicts.
    logging.getLogger("dta").setLevel(logging.ERROR)
    try:
        cases = discover(paths)
    except CasePathError as exc:
        say(f"cannot run the cases: {exc}")
        return EXIT_INVALID
    except CaseError as exc:
        say(f"invalid case file: {exc}")
        return EXIT_INVALID
    if not cases:
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
    if report is not None:
        report.write_text(
            json.dumps(report_document(results, summary), ensure_ascii=False, indent=2),
            encoding="utf-8",
        )
    if html is not None:
        html.write_text(render_html(results, summary), encoding="utf-8")
    return EXIT_OK if summary["failed"] == 0 else EXIT_FAILED
