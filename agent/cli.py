"""The ``dta`` command line.

    dta run [--config dta.toml] [--record FILE] [--new-store]
    dta doctor [--config dta.toml]
    dta skills list | probe [--config dta.toml]
    dta store stats | prune --keep-days N [--vacuum]
    dta memory list | approve ID --revision N | reject ID --revision N | publish ID --to FILE
    dta dev [--demo] | dta dev say [--group CID] [--at-bot] --from USER "text"
    dta lab eval PATH... [--report FILE] [--html FILE] [--live]
    dta lab replay FILE.jsonl
    dta lab security [--keep DIR]
    dta lab reliability storm|crashloop|chaos|soak|storefaults [--reduced] [--json]
    dta lab bench [--quick] [--only pipeline|stream] [--events N] [--json]

The lab commands live in ``lab/`` (which depends on ``agent``); they are imported only
when asked for, so the daemon never loads the lab.

Exit status of ``dta run``: 0 after a signal; 2 when it refuses to start (bad config or
skills, or a store it must not use: locked by another daemon, missing where one existed,
corrupt, read-only, written by a newer dta) — always one line on stderr, no traceback;
3 when the store was deleted, replaced or corrupted while it ran.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from agent.config import ConfigError, Settings, load_settings
from storage import Store
from storage.integrity import StoreError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dta", description="A careful DingTalk robot runtime.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the daemon against the configured robot")
    run.add_argument("--config", type=Path, help="dta.toml (default: ./dta.toml if present)")
    run.add_argument("--record", type=Path, help="append every raw frame to this JSONL file")
    run.add_argument(
        "--new-store",
        action="store_true",
        help="start although the store that ran here before is missing or another file:"
        " old messages DingTalk redelivers may then be answered again",
    )
    dev = commands.add_parser("dev", help="talk to the robot locally: fake DingTalk + daemon")
    dev.add_argument("--demo", action="store_true", help="play a short conversation and exit")
    dev.add_argument("--dir", type=Path, default=Path(".dta"), help="where the dev store lives")
    dev_commands = dev.add_subparsers(dest="dev_command")
    say = dev_commands.add_parser("say", help="send one message to a running `dta dev`")
    say.add_argument(
        "args", nargs=argparse.REMAINDER, help="[--group CID] [--at-bot] [--from USER] text"
    )
    sk = commands.add_parser("skills", help="the behavior skills the daemon would load")
    sk_commands = sk.add_subparsers(dest="skills_command", required=True)
    for name, text in (
        ("list", "every skill, its conditions and allowed actions"),
        ("probe", "check that the configured provider really sees the skills"),
    ):
        one = sk_commands.add_parser(name, help=text)
        one.add_argument("--config", type=Path, help="dta.toml (default: ./dta.toml if present)")
    mem = commands.add_parser("memory", help="review and publish proposed memories (offline)")
    mem.add_argument("--config", type=Path, help="dta.toml (default: ./dta.toml if present)")
    mem_commands = mem.add_subparsers(dest="memory_command", required=True)
    listing = mem_commands.add_parser("list", help="candidates, newest last")
    listing.add_argument("--status", choices=["proposed", "approved", "rejected", "published"])
    for verb in ("approve", "reject"):
        step = mem_commands.add_parser(verb, help=f"{verb} a proposed candidate")
        step.add_argument("candidate_id")
        step.add_argument("--revision", type=int, required=True, help="the revision you saw")
    pub = mem_commands.add_parser("publish", help="append an approved candidate to Markdown")
    pub.add_argument("candidate_id")
    pub.add_argument("--to", type=Path, required=True, help="the Markdown file")
    pub.add_argument("--expect-hash", help="the file's hash from the dry run")
    st = commands.add_parser("store", help="inspect and prune the SQLite store")
    st.add_argument("--config", type=Path, help="dta.toml (default: ./dta.toml if present)")
    st_commands = st.add_subparsers(dest="store_command", required=True)
    st_commands.add_parser("stats", help="rows per table and file size")
    prune = st_commands.add_parser("prune", help="forget finished work older than N days")
    prune.add_argument("--keep-days", type=float, required=True)
    prune.add_argument("--vacuum", action="store_true", help="then shrink the file")
    doc = commands.add_parser("doctor", help="preflight: config, credentials, store, skills")
    doc.add_argument("--config", type=Path, help="dta.toml (default: ./dta.toml if present)")

    lab = commands.add_parser("lab", help="offline lab: cases, replay, benchmarks")
    lab_commands = lab.add_subparsers(dest="lab_command", required=True)
    ev = lab_commands.add_parser("eval", help="run lab case files against the fake DingTalk")
    ev.add_argument("paths", nargs="+", type=Path, help="case files or folders (recursive)")
    ev.add_argument("--report", type=Path, help="write a JSON report here")
    ev.add_argument("--html", type=Path, help="write an HTML report here")
    ev.add_argument(
        "--live",
        action="store_true",
        help="through the real connector and websocket instead of direct ingest",
    )
    rp = lab_commands.add_parser("replay", help="drive recorded frames through the pipeline")
    rp.add_argument("recording", type=Path, help="JSONL: one raw frame per line")
    rp.add_argument("--config", type=Path, help="dta.toml to replay under (defaults otherwise)")
    lab_commands.add_parser(
        "reliability",
        help="storm | crashloop | chaos | soak | storefaults [--reduced] [--json]: fault and"
        " load evidence",
    )
    sec = lab_commands.add_parser("security", help="injection corpus; grep artefacts for secrets")
    sec.add_argument("--keep", type=Path, help="keep the artefacts (logs, store, reports) here")
    bn = lab_commands.add_parser("bench", help="benchmarks, each next to its baseline")
    bn.add_argument("--events", type=int, help="pipeline: synthetic messages (default 5000)")
    bn.add_argument("--quick", action="store_true", help="smaller loads (CI)")
    bn.add_argument("--only", choices=["pipeline", "stream"], help="run one benchmark")
    bn.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _run(config: Path | None, record: Path | None, new_store: bool = False) -> int:
    from agent import logs
    from agent.daemon import Daemon
    from skills.loader import SkillError

    try:
        settings = load_settings(config)
        logs.configure(settings.log_level, settings.log_format, settings.secret_values)
        daemon = Daemon(settings, record=record, new_store=new_store)
        daemon.claim()  # the store: before the loop, so a refusal is one line
        return asyncio.run(daemon.run())
    except (ConfigError, SkillError, StoreError) as exc:
        print(f"dta: {exc}", file=sys.stderr)
        return 2


RELIABILITY = ("storm", "crashloop", "chaos", "soak", "storefaults")


def _reliability(argv: list[str]) -> int:
    """``dta lab reliability NAME [--reduced] [--json] [--workdir DIR]``."""
    import importlib

    if not argv or argv[0] not in RELIABILITY:
        print(
            f"usage: dta lab reliability {{{','.join(RELIABILITY)}}} [--reduced] [--json]",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(f"lab.reliability.{argv[0]}")
    return int(module.main(argv[1:]))


def _settings_and_store(config: Path | None) -> tuple[Settings, Store] | None:
    """The configured store, or None after saying what is wrong with the configuration."""
    try:
        settings = load_settings(config)
        return settings, Store(settings.store_path, settings.store_synchronous)
    except (ConfigError, StoreError) as exc:
        print(f"dta: {exc}", file=sys.stderr)
        return None


def _store(args: argparse.Namespace) -> int:
    opened = _settings_and_store(args.config)
    if opened is None:
        return 2
    settings, store = opened
    try:
        if args.store_command == "prune":
            keep_s = args.keep_days * 86_400
            # A pruned msgId delivered again must still be stale, or it would be answered
            # twice: keep at least a day beyond the stale threshold.
            if keep_s < settings.max_event_age_s + 86_400:
                least = (settings.max_event_age_s + 86_400) / 86_400
                print(
                    f"dta: keep at least {least:g} days (max_event_age_s plus a day)",
                    file=sys.stderr,
                )
                return 2
            removed = store.prune(time.time() - keep_s)
            if args.vacuum:
                store.vacuum()
            print(", ".join(f"{table} {n}" for table, n in removed.items() if n) or "nothing")
        counts = store.counts()
        size = settings.store_path.stat().st_size if settings.store_path.exists() else 0
        print(
            f"{settings.store_path}: {size / 1e6:.1f} MB; {counts.events} events, "
            f"{counts.duplicates} duplicates, {counts.quarantined} quarantined, "
            f"{counts.runs} runs, {counts.receipts} receipts"
        )
        return 0
    finally:
        store.close()


def _memory(args: argparse.Namespace) -> int:
    from agent import memory

    opened = _settings_and_store(args.config)
    if opened is None:
        return 2
    _, store = opened
    try:
        if args.memory_command == "list":
            return memory.list_candidates(store, args.status, sys.stdout)
        if args.memory_command in ("approve", "reject"):
            approve = args.memory_command == "approve"
            return memory.review(store, args.candidate_id, args.revision, approve, sys.stdout)
        return memory.publish(store, args.candidate_id, args.to, args.expect_hash, sys.stdout)
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    # Loopback (the bundled fake DingTalk) must never go through a proxy.
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["lab", "reliability"]:
        return _reliability(argv[2:])
    if argv[:2] == ["dev", "say"]:
        from lab import dev

        return dev.say(argv[2:], out=sys.stdout)
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args.config, args.record, args.new_store)
    if args.command == "dev":
        from lab import dev

        return asyncio.run(dev.dev(args.demo, args.dir, out=sys.stdout))
    if args.command == "memory":
        return _memory(args)
    if args.command == "store":
        return _store(args)
    if args.command == "skills":
        from agent.skills_cli import skills_command

        return skills_command(args.skills_command, args.config, out=sys.stdout)
    if args.command == "doctor":
        from agent.doctor import doctor

        return doctor(args.config, out=sys.stdout)
    if args.command == "lab":
        if args.lab_command == "eval":
            from lab.evaluate import evaluate

            return evaluate(
                args.paths, report=args.report, html=args.html, out=sys.stdout, live=args.live
            )
        if args.lab_command == "replay":
            from lab.replay import replay

            return replay(args.recording, config=args.config, out=sys.stdout)
        if args.lab_command == "security":
            from lab.security import security

            return security(sys.stdout, args.keep)
        if args.lab_command == "bench":
            from lab.bench import bench

            return bench(args.events, args.json, sys.stdout, args.quick, args.only)
    return 2


if __name__ == "__main__":
    sys.exit(main())
