"""What each ``dta`` command does once ``agent/cli/main.py`` has parsed it.

Every handler returns the exit status (see ``agent/cli/main.py``) and prints either lines for a
person or, with ``--json``, one JSON document: never a Python repr. Failures a person can
fix are one line on stderr starting with ``dta:``, never a traceback
(``agent/cli/command_io.py``). ``dta dev`` and ``dta lab`` are in
``agent/cli/lab_commands.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from agent.cli.command_io import (
    emit,
    fail,
    open_store,
    opener,
    settings_or_none,
    store_path,
)
from agent.cli.lab_commands import dev, lab
from agent.cli.standing_commands import feedback, jobs, knowledge
from agent.config import ConfigError, load_settings
from storage.integrity import StoreError

# Commands that print a JSON document with --json (the others refuse the flag).
JSON_COMMANDS = frozenset(
    {
        "trace",
        "send",
        "doctor",
        "skills list",
        "skills probe",
        "store stats",
        "memory list",
        "approvals list",
        "approvals show",
        "jobs list",
        "jobs show",
        "knowledge sync",
        "dev say",
        "lab eval",
        "lab security",
        "lab reliability",
        "lab bench",
    }
)


def _name(args: argparse.Namespace) -> str:
    sub = {
        "dev": getattr(args, "dev_command", None),
        "skills": getattr(args, "skills_command", None),
        "store": getattr(args, "store_command", None),
        "memory": getattr(args, "memory_command", None),
        "approvals": getattr(args, "approvals_command", None),
        "jobs": getattr(args, "jobs_command", None),
        "knowledge": getattr(args, "knowledge_command", None),
        "feedback": getattr(args, "feedback_command", None),
        "lab": getattr(args, "lab_command", None),
    }.get(args.command)
    return f"{args.command} {sub}" if sub else args.command


def dispatch(args: argparse.Namespace) -> int:
    name = _name(args)
    if args.json and name not in JSON_COMMANDS:
        return fail(f"`dta {name}` has no JSON output")
    handler = HANDLERS.get(args.command)
    if handler is None:
        return fail(f"unknown command {args.command}")
    return handler(args)


# --------------------------------------------------------------------------- operators


def run(args: argparse.Namespace) -> int:
    from agent import logs
    from agent.daemon.serve import Daemon
    from skills.loader import SkillError

    try:
        settings = load_settings(args.config)
        logs.configure(settings.log_level, settings.log_format, settings.secret_values)
        daemon = Daemon(settings, record=args.record, new_store=args.new_store)
        daemon.claim()  # the store: before the loop, so a refusal is one line
        return asyncio.run(daemon.run())
    except (ConfigError, SkillError, StoreError) as exc:
        return fail(str(exc))


def trace(args: argparse.Namespace) -> int:
    from agent.cli.trace import Query, document, search, shown_store
    from agent.cli.trace_text import parse_when, render_search

    if args.msg_id is None and not any(
        (args.conversation, args.sender, args.text, args.since, args.until)
    ):
        return fail(
            "give a msgId, or search with --conversation, --sender, --text, --since, --until"
        )
    try:
        query = Query(
            msg_id=args.msg_id,
            conversation=args.conversation,
            sender=args.sender,
            text=args.text,
            since=parse_when(args.since) if args.since else None,
            until=parse_when(args.until) if args.until else None,
            limit=args.limit,
        )
    except ValueError as exc:
        return fail(str(exc))
    robots = _every_robot(args)
    if robots:  # several robots and none named: the message is in one of their stores
        return _trace_each(args, query, robots)
    opened = open_store(args)
    if isinstance(opened, int):
        return opened
    settings, store = opened
    with store:
        traces = search(store, query, settings.timezone)
    where = shown_store(store.path)
    if args.json:
        emit(document(where, query, traces, settings.timezone))
    else:
        print("\n".join(render_search(where, traces)))
    found = [t for t in traces if t.event is not None]
    return 0 if found else 1


def _every_robot(args: argparse.Namespace) -> list[str]:
    """The codes of the configured robots when there are several and the command named
    neither one nor another store; else nothing."""
    if args.robot or store_path(args) is not None:
        return []
    try:
        settings = load_settings(args.config)
    except ConfigError:
        return []  # the usual path says what is wrong
    return [str(robot.robot_code) for robot in settings.robot_settings()] if settings.robots else []


def _trace_each(args: argparse.Namespace, query: Any, robots: list[str]) -> int:
    """``dta trace`` over every robot's store, each robot's findings under its name."""
    from agent.cli.trace import document, search, shown_store
    from agent.cli.trace_text import render_search

    documents, found = {}, False
    for code in robots:
        args.robot = code
        opened = open_store(args)
        if isinstance(opened, int):
            continue  # that robot has no store yet: nothing of it to find
        settings, store = opened
        with store:
            traces = search(store, query, settings.timezone)
        where = shown_store(store.path)
        found = found or any(t.event is not None for t in traces)
        if args.json:
            documents[code] = document(where, query, traces, settings.timezone)
        else:
            print(f"== robot {code}")
            print("\n".join(render_search(where, traces)))
    if args.json:
        emit({"robots": documents})
    return 0 if found else 1


def console(args: argparse.Namespace) -> int:
    from agent.cli.console.server import serve_forever
    from agent.cli.trace import shown_store

    opened = open_store(args, must_exist=False)
    if isinstance(opened, int):
        return opened
    settings, store = opened
    where = shown_store(store.path)
    store.close()
    return serve_forever(opener(args, settings), settings, where, port=args.port)


def doctor(args: argparse.Namespace) -> int:
    from agent.cli.doctor import doctor as run_doctor

    return run_doctor(
        args.config, out=sys.stdout, as_json=args.json, card_to=args.card_to, robot=args.robot
    )


def init(args: argparse.Namespace) -> int:
    from agent.cli.init import scaffold

    return scaffold(args.dir, force=args.force, out=sys.stdout)


def skills(args: argparse.Namespace) -> int:
    from agent.cli.skills import skills_command

    return skills_command(args.skills_command, args.config, out=sys.stdout, as_json=args.json)


def store(args: argparse.Namespace) -> int:
    from agent.cli.trace import shown_store

    opened = open_store(args, must_exist=args.store_command == "stats")
    if isinstance(opened, int):
        return opened
    settings, st = opened
    with st:
        path = Path(st.path)
        removed: dict[str, int] = {}
        if args.store_command == "prune":
            keep_s = args.keep_days * 86_400
            # A pruned msgId delivered again must still be stale, or it would be answered
            # twice: keep at least a day beyond the stale threshold.
            if keep_s < settings.max_event_age_s + 86_400:
                least = (settings.max_event_age_s + 86_400) / 86_400
                return fail(f"keep at least {least:g} days (max_event_age_s plus a day)")
            removed = st.prune(time.time() - keep_s)
            from agent.run.media import prune_media  # media folders: files on disk, no store

            removed["media folders"] = prune_media(settings.media_dir, settings.media_keep_days)
            if args.vacuum:
                st.vacuum()
            print(", ".join(f"{table} {n}" for table, n in removed.items() if n) or "nothing")
        counts = st.counts()
        size = path.stat().st_size if path.is_file() else 0
        where = shown_store(st.path)
        stats = {
            "store": where,
            "bytes": size,
            "events": counts.events,
            "duplicates": counts.duplicates,
            "quarantined": counts.quarantined,
            "runs": counts.runs,
            "receipts": counts.receipts,
        }
    if args.json:
        emit(stats)
        return 0
    print(
        f"{where}: {size / 1e6:.1f} MB; {counts.events} events, {counts.duplicates} duplicates,"
        f" {counts.quarantined} quarantined, {counts.runs} runs, {counts.receipts} receipts"
    )
    return 0


def memory(args: argparse.Namespace) -> int:
    from agent.run import memory as memories

    opened = open_store(args, must_exist=False)
    if isinstance(opened, int):
        return opened
    _, st = opened
    with st:
        command = args.memory_command
        if command == "list" and args.json:
            emit([c.model_dump(mode="json") for c in st.context.memory_candidates(args.status)])
            return 0
        if command == "list":
            return memories.list_candidates(st, args.status, sys.stdout)
        if command in ("approve", "reject"):
            approve = command == "approve"
            return memories.review(st, args.candidate_id, args.revision, approve, sys.stdout)
        return memories.publish(st, args.candidate_id, args.to, args.expect_hash, sys.stdout)


def approvals(args: argparse.Namespace) -> int:
    from agent.cli import approvals as shown

    opened = open_store(args, must_exist=False)
    if isinstance(opened, int):
        return opened
    settings, st = opened
    with st:
        if args.approvals_command == "list":
            if args.json:
                records = st.approvals.all()
                emit([r.model_dump(mode="json") for r in records if _has(r, args.status)])
                return 0
            return shown.list_approvals(st, args.status, sys.stdout, settings.timezone)
        if args.json:
            record = st.approvals.get_approval(args.approval_id)
            emit(record.model_dump(mode="json") if record else None)
            return 0 if record else 1
        return shown.show_approval(st, args.approval_id, sys.stdout, settings.timezone)


def _has(record: Any, status: str | None) -> bool:
    return status is None or record.status.value == status


def send(args: argparse.Namespace) -> int:
    from agent.components.operator import send_as_operator
    from agent.proactive.operator import receipt_line

    settings = settings_or_none(args.config, args.robot)
    if settings is None:
        return 2
    text = " ".join(args.text)
    try:
        event, receipts = asyncio.run(
            send_as_operator(settings, text, user=args.user, group=args.group)
        )
    except StoreError as exc:
        return fail(str(exc))
    delivered = any(r.status.delivered for r in receipts)
    if args.json:
        emit({"event_id": event.event_id, "receipts": [r.to_dict() for r in receipts]})
    else:
        print("\n".join(receipt_line(r) for r in receipts) or "no receipt")
    return 0 if delivered else 1


HANDLERS = {
    "run": run,
    "send": send,
    "trace": trace,
    "console": console,
    "doctor": doctor,
    "init": init,
    "skills": skills,
    "store": store,
    "memory": memory,
    "approvals": approvals,
    "jobs": jobs,
    "knowledge": knowledge,
    "feedback": feedback,
    "dev": dev,
    "lab": lab,
}
