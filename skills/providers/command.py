"""The ``command`` provider: hand a prepared run directory to an external agent command.

The command (an argv list from the configuration, never a shell line) runs inside the run's
directory — ``CONTEXT.md``, ``response-gate.json``, ``enriched-invocation.json``,
``skills.json`` — with a timeout. Message text reaches it only through those files, so
nothing a user writes can become part of a command line. Its stdout must be ActionRequest
JSON (one object or a list); the action gate judges it like any other provider's output.

A non-zero exit, a timeout or unreadable output is a failure with a reason and the tail
of stderr kept as evidence; the person gets the honest short reply for it (an agent that
crashed must not leave them with nothing), never the agent's output.
The command inherits only a short list of environment variables (never the daemon's
secrets: ``agent/contracts/environment.py``) and its run directory is removed afterwards
unless ``keep_runs`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.contracts import EnrichedInvocation
from agent.contracts.environment import child_env
from skills.loader import snapshot
from skills.providers import prompting
from skills.providers.base import ProviderFailed, ProviderReply
from skills.rundir import prepare_run_dir

STDERR_TAIL = 2000


@dataclass(frozen=True)
class CommandConfig:
    argv: tuple[str, ...]
    runs_root: Path
    timeout_s: float = 60.0
    env: tuple[str, ...] = ()  # more environment names the operator chooses to pass
    keep_runs: bool = False  # keep each run directory after the command (for debugging)


class CommandProvider:
    name: str = "command"

    def __init__(self, config: CommandConfig) -> None:
        if not config.argv:
            raise ValueError("the command provider needs a command (argv list)")
        self.config = config

    async def respond(self, invocation: EnrichedInvocation, skills: Sequence[Any]) -> ProviderReply:
        path = prepare_run_dir(
            self.config.runs_root / invocation.run_id, invocation, skills, snapshot(skills)
        )
        try:
            out, err = await self._run(path)
            try:
                requests = prompting.parse_actions(out.decode("utf-8", errors="replace"))
            except prompting.InvalidOutput as exc:
                raise self._failed("invalid_output", str(exc), err) from None
        finally:
            if not self.config.keep_runs:
                shutil.rmtree(path, ignore_errors=True)
        return ProviderReply(requests, evidence={"stderr": _tail(err)} if err else {})

    async def _run(self, path: Path) -> tuple[bytes, bytes]:
        """Run the command in its own process group, so a timeout or a shutdown ends it
        together with anything it started; never longer than the timeout (plus a grace)."""
        # the daemon's secrets stay with it: an agent cannot reach DingTalk around the gate
        env = child_env(self.config.env)
        proc = await asyncio.create_subprocess_exec(
            *self.config.argv,
            cwd=path,
            env={**env, "DTA_RUN_DIR": str(path)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.config.timeout_s)
        except TimeoutError:
            _kill_group(proc)
            detail = f"no answer within {self.config.timeout_s}s"
            raise self._failed("timeout", detail, b"") from None
        except BaseException:  # cancelled (shutdown): do not leave the agent running
            _kill_group(proc)
            raise
        if proc.returncode != 0:
            raise self._failed("exit_status", f"exited with {proc.returncode}", err)
        return out, err

    @staticmethod
    def _failed(reason: str, detail: str, stderr: bytes) -> ProviderFailed:
        return ProviderFailed(reason, detail, {"stderr": _tail(stderr)})


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[-STDERR_TAIL:]
