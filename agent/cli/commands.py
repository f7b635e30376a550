"""What each ``dta`` command does once ``agent/cli/main.py`` has parsed it.

Every handler returns the exit status (see ``agent/cli/main.py``) and prints either lines for a
person or, with ``--json``, one JSON document: never a Python repr. Failures a person can
fix are one line on stderr starting with ``dta:``, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.config import ConfigError, Settings, load_settings
from storage import Store
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
        "dev say",
        "lab eval",
        "lab security",
        "lab reliability",
        "lab bench",
    }
)


def fail(message: str, code: int = 2) -> int:
    print(f"dta: {message}", file=sys.stderr)
    return code


def emit(document: Any) -> None:
    print(json.dumps(document, ensure_ascii=False, indent=2))


def _name(args: argparse.Namespace) -> str:
    sub = {
        "dev": getattr(args, "dev_command", None),
        "skills": getattr(args, "skills_command", None),
        "store": getattr(args, "store_command", None),
        "memory": getattr(args, "memory_command", None),
        "approvals": getattr(args, "approvals_command", None),
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


# --------------------------------------------------------------------------- helpers


def settings_or_none(config: Path | None, robot: str | None = None) -> Settings | None:
    """The settings a command works with: with several ``[[robots]]``, the one robot
    ``--robot`` names (one line naming the robots when it names none or an unknown one)."""
    try:
        settings = load_settings(config)
        return settings.robot(robot) if settings.robots or robot else settings
    except ConfigError as exc:
        fail(str(exc))
        return None


def store_path(args: argparse.Namespace) -> Path | None:
    """A SQLite file named on the command line (``--store``, ``--dev``), or None for the
    configured store."""
    if getattr(args, "store", None) is not None:
        return Path(args.store)
    if getattr(args, "dev", False):
        from agent.cli.devstate import newest_instance

        instance = newest_instance(Path(".dta/dev"))
        return instance.store_path if instance is not None else Path(".dta/dev/(none)")
    return None


def opener(args: argparse.Namespace, settings: Settings) -> Callable[[], Store]:
    """How to open the store a reading command reads, as often as it needs to."""
    from agent.components import open_store as open_configured

    path = store_path(args)
    if path is None:
        return lambda: open_configured(settings)
    return lambda: Store(path, settings.store_synchronous)


def open_store(args: argparse.Namespace, must_exist: bool = True) -> tuple[Settings, Store] | int:
    """The settings and the store to read, or the exit status after one line saying why not:
    1 when there is no store to read (nothing found), 2 when the command cannot run."""
    settings = settings_or_none(args.config, getattr(args, "robot", None))
    if settings is None:
        return 2
    path = store_path(args)
    if path is None and not settings.store_url:
        path = settings.store_path
    if must_exist and path is not None and not path.exists():
        from agent.cli.devstate import newest_instance

        hint = ""
        if getattr(args, "dev", False):
            hint = " (no `dta dev` instance under .dta/dev: start `dta dev` first)"
        elif newest_instance(Path(".dta/dev")) is not None:
            hint = "; `dta dev` keeps its own store: add --dev"
        return fail(f"no store at {path}{hint}", 1)
    try:
        return settings, opener(args, settings)()
    except StoreError as exc:
        return fail(str(exc))


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
    _, store = opened
    with store:
        traces = search(store, query)
    where = shown_store(store.path)
    if args.json:
        emit(document(where, query, traces))
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
        _, store = opened
        with store:
            traces = search(store, query)
        where = shown_store(store.path)
        found = found or any(t.event is not None for t in traces)
        if args.json:
            documents[code] = document(where, query, traces)
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
            emit([c.model_dump(mode="json") for c in st.memory_candidates(args.status)])
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
    _, st = opened
    with st:
        if args.approvals_command == "list":
            if args.json:
                records = st.approvals()
                emit([r.model_dump(mode="json") for r in records if _has(r, args.status)])
                return 0
            return shown.list_approvals(st, args.status, sys.stdout)
        if args.json:
            record = st.get_approval(args.approval_id)
            emit(record.model_dump(mode="json") if record else None)
            return 0 if record else 1
        return shown.show_approval(st, args.approval_id, sys.stdout)


def _has(record: Any, status: str | None) -> bool:
    return status is None or record.status.value == status


# --------------------------------------------------------------------------- dev and lab


def dev(args: argparse.Namespace) -> int:
    from lab import dev as dev_mode

    if args.dev_command == "say":
        return dev_mode.say(args, out=sys.stdout)
    return dev_mode.run_dev(args, out=sys.stdout)


def lab(args: argparse.Namespace) -> int:
    from lab import report

    command = args.lab_command
    against_model = command == "eval" and args.against_model
    if args.config is not None and command != "replay" and not against_model:
        print(f"dta: note: `lab {command}` does not read --config (cases carry their own)")
    if against_model:
        return lab_against_model(args)
    if command == "eval" and (args.repeat is not None or args.min_pass_rate is not None):
        return fail("--repeat and --min-pass-rate measure a model: add --against-model")
    if command == "eval":
        from lab.evaluate import evaluate

        return evaluate(
            args.paths,
            report=args.report,
            html=args.html,
            out=sys.stdout,
            live=args.live,
            as_json=args.json,
        )
    if command == "replay":
        from lab.replay import replay

        return replay(args.recording, config=args.config, out=sys.stdout)
    if command == "security":
        return report.security(args.keep, as_json=args.json)
    if command == "reliability":
        return report.reliability(args.name, args.reduced, args.workdir, as_json=args.json)
    return report.bench(args.events, args.quick, args.only, as_json=args.json)


def lab_against_model(args: argparse.Namespace) -> int:
    """``dta lab eval --against-model``: the configured model, measured on the cases."""
    from lab.against_model import DEFAULT_REPEAT, evaluate_against_model

    if args.live or args.html is not None:
        return fail("--against-model runs in-process and writes --report only (no --live, --html)")
    repeat = DEFAULT_REPEAT if args.repeat is None else args.repeat
    if repeat < 1:
        return fail("--repeat must be at least 1")
    if args.min_pass_rate is not None and not 0 <= args.min_pass_rate <= 1:
        return fail("--min-pass-rate is a rate between 0 and 1")
    settings = settings_or_none(args.config)
    if settings is None:
        return 2
    return evaluate_against_model(
        args.paths,
        settings,
        repeat=repeat,
        report=args.report,
        min_pass_rate=args.min_pass_rate,
        out=sys.stdout,
        as_json=args.json,
    )


def send(args: argparse.Namespace) -> int:
    from agent.proactive.operator import receipt_line, send_as_operator

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
    "dev": dev,
    "lab": lab,
}
