"""``dta dev`` and ``dta lab``: the commands that run the lab (the only ones importing it).

Each imports its part of ``lab/`` when it runs, so the operators' commands never load it.
"""

from __future__ import annotations

import argparse
import sys

from agent.cli.command_io import fail, settings_or_none


def dev(args: argparse.Namespace) -> int:
    if args.dev_command == "say":
        from lab.dev.say import say

        return say(args, out=sys.stdout)
    from lab.dev.session import run_dev

    return run_dev(args, out=sys.stdout)


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
        from lab.eval.evaluate import evaluate

        return evaluate(
            args.paths,
            report=args.report,
            html=args.html,
            out=sys.stdout,
            live=args.live,
            as_json=args.json,
        )
    if command == "replay":
        from lab.eval.replay import replay

        return replay(args.recording, config=args.config, out=sys.stdout)
    if command == "security":
        return report.security(args.keep, as_json=args.json)
    if command == "reliability":
        return report.reliability(args.name, args.reduced, args.workdir, as_json=args.json)
    return report.bench(args.events, args.quick, args.only, as_json=args.json)


def lab_against_model(args: argparse.Namespace) -> int:
    """``dta lab eval --against-model``: the configured model, measured on the cases."""
    from lab.eval.against_model import DEFAULT_REPEAT, evaluate_against_model

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
