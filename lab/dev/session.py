"""``dta dev``: your bot, locally — your ``dta.toml`` against the bundled fake DingTalk.

It starts the fake DingTalk on 127.0.0.1 and ``dta run`` as a subprocess on your
configuration (``lab/dev/config.py`` swaps only DingTalk, and the model with ``--model
fake``), each instance in its own folder under ``.dta/dev/`` with its own store. Every
message that reaches the daemon — typed here, sent with ``dta dev say`` from another
terminal, redelivered — is printed once it has an outcome (``lab/dev/view.py``), with a hint
when the outcome may surprise. The web console runs alongside.

The prompt runs on the main thread with readline (line editing, history kept in
``.dta/dev/history``); the fake, the daemon's supervision and the console run on an event
loop in a background thread. So Ctrl-C reaches the prompt as a plain ``KeyboardInterrupt``
and dev stops everything within a second, without a traceback. One Ctrl-C always lands:
readline checks for signals only when its wait for a key is interrupted, so a signal that
arrives just before that wait starts would be noticed only at the next key;
``InterruptWaker`` sees every signal through ``signal.set_wakeup_fd`` and interrupts the
prompt's wait again until the stop has been taken.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import select
import shlex
import signal
import sys
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TextIO

from agent.cli import devstate
from agent.cli.trace import trace_message
from agent.config import ConfigError
from lab.dev.config import DevDaemon, DevModel, config_file, dev_config, user_settings
from lab.dev.media import SentBack, prompt_argv
from lab.dev.say import say_parser, to_send
from lab.dev.view import Watcher
from lab.fake import FakeDingTalk
from lab.fake.files import parse_files
from skills.loader import SkillError, SkillLibrary
from storage import Store

PROMPT = "> "
# The fake's directory in dev: who a to-do or a meeting may name (``--from`` any of them).
DEV_USERS: dict[str, dict[str, Any]] = {
    "dev-user": {"name": "开发者", "title": "工程师"},
    "u1": {"name": "张三", "title": "产品经理"},
    "u2": {"name": "李四", "title": "财务"},
    "u3": {"name": "王五", "title": "销售"},
}
DEMO: list[list[str]] = [
    ["--from", "u1", "你好，介绍一下你自己"],
    ["--from", "u1", "7 + 5 等于多少？"],
    ["--group", "cid-demo", "--from", "u2", "大家好，今天下午开会"],
    ["--group", "cid-demo", "--at-bot", "--from", "u2", "(3+4)×6 是多少"],
    ["--from", "u3", "把这个结果转发到销售群"],
]
HELP = """type a message, optionally after these options:
  --group CID     in a group (default: a DM)      --at-bot     @ the robot (groups)
  --from USER     the sender's staff id (default dev-user)
media:    /file PATH   /picture PATH [words]   /richtext PATH words   /quote MSGID words
commands: /trace MSGID  the stored chain and its cause   /redeliver MSGID   as DingTalk would
          /click MSGID approve|deny [USER]   press a button on that message's approval card
          /status  what ran unseen (idle heartbeats)   /help   /quit (or Ctrl-D, Ctrl-C)"""


class Printer:
    """Prints from any thread without trampling the line being typed at the prompt."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.prompting = False

    def __call__(self, text: str) -> None:
        with self.lock:
            if self.prompting:
                buffer = _line_buffer()
                self.out.write(f"\r\x1b[K{text}\n{PROMPT}{buffer}")
            else:
                self.out.write(f"{text}\n")
            self.out.flush()


def _line_buffer() -> str:
    with contextlib.suppress(ImportError):
        import readline

        return readline.get_line_buffer()
    return ""


class DevSession:
    """The background loop and everything on it: fake, model, daemon, watcher, console."""

    def __init__(self, args: argparse.Namespace, folder: Path, printer: Printer) -> None:
        self.args = args
        self.folder = folder
        self.printer = printer
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run_loop, daemon=True)
        self.fake = FakeDingTalk(_clock(), users=DEV_USERS)
        self.model = DevModel() if args.model == "fake" else None
        self.daemon: DevDaemon | None = None
        self.watcher: Watcher | None = None
        self.console_url: str | None = None
        self._console: Any = None
        self._watch: asyncio.Task[None] | None = None
        self.counter = 0

    def _run_loop(self) -> None:
        # Ctrl-C and SIGTERM must reach the main thread: the kernel hands a signal to any
        # thread that does not block it, and one taken here left the prompt's input()
        # waiting in readline forever. Threads started from this one (the loop's
        # executors, its child watcher) inherit the mask.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        self.loop.run_forever()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, raw: dict[str, Any], settings: Any) -> None:
        self.thread.start()
        self.call(self._start(raw, settings))

    async def _start(self, raw: dict[str, Any], settings: Any) -> None:
        base = await self.fake.start()
        model_url = await self.model.start() if self.model else None
        config = dev_config(raw, base, model_url, self.fake)
        self.daemon = DevDaemon(self.fake, self.folder, config, fake_model=bool(model_url))
        log_hint = f" (log: {self.folder}/daemon-1.log)"
        self.watcher = Watcher(
            self.daemon.store_path,
            self.printer,
            log_hint,
            verbose=getattr(self.args, "verbose", False),
            after=SentBack(self.fake, self.folder).new_lines,
        )
        await self.daemon.start(timeout=30)
        # Only now: the daemon creates the store, and a reader must not race its creation.
        self._watch = asyncio.ensure_future(self.watcher.run())
        if not self.args.no_console:
            from agent.cli.console.server import start_console

            self._console, self.console_url = await start_console(self.daemon.store_path, settings)

    async def _stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self._console is not None:
            await self._console.cleanup()
        if self.daemon is not None:
            await self.daemon.stop_quickly()
        if self.model is not None:
            await self.model.stop()
        await self.fake.stop()

    def stop(self) -> None:
        if self.thread.is_alive():
            with contextlib.suppress(Exception):
                self.call(self._stop(), timeout=2.0)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=0.5)

    def status(self) -> str:
        """One line: what ran without being printed."""
        idle = self.watcher.idle if self.watcher is not None else 0
        return f"idle heartbeats (not shown): {idle}"

    def send(self, argv: list[str]) -> str | None:
        """One message from the prompt; its msgId once the watcher has shown it."""
        try:
            args = say_parser().parse_args(argv)
        except (argparse.ArgumentError, ValueError) as exc:
            self.printer(f"{exc}; usage: [--group CID] [--at-bot] [--from USER] text   (/help)")
            return None
        self.counter += 1
        try:
            send, files = to_send(args, f"dev-{self.counter}")
        except ValueError as exc:
            self.printer(f"not sent: {exc}")
            return None
        self.call(self._send(send, files), timeout=30)
        return str(send["msg"])

    async def _send(self, send: dict[str, Any], files: dict[str, Any]) -> None:
        assert self.watcher is not None
        shown = self.watcher.seen(send["msg"])
        self.fake.files.update(parse_files(files))  # served under their download codes
        self.fake.inject(send)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(shown.wait(), 20)

    def trace(self, msg_id: str) -> None:
        from agent.cli.trace_text import render

        assert self.daemon is not None
        with Store(self.daemon.store_path) as store:
            self.printer("\n".join(render(trace_message(store, msg_id))))

    def click(self, words: list[str]) -> None:
        """``/click MSGID approve|deny [USER]``: a press on the approval card the run of
        MSGID sent (by its sender, unless USER is named), delivered over the stream."""
        if len(words) not in (2, 3) or words[1] not in ("approve", "deny"):
            self.printer("usage: /click MSGID approve|deny [USER]")
            return
        msg_id, choice = words[0], words[1]
        sender = self.fake.inbound.get(msg_id, {}).get("senderStaffId", "dev-user")
        by = words[2] if len(words) == 3 else str(sender)

        async def press() -> str:
            before = len(self.fake.received)
            sent = self.fake.click(msg_id, by, choice)
            await self.fake.wait_acked([sent["msg"]], 5.0)
            await asyncio.sleep(1.0)  # the decision's run answers in the chat
            self.fake.show_click_acks()
            cards = [card for card in self.fake.cards if card.data.get("msg_id") == msg_id]
            # what the clicker sees: their own view of the card (a refusal), else everyone's
            shown = [card.private.get(by, card.data).get("status") for card in cards]
            return (
                f"{by} pressed {choice} on the card of {msg_id}: the card says"
                f" {shown[-1] if shown else '?'}; {len(self.fake.received) - before} new messages"
            )

        try:
            self.printer(self.call(press(), timeout=10))
        except ValueError as exc:
            self.printer(str(exc))

    def redeliver(self, msg_id: str) -> None:
        async def again() -> str:
            assert self.daemon is not None
            before = len(self.fake.received)
            self.fake.redeliver(msg_id)
            await asyncio.sleep(0.5)
            with Store(self.daemon.store_path) as store:
                deliveries = store.events.deliveries(msg_id)
            return (
                f"DingTalk redelivers {msg_id}: delivered {deliveries}x,"
                f" {len(self.fake.received) - before} new messages"
                " (a duplicate is acked and counted, never answered)"
            )

        try:
            self.printer(self.call(again(), timeout=5))
        except KeyError:
            self.printer(f"no message {msg_id} was sent in this session")


def _clock() -> Any:
    from agent.clock import SystemClock

    return SystemClock()


def _describe(settings: Any, source: Path | None, session: DevSession) -> list[str]:
    agent = settings.agent
    knowledge = "not set (knowledge questions get an honest 'I don't know')"
    if settings.knowledge_dir is not None:
        files = sorted(Path(settings.knowledge_dir).glob("**/*.md"))
        knowledge = f"{settings.knowledge_dir} ({len(files)} Markdown files)"
        if not Path(settings.knowledge_dir).is_dir():
            knowledge = f"{settings.knowledge_dir} — MISSING: the folder does not exist"
    skills = ", ".join(s.name for s in SkillLibrary(settings.skill_paths, settings.tools).skills)
    provider = "openai → the lab's fake model" if session.model else settings.provider
    assert session.daemon is not None
    lines = [
        f"dta dev · {agent.name} ({agent.role}) · provider {provider}",
        f"  config: {source or 'defaults (no dta.toml here; `dta init` makes one)'}",
        f"  knowledge: {knowledge}",
        f"  skills: {skills}",
        f"  fake DingTalk {session.fake.base_url} · daemon pid {session.daemon.pid}"
        f" · state {session.folder}",
    ]
    if session.console_url:
        lines.append(f"  console: {session.console_url}")
    lines.append(f"  trace a message: dta trace --dev MSGID (store {session.daemon.store_path})")
    return lines


def _repl(session: DevSession, history: Path) -> None:
    try:
        import readline
    except ImportError:  # no line editing on this platform; input() still works
        readline = None  # type: ignore[assignment]
    if readline is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
        readline.set_history_length(1000)
    session.printer(HELP)
    try:
        while True:
            session.printer.prompting = True
            try:
                line = input(PROMPT).strip()
            except EOFError:
                break
            finally:
                session.printer.prompting = False
            if not line:
                continue
            if line in ("/quit", "/exit"):
                break
            if line == "/help":
                session.printer(HELP)
                continue
            if line == "/status":
                session.printer(session.status())
                continue
            words = line.split(maxsplit=1)
            if words[0] in ("/trace", "/redeliver") and len(words) == 2:
                (session.trace if words[0] == "/trace" else session.redeliver)(words[1].strip())
                continue
            if words[0] == "/click":
                session.click(line.split()[1:])
                continue
            try:
                argv = prompt_argv(line) or shlex.split(line)  # /file, /picture, /quote …
            except ValueError as exc:
                session.printer(f"cannot read that line: {exc}")
                continue
            session.send(argv)
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(history)


class InterruptWaker:
    """Makes one Ctrl-C (or SIGTERM) stop ``dta dev``, wherever the main thread is.

    The C-level handler writes each signal's number to a pipe (``set_wakeup_fd``); a
    watcher thread reads it and, until the Python-level handler has run (it raises
    ``KeyboardInterrupt`` on the main thread, once), interrupts the main thread again every
    ``KICK_S`` with ``pthread_kill``: a wait that began just after the first signal (a
    ``select`` in readline) then ends with EINTR and the handler runs. Later signals are
    taken quietly: the stop is already under way, and it is bounded."""

    KICK_S = 0.05
    STOPS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.taken = threading.Event()
        self._main = threading.main_thread().ident
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._previous: dict[int, Any] = {}
        self._previous_fd = -1

    def install(self) -> None:
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for sig in self.STOPS:
            self._previous[sig] = signal.signal(sig, self._handle)
        threading.Thread(target=self._watch, name="dev-interrupts", daemon=True).start()

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._write)  # the watcher sees the pipe closed and ends

    def _handle(self, signum: int, frame: Any) -> None:
        if self.taken.is_set():
            return
        self.taken.set()
        raise KeyboardInterrupt

    def _watch(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, set(self.STOPS))  # never taken here
        stops = {int(sig) for sig in self.STOPS}
        try:
            while True:
                select.select([self._read], [], [])
                try:
                    data = os.read(self._read, 64)
                except BlockingIOError:
                    continue
                if not data:
                    return  # uninstalled
                if stops.isdisjoint(data):
                    continue
                while not self.taken.wait(self.KICK_S) and self._main is not None:
                    signal.pthread_kill(self._main, signal.SIGINT)
        except OSError:
            return
        finally:
            os.close(self._read)


def run_dev(args: argparse.Namespace, out: TextIO) -> int:
    """``dta dev``: 0 when stopped (Ctrl-C, Ctrl-D, /quit) or the demo played; 1 when the
    daemon did not come up; 2 when the configuration cannot be used."""
    try:
        settings, raw = user_settings(args.config)
        # with several [[robots]], what you type goes to the first, and dev shows that one
        settings = settings.robot_settings()[0]
        SkillLibrary(settings.skill_paths, settings.tools)
    except (ConfigError, SkillError, OSError, ValueError) as exc:
        print(f"dta: {exc}", file=sys.stderr)
        return 2
    root: Path = args.dir
    devstate.prune(root)
    folder = devstate.new_folder(root)
    printer = Printer(out)
    session = DevSession(args, folder, printer)
    state: dict[str, Any] = {"pid": os.getpid(), "started_at": time.time()}
    interrupts = InterruptWaker()
    interrupts.install()
    try:
        try:
            session.start(raw, settings)
        except Exception as exc:
            printer(f"the daemon did not become ready ({type(exc).__name__}); see {folder}")
            printer(session.daemon.log_tail(1500) if session.daemon else "")
            return 1
        assert session.daemon is not None
        state.update(
            daemon_pid=session.daemon.pid,
            fake_url=session.fake.base_url,
            store_path=str(session.daemon.store_path),
            config=str(config_file(args.config) or ""),
        )
        devstate.write_state(folder, state)
        for line in _describe(settings, config_file(args.config), session):
            printer(line)
        if args.demo:
            for argv in DEMO:
                session.send(argv)
            session.redeliver("dev-2")
            return 0
        _repl(session, root / "history")
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        started = time.monotonic()
        session.stop()
        state["stopped_at"] = time.time()
        with contextlib.suppress(OSError):
            devstate.write_state(folder, state)
        interrupts.uninstall()
        if not args.demo:
            printer(f"stopped in {time.monotonic() - started:.1f} s; the store stays in {folder}")
