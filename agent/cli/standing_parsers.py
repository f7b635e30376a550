"""The standing work's commands: ``dta jobs`` (recurring jobs), ``dta feedback`` (answers'
👍 / 👎) and ``dta knowledge`` (DingTalk docs as sources), added to the one grammar of
``agent/cli/main.py`` with its helpers."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

Add = Callable[..., argparse.ArgumentParser]  # main.py's ``_add``
Options = Callable[[argparse.ArgumentParser], None]  # main.py's ``_store_options``


def standing_parsers(
    commands: argparse._SubParsersAction, add: Add, store_options: Options
) -> None:
    _jobs(commands, add, store_options)
    _feedback(commands, add, store_options)
    _knowledge(commands, add, store_options)


def _jobs(commands: argparse._SubParsersAction, add: Add, store_options: Options) -> None:
    jobs = add(commands, "jobs", "recurring jobs, their slots and receipts")
    sub = jobs.add_subparsers(dest="jobs_command", required=True, metavar="list|show|cancel|resume")
    listed = add(sub, "list", "jobs, oldest first", json_output=True)
    listed.add_argument("--all", action="store_true", help="cancelled ones too")
    store_options(listed)
    for verb, what in (
        ("show", "one job and its latest slots"),
        ("cancel", "cancel a job"),
        ("resume", "make a paused job active again, from its next slot"),
    ):
        one = add(sub, verb, what, json_output=verb == "show")
        one.add_argument("job_id")
        store_options(one)


def _feedback(commands: argparse._SubParsersAction, add: Add, store_options: Options) -> None:
    """Answers' 👍 / 👎: for review, and a 👎 as a lab case draft."""
    feedback = add(commands, "feedback", "answers' 👍 / 👎: export for review, draft a case")
    fb = feedback.add_subparsers(dest="feedback_command", required=True, metavar="export|case")
    export = add(fb, "export", "ratings as JSON lines with question, sources and answer")
    export.add_argument("--since", help="15m, 2h, 3d (ago), 2026-01-31, or epoch seconds")
    export.add_argument("--out", type=Path, help="write here (default: standard output)")
    store_options(export)
    case = add(fb, "case", "a lab case draft (dta.lab.case/1) from a 👎 on an answer")
    case.add_argument("msg", metavar="MSG", help="the rated message's msgId, or its run id")
    case.add_argument("--out", type=Path, help="write here (default: standard output)")
    store_options(case)


def _knowledge(commands: argparse._SubParsersAction, add: Add, store_options: Options) -> None:
    knowledge = add(commands, "knowledge", "DingTalk docs as knowledge: sync, status")
    sub = knowledge.add_subparsers(dest="knowledge_command", required=True, metavar="sync|status")
    synced = add(sub, "sync", "read every knowledge source now into the store", json_output=True)
    synced.add_argument("--robot", metavar="CODE", help="which robot's sources")
    shown = add(sub, "status", "each source: last good sync, problem, docs and as-of times")
    store_options(shown)
