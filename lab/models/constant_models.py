"""Constant-answer baselines for ``dta lab eval --against-model``.

A pass rate means little until it is set beside what a model that reads nothing would get.
Each baseline is an OpenAI-compatible server on 127.0.0.1 (``lab.models.scripted_models``'s
server) that gives one well-formed answer whatever it is asked:

- ``decline``: a constant polite decline, 「这个我不知道，也做不到，你可以自己问问负责的同事」;
- ``echo``: the person's own message, given back as the reply;
- ``claim``: a constant claim that the thing is done, 「好的，已经帮你办好了」.

``--against-model`` runs every measured case once against each of them, after the
model's own repetitions, and prints each baseline's pass rate beside the model's (and, per
case, which baselines passed). A case a constant answer passes does not discriminate: it
shows nothing about whether the model understood the message. The behaviour suite
(``lab/cases/model-behaviour/``) is written so that each of them passes at most a quarter
of it (``tests/test_behaviour_suite.py``).

The baselines never call a tool and never read the prompt, so they are not put through the
skill probe: the probe asks whether the measured model sees the loaded skills, and a
constant answer sees nothing by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from lab.models.scripted_models import ModelView, ScriptedModel

DECLINE_TEXT = "这个我不知道，也做不到，你可以自己问问负责的同事"
CLAIM_TEXT = "好的，已经帮你办好了"
BASELINE_MODEL = "constant-baseline"
# A constant server answers at once; a run that waits longer than this is the host's.
BASELINE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Baseline:
    """One constant answerer: its name in reports, what it says, and how."""

    name: str
    describes: str
    text_for: Callable[[ModelView], str]

    def behaviour(self, view: ModelView) -> dict[str, Any]:
        return {"kind": "reply", "text": self.text_for(view)}


def _echo(view: ModelView) -> str:
    # A message with no words (a picture, a file) is echoed as what DingTalk shows for it.
    return view.text.strip() or "[文件]"


BASELINES: tuple[Baseline, ...] = (
    Baseline("decline", f"a constant polite decline: {DECLINE_TEXT}", lambda _: DECLINE_TEXT),
    Baseline("echo", "the person's own message given back as the reply", _echo),
    Baseline("claim", f"a constant claim of having done it: {CLAIM_TEXT}", lambda _: CLAIM_TEXT),
)


def baseline_overrides(base_url: str) -> dict[str, Any]:
    """Case overrides pointing the ``openai`` provider at one baseline server."""
    return {
        "provider": "openai",
        "openai_base_url": base_url,
        "openai_model": BASELINE_MODEL,
        "openai_api_key": None,
        "openai_timeout_s": BASELINE_TIMEOUT_S,
        "openai_max_retries": 0,
        "openai_response_format": True,
        "openai_vision": False,
        "ack_after_s": 3600.0,  # as for the measured model: no 「稍等」 the case never asked for
    }


class BaselineServers:
    """The three baselines served on 127.0.0.1 for the length of an ``async with``."""

    def __init__(self, baselines: tuple[Baseline, ...] = BASELINES) -> None:
        self.baselines = baselines
        self.overrides: dict[str, dict[str, Any]] = {}
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> BaselineServers:
        try:
            for baseline in self.baselines:
                server = await self._stack.enter_async_context(ScriptedModel(baseline.behaviour))
                self.overrides[baseline.name] = baseline_overrides(server.base_url)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()
