"""One message to a ``dta dev``: its options read (from the prompt, where a mistake is a
message, or from ``dta dev say``), shaped as the fake's ``send`` step with what it carries
(``lab/dev/media.py``), and — for ``dta dev say`` from another terminal — sent to the
running instance's fake and its outcome printed when the daemon has one."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, NoReturn, TextIO

import httpx

from agent.cli import devstate
from agent.cli.dev_options import add_message_options
from agent.cli.trace import trace_message
from lab.dev.media import shape_send
from lab.dev.view import story
from storage import Store


class _LineParser(argparse.ArgumentParser):
    """Options typed at the prompt: a mistake is a message, never an exit."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(message)


def say_parser() -> argparse.ArgumentParser:
    parser = _LineParser(prog="say", add_help=False, exit_on_error=False)
    add_message_options(parser)
    return parser


def to_send(
    args: argparse.Namespace, msg_id: str
) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    """The ``send`` step for the fake, and the files it must serve for it (``lab/dev/media.py``);
    ValueError says what is wrong with the message."""
    send: dict[str, Any] = {"msg": msg_id, "from": args.user, "text": " ".join(args.text)}
    if args.group:
        send["group"] = args.group
        send["at_bot"] = bool(args.at_bot)
    send, files = shape_send(send, args)
    if not send["text"].strip() and "attach" not in send:
        raise ValueError("say something (or send --file / --picture)")
    return send, files


def say(args: argparse.Namespace, out: TextIO) -> int:
    """``dta dev say``: 0 with a decision, 1 without one, 2 when no dev is running."""
    instances = [i for i in devstate.instances(args.dir) if i.running]
    if args.instance:
        instances = [i for i in instances if i.name == args.instance]
    if not instances:
        which = f" named {args.instance}" if args.instance else ""
        print(f"dta: no running `dta dev`{which} under {args.dir}; start one first", file=out)
        return 2
    instance = instances[0]
    try:
        send, files = to_send(args, f"say-{os.getpid()}-{int(time.time() * 1000)}")
    except ValueError as exc:
        print(f"dta: {exc}", file=out)
        return 2
    with httpx.Client(base_url=instance.state["fake_url"], trust_env=False, timeout=30) as client:
        if files:
            client.post("/_lab/files", json=files).raise_for_status()
        client.post("/_lab/messages", json=send).raise_for_status()
    deadline = time.monotonic() + args.wait
    trace = None
    while time.monotonic() < deadline:
        with Store(instance.store_path) as store:
            run = store.events.get_run(send["msg"])
            if run is not None and run.state.is_finished:
                trace = trace_message(store, send["msg"])
                break
        time.sleep(0.05)
    if trace is None:
        with Store(instance.store_path) as store:
            trace = trace_message(store, send["msg"])
    if args.json:
        import json

        print(json.dumps(trace.to_dict(), ensure_ascii=False, indent=2), file=out)
    else:
        print("\n".join(story(trace)), file=out)
    if trace.decision is None:
        print(
            f"dta: no decision for {send['msg']} after {args.wait:g} s"
            f" (see `dta trace --dev {send['msg']}` and {instance.folder}/daemon-1.log)",
            file=out,
        )
        return 1
    return 0
