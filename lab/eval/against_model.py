"""``dta lab eval --against-model``: run lab cases against the configured model, N times each.

The lab's own runs use the fake model or the ``rules`` provider, so they prove the host and
nothing about a real model. Here every case keeps all it brings — the fake DingTalk, its
fixtures, its config — and only the provider changes: ``openai``, pointed at the endpoint,
model and key of the current configuration (``dta.toml`` here, ``DTA_OPENAI_*``).

Cases that script the model or the provider measure the host's answer to a scripted
misbehaviour, not a model, so they are skipped and counted. A repetition passes only when
every expectation holds, the action gate refused nothing the model produced (a refusal saved
the person, the model still failed), and the model itself answered every run (not the
``rules`` fallback, not the host's plain words after an unusable answer).

A case tagged ``reference-answer`` (the behaviour suite's cases that need a tool, a reminder
or a file the ``rules`` provider cannot handle) carries a ``fixtures.model_script`` that plays
one right answer in the plain lab run, to show the host lets a right answer through and the
expectations can be met; here that script is removed and the measured model answers.

Before anything runs, the skill-loading probe (``dta skills probe``) must see its marker come
back: a model that cannot see the skills would be measured without its instructions.

Beside the model, every measured case is run once against each constant-answer baseline
(``lab.models.constant_models``: a polite decline, an echo of the message, a claim of having done
it), so each rate is printed beside what answering without reading would get.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from agent.cli.probe import ProbeResult, probe
from agent.config import ConfigError, Settings
from agent.contracts import RefusalReason, Run
from agent.runtime import Runtime
from lab.eval.cases import Case, CaseError, discover_all
from lab.eval.model_report import CaseMeasure, Repetition, case_line, report_document, summary_lines
from lab.eval.runner import CaseResult, CaseRun
from lab.models.constant_models import BASELINES, BaselineServers

EXIT_MEASURED, EXIT_BELOW_MIN, EXIT_CANNOT_RUN = 0, 1, 2
DEFAULT_REPEAT = 5

SKIP_MODEL_SCRIPT = "they script the model (fixtures.model_script)"
# The behaviour suite's cases whose model_script is one right answer for the plain run only.
REFERENCE_TAG = "reference-answer"
SKIP_PROVIDER_SCRIPT = "they script a provider (fixtures.provider_script)"
SKIP_COMMAND = "they measure a command agent (config.provider = command), not a model"
SKIP_FAKE_MODEL_CHECKS = (
    "they check what the lab's fake model was asked or which provider answered"
    " (expect.model_requests, model_requests_count, runs)"
)

# Refusals of what the model produced: its shape, its words, what it asked for. The others
# (a stale run, a repeat, a write budget, no way to reach the target, another robot's
# event) are the host's or the platform's circumstances, not the model's doing.
MODEL_REFUSALS = frozenset(
    {
        RefusalReason.SCHEMA_INVALID,
        RefusalReason.ACTION_NOT_ALLOWED,
        RefusalReason.RUN_SILENT,
        RefusalReason.RUN_TERMINAL,
        RefusalReason.RUN_BUDGET,
        RefusalReason.CONTENT_TOO_LARGE,
        RefusalReason.SECRET_IN_CONTENT,
        RefusalReason.REMINDER_NOT_ALLOWED,
        RefusalReason.AT_ALL,
        RefusalReason.UNBACKED_CLAIM,
        RefusalReason.DEFERRED_PROMISE,
        RefusalReason.UNGROUNDED_FIGURE,
        RefusalReason.RAW_TOOL_OUTPUT,
        RefusalReason.FOREIGN_IMAGE,
    }
)
# The model's latency is real time; an ack timer on it would add a "稍等" the case never
# asked for, so the ack waits longer than any answer may take.
NO_ACK_S = 3600.0
OPERATOR_MSGTYPE = "operator"  # agent/proactive/operator.py: a `dta send` event


def skip_reason(case: Case) -> str | None:
    """Why a case cannot measure a model, or None when it can."""
    if case.fixtures.model_script and REFERENCE_TAG not in case.tags:
        return SKIP_MODEL_SCRIPT
    if case.fixtures.provider_script:
        return SKIP_PROVIDER_SCRIPT
    if case.config.get("provider") == "command":
        return SKIP_COMMAND
    expect = case.expect
    if expect.model_requests or expect.model_requests_count is not None or expect.runs:
        return SKIP_FAKE_MODEL_CHECKS
    return None


def measured_case(case: Case) -> Case:
    """The case as the model meets it: a reference answer's script removed (the model
    answers instead), everything else as the case brings it."""
    if REFERENCE_TAG not in case.tags or not case.fixtures.model_script:
        return case
    fixtures = case.fixtures.model_copy(update={"model_script": {}})
    return case.model_copy(update={"fixtures": fixtures})


def model_overrides(settings: Settings) -> dict[str, Any]:
    """The configured model as case overrides: ``openai`` forced, its endpoint, model, key."""
    if not (settings.openai_base_url and settings.openai_model):
        raise ConfigError(
            "--against-model needs openai_base_url and openai_model (dta.toml or"
            " DTA_OPENAI_BASE_URL / DTA_OPENAI_MODEL)"
        )
    key = settings.openai_api_key
    return {
        "provider": "openai",
        "openai_base_url": settings.openai_base_url,
        "openai_model": settings.openai_model,
        "openai_api_key": key.get_secret_value() if key is not None else None,
        "openai_timeout_s": settings.openai_timeout_s,
        "openai_max_retries": settings.openai_max_retries,
        "openai_response_format": settings.openai_response_format,
        "openai_vision": settings.openai_vision,
        "ack_after_s": NO_ACK_S,
    }


class ModelCaseRun(CaseRun):
    """A lab case run whose settings point at the configured model (everything else kept),
    and which keeps the runs it saw (who answered, and why not)."""

    def __init__(self, case: Case, workdir: Path, overrides: dict[str, Any]) -> None:
        super().__init__(case, workdir)
        self.overrides = overrides
        self.runs: list[Run] = []
        self.operator_events: set[str] = set()

    async def _boot(self) -> Runtime:
        assert self.settings is not None
        self.settings = self.settings.with_overrides(self.overrides)  # after the case's config
        return await super()._boot()

    async def _drain(self) -> None:
        await super()._drain()
        assert self.runtime is not None
        store = self.runtime.store
        # The last drain comes right before the judge: what it leaves is the case's end.
        events = store.events.all()
        self.runs = [run for e in events if (run := store.events.get_run(e.event_id))]
        # `dta send` steps: the operator's words go through the gate, not the model's.
        self.operator_events = {e.event_id for e in events if e.msgtype == OPERATOR_MSGTYPE}


def repetition_of(
    result: CaseResult, runs: list[Run], operator_events: frozenset[str] = frozenset()
) -> Repetition:
    """One repetition's verdict from the case's evidence: its checks, receipts and runs
    (refusals of what an operator sent are the operator's, not the model's)."""
    problems = [str(problem) for problem in result.problems]
    if result.error:
        problems.append(f"error: {result.error}")
    saves: Counter[str] = Counter()
    model_reasons = {reason.value for reason in MODEL_REFUSALS}
    trails = result.transcript.events if result.transcript else []
    for trail in (t for t in trails if t.msg not in operator_events):
        for receipt in trail.receipts:
            if receipt["status"] == "refused" and receipt.get("reason") in model_reasons:
                saves[receipt["reason"]] += 1
    failures: Counter[str] = Counter()
    for run in runs:
        if run.degraded:
            failures[run.degraded] += 1  # the fallback answered: the model did not
        elif run.failure and not run.failure.startswith("refused_by_gate"):
            failures[run.failure.split(":", 1)[0]] += 1  # plain words instead of an answer
    return Repetition(not problems, problems, saves, failures)


async def run_repetition(case: Case, overrides: dict[str, Any]) -> Repetition:
    with tempfile.TemporaryDirectory(prefix=f"dta-model-{case.id[:40]}-") as tmp:
        case_run = ModelCaseRun(case, Path(tmp), overrides)
        result = await case_run.run()
        return repetition_of(result, case_run.runs, frozenset(case_run.operator_events))


async def measure(
    cases: list[Case],
    overrides: dict[str, Any],
    repeat: int,
    on_case: Callable[[CaseMeasure], None] | None = None,
    baselines: dict[str, dict[str, Any]] | None = None,
) -> list[CaseMeasure]:
    """Each case ``repeat`` times, one after another (a model's rate limit is shared), then
    once against each baseline in ``baselines`` (name -> its overrides)."""
    measures = []
    for case in cases:
        measured = CaseMeasure(case.id, case.category.value, case.path)
        case = measured_case(case)
        for _ in range(repeat):
            measured.repetitions.append(await run_repetition(case, overrides))
        for name, baseline in (baselines or {}).items():
            measured.baselines[name] = await run_repetition(case, baseline)
        if on_case is not None:
            on_case(measured)
        measures.append(measured)
    return measures


def split_cases(cases: list[Case]) -> tuple[list[Case], list[tuple[str, str]]]:
    """(cases to run, (id, why) of those skipped)."""
    runnable, skipped = [], []
    for case in cases:
        reason = skip_reason(case)
        if reason is None:
            runnable.append(case)
        else:
            skipped.append((case.id, reason))
    return runnable, skipped


def _endpoint(url: str) -> str:
    """The endpoint without user info or query, for reports (never a credential)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}" + (
        parts.path
    )


def _probe_document(result: ProbeResult) -> dict[str, Any]:
    return {"loaded": result.loaded, "marker": result.marker, "evidence": result.evidence}


async def _probe_then_measure(
    settings: Settings,
    cases: list[Case],
    repeat: int,
    say: Callable[[str], None],
) -> tuple[ProbeResult, list[CaseMeasure] | None]:
    """The skill probe first; the cases only when the model saw the probe's skill."""
    result = await probe(settings.with_overrides({"provider": "openai"}))
    if not result.loaded:
        return result, None
    say(f"skill probe: the model returned {result.marker}; measuring {len(cases)} case(s)")
    overrides = model_overrides(settings)
    names = ", ".join(b.name for b in BASELINES)
    say(f"beside it, each case once against the constant baselines ({names})")
    async with BaselineServers() as servers:
        measures = await measure(
            cases, overrides, repeat, lambda m: say(case_line(m)), servers.overrides
        )
    return result, measures


def evaluate_against_model(
    paths: list[Path],
    settings: Settings,
    repeat: int = DEFAULT_REPEAT,
    report: Path | None = None,
    min_pass_rate: float | None = None,
    out: TextIO | None = None,
    as_json: bool = False,
) -> int:
    """The command's entry point (see ``against_model``)."""
    return asyncio.run(against_model(paths, settings, repeat, report, min_pass_rate, out, as_json))


async def against_model(
    paths: list[Path],
    settings: Settings,
    repeat: int = DEFAULT_REPEAT,
    report: Path | None = None,
    min_pass_rate: float | None = None,
    out: TextIO | None = None,
    as_json: bool = False,
) -> int:
    """Exit 0 once measured (a low rate is a result, not a crash); 1 below
    ``min_pass_rate``; 2 when it could not measure (configuration, invalid case files,
    nothing to run, or the model cannot see the skills)."""

    def say(text: str) -> None:
        if out is not None and not as_json:
            print(text, file=out, flush=True)

    logging.getLogger("dta").setLevel(logging.ERROR)  # verdicts only, not the runtime's logs

    def fail(text: str) -> int:
        print(f"dta: {text}", file=sys.stderr, flush=True)
        return EXIT_CANNOT_RUN

    try:
        model_overrides(settings)
    except ConfigError as exc:
        return fail(str(exc))
    cases, errors = discover_all(paths)
    for error in errors:
        say(f"invalid case file: {error}" if type(error) is CaseError else f"cannot run: {error}")
    runnable, skipped = split_cases(cases)
    if errors:
        return fail(f"{len(errors)} case file(s) invalid or missing: nothing was measured")
    if not runnable:
        return fail(f"no case to measure: all {len(skipped)} were skipped (they script one)")
    assert settings.openai_model is not None and settings.openai_base_url is not None
    probed, measures = await _probe_then_measure(settings, runnable, repeat, say)
    if measures is None:
        return fail(
            f"the model cannot see the loaded skills: asked for {probed.marker}, it said:"
            f" {probed.evidence}. Nothing was measured (`dta skills probe` shows the same);"
            " check the endpoint, the model and skill_paths."
        )
    meta = {
        "model": settings.openai_model,
        "endpoint": _endpoint(settings.openai_base_url),
        "repeat": repeat,
        "min_pass_rate": min_pass_rate,
        "probe": _probe_document(probed),
        "baseline_answers": {b.name: b.describes for b in BASELINES},
    }
    document = report_document(measures, skipped, meta)
    say("")
    for line in summary_lines(document):
        say(line)
    if report is not None:
        report.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
    if as_json and out is not None:
        print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
    rate = document["pass_rate"]
    if min_pass_rate is not None and (rate is None or rate < min_pass_rate):
        say(f"pass rate below --min-pass-rate {min_pass_rate:g}: exit 1")
        return EXIT_BELOW_MIN
    return EXIT_MEASURED
