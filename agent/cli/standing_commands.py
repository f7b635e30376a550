"""The standing work's command handlers: ``dta jobs``, ``dta feedback`` and ``dta
knowledge`` (their parsers: ``agent/cli/standing_parsers.py``; the table that dispatches
them: ``HANDLERS`` in ``agent/cli/commands.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext

from agent.cli.command_io import emit, fail, open_store, settings_or_none


def jobs(args: argparse.Namespace) -> int:
    import time

    from agent.cli import jobs as shown

    opened = open_store(args, must_exist=False)
    if isinstance(opened, int):
        return opened
    settings, st = opened
    with st:
        command, zone = args.jobs_command, settings.timezone
        if command == "list":
            if args.json:
                emit([j.model_dump(mode="json") for j in st.jobs.all(include_cancelled=args.all)])
                return 0
            return shown.list_jobs(st, args.all, sys.stdout, zone)
        if command == "show":
            if args.json:
                job = st.jobs.get(args.job_id)
                slots = [r.model_dump(mode="json") for r in st.jobs.runs(args.job_id)]
                emit({"job": job.model_dump(mode="json"), "slots": slots} if job else None)
                return 0 if job else 1
            return shown.show_job(st, args.job_id, sys.stdout, zone)
        return shown.change_job(st, args.job_id, command, time.time(), zone, sys.stdout)


def feedback(args: argparse.Namespace) -> int:
    from agent.cli import feedback as rated
    from agent.cli.trace_text import parse_when

    try:
        since = parse_when(args.since) if getattr(args, "since", None) else None
    except ValueError as exc:
        return fail(str(exc))
    opened = open_store(args)
    if isinstance(opened, int):
        return opened
    settings, st = opened
    target = args.out.open("w", encoding="utf-8") if args.out else nullcontext(sys.stdout)
    with st, target as out:
        if args.feedback_command == "export":
            written = rated.export(st, out, since, settings.timezone)
            if args.out:
                print(f"{written} rating(s) written to {args.out}")
            return 0
        draft = rated.draft_case(st, args.msg, settings.timezone)
        if isinstance(draft, str):
            return fail(draft, 1)
        out.write(json.dumps(draft, ensure_ascii=False, indent=2) + "\n")
    if args.out:
        print(f"case draft written to {args.out}: complete its expect (TODO) before use")
    return 0


def knowledge(args: argparse.Namespace) -> int:
    if args.knowledge_command == "status":
        from agent.cli import knowledge as shown

        opened = open_store(args, must_exist=False)
        if isinstance(opened, int):
            return opened
        settings, st = opened
        with st:
            return shown.status(st, settings, sys.stdout)
    import asyncio

    from agent.cli.knowledge import source_line
    from agent.components.knowledge_sync import sync_once

    settings = settings_or_none(args.config, args.robot)
    if settings is None:
        return 2
    states = asyncio.run(sync_once(settings))
    if args.json:
        emit([s.model_dump(mode="json") for s in states])
    else:
        for state in states:
            print(source_line(state, settings.timezone))
        if not states:
            print("no knowledge_sources configured")
    return 1 if any(s.problem for s in states) else 0
