"""The ``command`` provider: hand a prepared run directory to an external agent command.

The command (an argv list from the configuration, never a shell line) runs inside the run's
directory — ``CONTEXT.md``, ``response-gate.json``, ``enriched-invocation.json``,
``skills.json`` — with a timeout. Message text reaches it only through those files, so
nothing a user writes can become part of a command line. Its stdout must be ActionRequest
JSON (one object or a list); the action gate judges it like any other provider's output.

A non-zero exit, a timeout or unreadable output is a failure with a reason and the tail
of stderr kept as evidence; nothing is sent for it (``reply_on_failure`` is False): an
external agent that broke is an operator's matter, not something to apologise for in chat.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.contracts import EnrichedInvocation
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
        proc = await asyncio.create_subprocess_exec(
            *self.config.argv,
            cwd=path,
            env={**os.environ, "DTA_RUN_DIR": str(path)},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.config.timeout_s)
        except TimeoutError:
            proc.kill()
            _, err = await proc.communicate()
            detail = f"no answer within {self.config.timeout_s}s"
            raise self._failed("timeout", detail, err, path) from None
        if proc.returncode != 0:
            raise self._failed("exit_status", f"exited with {proc.returncode}", err, path)
        try:
            requests = prompting.parse_actions(out.decode("utf-8", errors="replace"))
        except prompting.InvalidOutput as exc:
            raise self._failed("invalid_output", str(exc), err, path) from None
        evidence = {"run_dir": str(path), "stderr": _tail(err)} if err else {"run_dir": str(path)}
        return ProviderReply(requests, evidence=evidence)

    @staticmethod
    def _failed(reason: str, detail: str, stderr: bytes, path: Path) -> ProviderFailed:
        evidence = {"stderr": _tail(stderr), "run_dir": str(path)}
        return ProviderFailed(reason, detail, evidence, reply_on_failure=False)


def _tail(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[-STDERR_TAIL:]
