"""The ``dta`` command line: one grammar for every command.

    dta [--config FILE] [--json] COMMAND ...        (both also accepted after COMMAND)

    dta run [--record FILE] [--new-store]           the daemon
    dta send --user ID | --group CID TEXT           one message as the robot, with a receipt
    dta dev [--demo] [--model fake] [--no-console]  your bot against a local fake DingTalk
    dta dev say [--group CID] [--at-bot] [--from USER] TEXT
    dta trace MSGID | --conversation C --sender U --text T --since 2h --until …
    dta console [--port N]                          the web console on 127.0.0.1
    dta doctor                                      preflight: config, network, credentials…
    dta init [DIR]                                  scaffold a bot: config, knowledge, skill, agent
    dta skills list | probe
    dta store stats | prune --keep-days N [--vacuum]
    dta memory list | approve ID --revision N | reject ID --revision N | publish ID --to FILE
    dta approvals list [--status S] | show ID
    dta jobs list [--all] | show ID | cancel ID | resume ID
    dta feedback export [--since 7d] [--out FILE] | case MSG [--out FILE]
    dta lab eval | replay | security | reliability NAME | bench

``--config FILE`` is read by every command that reads a configuration (default:
``./dta.toml`` when present); ``--json`` prints a JSON document instead of lines on every
command that inspects something. ``trace``, ``console``, ``store`` and ``memory`` read
another store with ``--store PATH``, or the newest ``dta dev`` instance's with ``--dev``.
With several ``[[robots]]`` in dta.toml, ``--robot CODE`` says whose store ``trace`` (all of
them when left out), ``console``, ``store``, ``memory`` and ``approvals`` read, as whom
``send`` speaks, and which robot ``doctor`` checks (each of them when left out).
``-h`` works everywhere, with nothing running and no configuration.

Exit status, the same for every command:
  0  done; every check passed
  1  something checked failed or was not found (doctor, lab eval, trace, dev say, …)
  2  the command could not run: a usage error, bad configuration, an invalid case file,
     a store it must not use (``dta run`` refuses to start: one line, no traceback)
  3  ``dta run`` only: the store was deleted, replaced or corrupted while it ran
  130 interrupted (Ctrl-C) outside ``dta dev``, which stops cleanly with 0

The lab commands live in ``lab/`` (which depends on ``agent``); they are imported only
when asked for, so the daemon never loads the lab.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import metadata
from pathlib import Path

from agent.cli.dev_options import add_message_options
from agent.cli.standing_parsers import standing_parsers

EXIT_CODES = """exit status: 0 done, 1 a check failed or nothing was found, 2 usage or
configuration error (or a start refused), 3 the store was lost while running (run only),
130 interrupted"""

RELIABILITY = {
    "storm": "1,000 msgIds as 10,000 frames, out of order, in flight, after a restart",
    "crashloop": "steady load with kill -9 at random moments",
    "chaos": "drops, zombie sockets and refused reconnects at random",
    "soak": "100,000 events through the daemon: throughput and memory",
    "storefaults": "a full disk, a held lock, a deleted and a corrupted store under load",
    "replicas": "three daemons on one PostgreSQL, a redelivery storm and kill -9 of replicas",
    "backlog": "sends beyond the pool on a slow platform, SIGTERM amid them, a burst's first word",
    "approvals": "acts awaiting clicks under kill -9, wrong clickers and expiry",
    "sigterm": "SIGTERM with a 3 s grace amid cards waiting for their slots",
    "reactions": "working-signal reactions under kill -9 and refused recalls",
    "jobs": "50 recurring jobs over a virtual week on two replicas with kills",
}


def version() -> str:
    try:
        return metadata.version("dta")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """argparse that ends help with the exit codes, so every ``-h`` documents them."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("epilog", EXIT_CODES)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def _common(json_output: bool) -> list[argparse.ArgumentParser]:
    """Options every command takes after its name; SUPPRESS keeps the global value."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--config", type=Path, default=argparse.SUPPRESS, help="dta.toml (default ./dta.toml)"
    )
    if json_output:
        parent.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
        )
    return [parent]


def _store_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--store", type=Path, help="read this store file instead")
    where.add_argument("--dev", action="store_true", help="read the newest `dta dev` store")
    _robot_option(parser)


def _robot_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--robot", metavar="CODE", help="which robot's, when dta.toml lists several [[robots]]"
    )


def _add(
    commands: argparse._SubParsersAction,
    name: str,
    text: str,
    *,
    json_output: bool = False,
    description: str | None = None,
) -> argparse.ArgumentParser:
    return commands.add_parser(  # type: ignore[no-any-return]
        name,
        help=text,
        description=description or text,
        parents=_common(json_output),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _dev_parsers(commands: argparse._SubParsersAction) -> None:
    dev = _add(
        commands,
        "dev",
        "run your bot locally against a fake DingTalk",
        description="Runs the configuration in this folder (agent, knowledge, skills, provider)"
        " as `dta run` in a subprocess, with only the credentials and endpoints pointed at a"
        " fake DingTalk on 127.0.0.1. Each instance has its own state folder and store under"
        " .dta/dev/. Type messages at the prompt (`/help` lists the options); Ctrl-C or Ctrl-D"
        " stops it.",
    )
    dev.add_argument("--demo", action="store_true", help="play a short conversation and exit")
    dev.add_argument(
        "--model",
        choices=["config", "fake"],
        default="config",
        help="fake: the lab's fake model behind the openai provider (no network)",
    )
    dev.add_argument("--no-console", action="store_true", help="do not serve the web console")
    dev.add_argument(
        "--verbose", action="store_true", help="also print heartbeats that found nothing to do"
    )
    dev.add_argument("--dir", type=Path, default=Path(".dta/dev"), help="where instances live")
    sub = dev.add_subparsers(dest="dev_command", metavar="say")
    say = _add(
        sub,
        "say",
        "send one message to a running `dta dev` and print what it caused",
        json_output=True,
    )
    add_message_options(say)
    say.add_argument("--instance", help="which running dev (its folder name under .dta/dev)")
    say.add_argument("--wait", type=float, default=15.0, help="seconds to wait for a decision")
    say.add_argument("--dir", type=Path, default=Path(".dta/dev"), help="where instances live")


def _operator_parsers(commands: argparse._SubParsersAction) -> None:
    """The operator's commands, one small builder each."""
    for build in (_run_parser, _send_parser, _trace_parser, _setup_parsers, _store_parsers):
        build(commands)


def _run_parser(commands: argparse._SubParsersAction) -> None:
    run = _add(commands, "run", "run the daemon against the configured robot")
    run.add_argument("--record", type=Path, help="append every raw frame to this JSONL file")
    run.add_argument(
        "--new-store",
        action="store_true",
        help="start although the store that ran here before is missing or another file:"
        " old messages DingTalk redelivers may then be answered again",
    )


def _send_parser(commands: argparse._SubParsersAction) -> None:
    send = _add(
        commands,
        "send",
        "send one message as the robot (through the action gate) and print the receipt",
        json_output=True,
        description="Sends one message by the OpenAPI to a person or a group, as the robot:"
        " through the action gate (write budgets, content limits, no @all) and the broker,"
        " recorded with a receipt in the configured store. Exit 0 when DingTalk took it.",
    )
    to = send.add_mutually_exclusive_group(required=True)
    to.add_argument("--user", help="staff id: a one-to-one message")
    to.add_argument("--group", help="openConversationId: a group message")
    send.add_argument("text", nargs="+", help="the message")
    _robot_option(send)


def _trace_parser(commands: argparse._SubParsersAction) -> None:
    trace = _add(
        commands,
        "trace",
        "why did the bot (not) answer? the stored chain and its cause",
        json_output=True,
        description="Prints a message's stored chain (deliveries, decision with the rules it"
        " checked, run, intents, attempts, receipts, refusals, task and memory changes) and"
        " names the cause: silent_by_gate (a pass, not a fault), never_arrived (no event:"
        " the connection or binding), failed (the run or its task), answered.",
    )
    trace.add_argument("msg_id", nargs="?", help="DingTalk's msgId")
    trace.add_argument("--conversation", help="conversation id (group openConversationId)")
    trace.add_argument("--sender", help="sender staff id")
    trace.add_argument("--text", help="a piece of the message text")
    trace.add_argument("--since", help="15m, 2h, 3d ago, 2026-01-31 or 2026-01-31T09:30")
    trace.add_argument("--until", help="same forms as --since")
    trace.add_argument("--limit", type=int, default=10, help="at most this many (newest first)")
    _store_options(trace)


def _setup_parsers(commands: argparse._SubParsersAction) -> None:
    """The console, doctor, init and skills: seeing and setting up a bot."""
    console = _add(commands, "console", "the web console for operators, on 127.0.0.1")
    console.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    _store_options(console)
    doctor_text = "preflight: config, network, credentials, store, skills"
    dr = _add(commands, "doctor", doctor_text, json_output=True)
    dr.add_argument(
        "--card-to",
        metavar="STAFF_ID",
        help="card mode: send this person one test card (proves the template and the key)",
    )
    _robot_option(dr)
    init = _add(commands, "init", "scaffold a bot here: dta.toml, knowledge, a skill, an agent")
    init.add_argument("dir", nargs="?", type=Path, default=Path("."), help="default: here")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    skills = _add(commands, "skills", "the behavior skills the daemon would load")
    sk = skills.add_subparsers(dest="skills_command", required=True, metavar="list|probe")
    _add(sk, "list", "every skill, its conditions and allowed actions", json_output=True)
    _add(sk, "probe", "check that the configured provider really sees the skills", json_output=True)


def _store_parsers(commands: argparse._SubParsersAction) -> None:
    """The store and the memory review queue it holds."""
    store = _add(commands, "store", "inspect and prune the store")
    st = store.add_subparsers(dest="store_command", required=True, metavar="stats|prune")
    stats = _add(st, "stats", "rows per table and file size", json_output=True)
    _store_options(stats)
    prune = _add(st, "prune", "forget finished work older than N days")
    prune.add_argument("--keep-days", type=float, required=True)
    prune.add_argument("--vacuum", action="store_true", help="then shrink the file")
    _store_options(prune)
    memory = _add(commands, "memory", "review and publish proposed memories (offline)")
    mem = memory.add_subparsers(dest="memory_command", required=True, metavar="COMMAND")
    listing = _add(mem, "list", "candidates, oldest first", json_output=True)
    listing.add_argument("--status", choices=["proposed", "approved", "rejected", "published"])
    _store_options(listing)
    for verb in ("approve", "reject"):
        step = _add(mem, verb, f"{verb} a proposed candidate (compare-and-set on the revision)")
        step.add_argument("candidate_id")
        step.add_argument("--revision", type=int, required=True, help="the revision you saw")
        _store_options(step)
    approvals = _add(commands, "approvals", "pending and decided approvals of acts")
    apv = approvals.add_subparsers(dest="approvals_command", required=True, metavar="list|show")
    listed = _add(apv, "list", "approvals, oldest first", json_output=True)
    statuses = ["pending", "approved", "denied", "expired", "void"]
    listed.add_argument("--status", choices=statuses)
    _store_options(listed)
    shown = _add(apv, "show", "one approval: its snapshot, clicks and receipts", json_output=True)
    shown.add_argument("approval_id")
    _store_options(shown)
    pub = _add(mem, "publish", "append an approved candidate to Markdown (dry run first)")
    pub.add_argument("candidate_id")
    pub.add_argument("--to", type=Path, required=True, help="the Markdown file")
    pub.add_argument("--expect-hash", help="the file's hash from the dry run")
    _store_options(pub)


def _lab_parsers(commands: argparse._SubParsersAction) -> None:
    lab = _add(commands, "lab", "offline lab: cases, replay, security, reliability, benchmarks")
    sub = lab.add_subparsers(dest="lab_command", required=True, metavar="COMMAND")
    _lab_eval_parser(sub)
    rp = _add(sub, "replay", "drive recorded frames through the pipeline")
    rp.add_argument("recording", type=Path, help="JSONL: one raw frame per line")
    sec = _add(sub, "security", "injection corpus; grep artefacts for secrets", json_output=True)
    sec.add_argument("--keep", type=Path, help="keep the artefacts (logs, store, reports) here")
    rel = _add(
        sub,
        "reliability",
        "fault and load evidence: " + " | ".join(RELIABILITY),
        json_output=True,
        description="Runs one script against the daemon as a subprocess:\n"
        + "\n".join(f"  {name:<12} {text}" for name, text in RELIABILITY.items()),
    )
    rel.add_argument("name", choices=list(RELIABILITY), help="which script")
    rel.add_argument("--reduced", action="store_true", help="the smaller CI-sized run")
    rel.add_argument("--workdir", type=Path, help="keep the store and logs here")
    bn = _add(sub, "bench", "benchmarks, each next to its baseline", json_output=True)
    bn.add_argument("--events", type=int, help="pipeline: synthetic messages; model: conversations")
    bn.add_argument("--quick", action="store_true", help="smaller loads (CI)")
    bn.add_argument(
        "--only",
        choices=["pipeline", "stream", "cards", "model", "postgres"],
        help="run one benchmark (model, postgres: minutes / a server; run only when named)",
    )


def _lab_eval_parser(sub: argparse._SubParsersAction) -> None:
    """``dta lab eval``: the cases against the fake DingTalk, or against the configured model."""
    ev = _add(
        sub,
        "eval",
        "run lab case files against the fake DingTalk",
        json_output=True,
        description="Runs case files (each in a fresh store, against a fresh fake DingTalk)."
        " Exit 0 all passed, 1 a case failed, 2 a case file is invalid or a path holds no"
        " case (every valid file still runs). With --against-model (the configured model"
        " instead of the fake, `--repeat N` times per case): 0 once measured, 1 below"
        " --min-pass-rate, 2 when it cannot measure (no model configured, an invalid file,"
        " the model cannot see the skills).",
    )
    ev.add_argument("paths", nargs="+", type=Path, help="case files or folders (recursive)")
    ev.add_argument("--report", type=Path, help="write a JSON report here")
    ev.add_argument("--html", type=Path, help="write an HTML report here")
    ev.add_argument("--live", action="store_true", help="through the real connector and websocket")
    ev.add_argument(
        "--against-model",
        action="store_true",
        help="measure the configured model (openai_base_url, openai_model, openai_api_key):"
        " each case N times, pass rates with 95%% intervals; cases scripting the model are"
        " skipped",
    )
    ev.add_argument(
        "--repeat", type=int, metavar="N", help="--against-model: runs per case (default 5)"
    )
    ev.add_argument(
        "--min-pass-rate",
        type=float,
        metavar="X",
        help="--against-model: exit 1 when the overall pass rate is below X (0..1)",
    )


def parser() -> argparse.ArgumentParser:
    top = _Parser(prog="dta", description="A careful DingTalk robot runtime.")
    top.add_argument("--version", action="version", version=f"dta {version()}")
    top.add_argument("--config", type=Path, help="dta.toml (default: ./dta.toml if present)")
    top.add_argument("--json", action="store_true", help="print JSON (inspecting commands)")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _operator_parsers(commands)
    _dev_parsers(commands)
    standing_parsers(commands, _add, _store_options)
    _lab_parsers(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    # Loopback (the bundled fake DingTalk, the console) must never go through a proxy.
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    from agent.cli import commands

    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        code = commands.dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return code
    except KeyboardInterrupt:
        print("dta: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``dta lab eval … | head``): stop quietly, as `cat` does. The
        # rest of stdout goes nowhere, so Python's own flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command the pipe ended


if __name__ == "__main__":
    sys.exit(main())
