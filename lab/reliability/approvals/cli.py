"""The approvals run's command line: ``python -m lab.reliability.approvals`` and
``dta lab reliability approvals`` (``main``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from lab.reliability.approvals.faults import FAULTS, chosen_faults
from lab.reliability.approvals.parameters import SIZES
from lab.reliability.approvals.runner import run
from lab.reliability.daemon import Size


def main(argv: list[str] | None = None) -> int:
    """``python -m lab.reliability.approvals [--reduced] [--faults a,b] [--codes] [--json]``:
    as the other scripts (``dta lab reliability approvals`` runs it with every fault, on
    cards)."""
    from lab.reliability import approvals  # the package's docstring tells what the run is

    assert approvals.__doc__ is not None
    parser = argparse.ArgumentParser(
        prog="dta lab reliability approvals", description=approvals.__doc__.splitlines()[0]
    )
    parser.add_argument("--reduced", action="store_true", help="the smaller CI-sized run")
    parser.add_argument(
        "--size", choices=sorted(SIZES), help="full (two replicas) or reduced (SQLite)"
    )
    parser.add_argument(
        "--faults",
        help=f"comma-separated, of {', '.join(FAULTS)}; 'none' for none (default: all)",
    )
    parser.add_argument(
        "--codes",
        action="store_true",
        help="no card template: decided by replying the prompt's text code",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--workdir", type=Path, help="keep the store and logs here")
    args = parser.parse_args(argv)
    size: Size = args.size or ("reduced" if args.reduced else "full")
    try:
        faults = chosen_faults(args.faults.split(",")) if args.faults is not None else None
    except ValueError as exc:
        parser.error(str(exc))
    if args.workdir is not None:
        report = asyncio.run(run(size, args.workdir, faults, args.codes))
    else:
        with tempfile.TemporaryDirectory(prefix="dta-approvals-") as tmp:
            report = asyncio.run(run(size, Path(tmp), faults, args.codes))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        width = max(len(key) for key in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return 0 if report.get("passed") else 1
