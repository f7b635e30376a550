"""``dta lab eval --against-model``: the interval, the skips, the verdict of a repetition, and
the behaviour suite measured against a well-behaved and a misbehaving scripted model, with
the three constant-answer baselines beside each (each at most a quarter of the suite)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent.cli.main import main
from agent.config import ConfigError, Settings
from lab.eval.against_model import (
    REFERENCE_TAG,
    SKIP_COMMAND,
    SKIP_FAKE_MODEL_CHECKS,
    SKIP_MODEL_SCRIPT,
    SKIP_PROVIDER_SCRIPT,
    model_overrides,
    repetition_of,
    skip_reason,
    split_cases,
)
from lab.eval.cases import load_case
from lab.eval.model_report import CaseMeasure, Repetition, report_document, wilson_interval
from lab.eval.runner import CaseResult
from lab.eval.transcript import EventTrail, Transcript
from lab.models.scripted_models import (
    Behaviour,
    ModelView,
    ScriptedModel,
    misbehaving,
    well_behaved,
)

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "lab" / "cases" / "model-behaviour"
CLAIMS = ROOT / "lab" / "cases" / "authority-and-egress" / "claims"
BASELINE_NAMES = ["decline", "echo", "claim"]
MAX_BASELINE_RATE = 0.25


# --------------------------------------------------------------------------- the interval


def test_wilson_interval_matches_known_values() -> None:
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert wilson_interval(1, 1) == pytest.approx((0.2065, 1.0), abs=1e-4)


def test_wilson_interval_stays_within_zero_and_one_and_narrows_with_runs() -> None:
    for runs in (1, 3, 20):
        for passes in range(runs + 1):
            low, high = wilson_interval(passes, runs)
            assert 0.0 <= low <= passes / runs <= high <= 1.0
    assert wilson_interval(80, 100)[1] - wilson_interval(80, 100)[0] < (
        wilson_interval(4, 5)[1] - wilson_interval(4, 5)[0]
    )


def test_wilson_interval_of_nothing_is_everything_and_refuses_nonsense() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


# --------------------------------------------------------------------------- the skips


def _case(tmp_path: Path, name: str, **extra: Any) -> Any:
    document: dict[str, Any] = {
        "schema": "dta.lab.case/1",
        "id": name,
        "category": "conversation-contract",
        "title": name,
        "steps": [{"at": 0, "send": {"msg": "m1", "from": "u1", "text": "你好"}}],
        "expect": {"platform": {"count": 1}},
    }
    for key, value in extra.items():
        document[key] = value if key != "expect" else {**document["expect"], **value}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return load_case(path)


def test_cases_that_script_the_model_or_a_provider_are_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    plain = _case(tmp_path, "plain")
    scripted_model = _case(
        tmp_path, "model", config={"provider": "openai"}, fixtures={"model_script": {"m1": []}}
    )
    scripted_provider = _case(
        tmp_path, "provider", fixtures={"provider_script": {"m1": [{"kind": "reply"}]}}
    )
    command = _case(tmp_path, "command", config={"provider": "command", "command": ["true"]})
    asked = _case(tmp_path, "asked", expect={"model_requests_count": 1})
    reference = _case(
        tmp_path,
        "reference",
        tags=[REFERENCE_TAG],
        config={"provider": "openai"},
        fixtures={"model_script": {"m1": [{"json": {"kind": "reply", "text": "你好"}}]}},
    )
    assert skip_reason(reference) is None  # its script is for the plain run only
    assert skip_reason(plain) is None
    assert skip_reason(scripted_model) == SKIP_MODEL_SCRIPT
    assert skip_reason(scripted_provider) == SKIP_PROVIDER_SCRIPT
    assert skip_reason(command) == SKIP_COMMAND
    assert skip_reason(asked) == SKIP_FAKE_MODEL_CHECKS
    runnable, skipped = split_cases([plain, scripted_model, scripted_provider])
    assert [c.id for c in runnable] == ["plain"]
    assert skipped == [("model", SKIP_MODEL_SCRIPT), ("provider", SKIP_PROVIDER_SCRIPT)]


def test_the_shipped_suite_is_measurable_and_the_claim_cases_are_not() -> None:
    suite = [load_case(p) for p in sorted(SUITE.glob("*.json"))]
    assert len(suite) >= 24 and all(skip_reason(c) is None for c in suite)
    assert all(skip_reason(load_case(p)) is not None for p in CLAIMS.glob("*.json"))


def test_overrides_force_openai_at_the_configured_model_and_need_one() -> None:
    with pytest.raises(ConfigError, match="openai_base_url"):
        model_overrides(Settings())
    configured = Settings(
        openai_base_url="https://models.example/v1", openai_model="m-1", openai_api_key="sk-x"
    )
    overrides = model_overrides(configured)
    assert overrides["provider"] == "openai"
    assert overrides["openai_base_url"] == "https://models.example/v1"
    assert overrides["openai_model"] == "m-1" and overrides["openai_api_key"] == "sk-x"
    case_settings = Settings(provider="rules", agent={"name": "小禾", "role": "助理"})
    measured = case_settings.with_overrides(overrides)
    assert measured.provider == "openai" and measured.agent.name == "小禾"


# --------------------------------------------------------------------------- the verdict


def test_a_gate_save_or_a_missing_model_answer_fails_the_repetition() -> None:
    assert Repetition(True).passed
    assert not Repetition(False, ["platform.count: expected 1, got 2"]).passed
    assert not Repetition(True, gate_saves=Counter({"unbacked_claim": 1})).passed
    assert not Repetition(True, model_failures=Counter({"model_unavailable": 1})).passed


def test_the_report_keeps_saves_per_case_and_says_what_it_did_not_prove() -> None:
    measure = CaseMeasure("c1", "conversation-contract", "c1.json")
    measure.repetitions = [
        Repetition(True),
        Repetition(True, gate_saves=Counter({"deferred_promise": 2})),
    ]
    document = report_document([measure], [("c2", SKIP_MODEL_SCRIPT)], {"repeat": 2, "model": "m"})
    assert document["pass_rate"] == 0.5 and document["runs"] == 2
    case = document["cases"][0]
    assert case["passes"] == 1 and case["gate_saves"] == {"deferred_promise": 2}
    assert case["interval_95"] == [pytest.approx(0.0945, abs=1e-4), pytest.approx(0.9055, abs=1e-4)]
    assert document["skipped_by_reason"] == {SKIP_MODEL_SCRIPT: 1}
    assert any("2 repetition(s)" in line for line in document["not_proven"])
    assert any("temperature" in line for line in document["not_proven"])
    assert any("skipped" in line and SKIP_MODEL_SCRIPT in line for line in document["not_proven"])


# --------------------------------------------------------------------------- end to end


@contextmanager
def served(behaviour: Behaviour) -> Iterator[ScriptedModel]:
    """The scripted model on its own loop and thread, since the command runs its own loop."""
    model = ScriptedModel(behaviour)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(model.start(), loop).result(timeout=10)
    try:
        yield model
    finally:
        asyncio.run_coroutine_threadsafe(model.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def _measure(
    behaviour: Behaviour,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *extra: str,
    paths: tuple[Path, ...] = (SUITE,),
) -> tuple[int, dict[str, Any]]:
    report = tmp_path / "report.json"
    monkeypatch.chdir(tmp_path)  # no dta.toml here: the environment names the model
    with served(behaviour) as model:
        monkeypatch.setenv("DTA_OPENAI_BASE_URL", model.base_url)
        monkeypatch.setenv("DTA_OPENAI_MODEL", "scripted")
        argv = ["lab", "eval", "--against-model", "--repeat", "2", "--report", str(report)]
        code = main([*argv, *extra, *map(str, paths)])
    document = json.loads(report.read_text(encoding="utf-8")) if report.exists() else {}
    return code, document


def _assert_baselines_discriminate(document: dict[str, Any]) -> None:
    """Each constant answer ran once on every measured case and passes at most a quarter."""
    baselines = document["baselines"]
    assert list(baselines) == BASELINE_NAMES
    for name, baseline in baselines.items():
        assert baseline["runs"] == len(document["cases"]), name
        assert baseline["pass_rate"] <= MAX_BASELINE_RATE, (name, baseline["passed"])
    for case in document["cases"]:
        assert set(case["baselines"]) == set(BASELINE_NAMES)


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_a_well_behaved_model_passes_the_behaviour_suite_and_no_baseline_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = _measure(well_behaved, tmp_path, monkeypatch)
    assert code == 0
    cases = {c["id"]: c for c in document["cases"]}
    assert len(cases) >= 24 and document["gate_saves"] == {}
    failing = {k: c["problems"] for k, c in cases.items() if c["passes"] < c["runs"]}
    assert document["pass_rate"] >= 0.9, failing
    assert document["probe"]["loaded"] is True and document["skipped"] == []
    _assert_baselines_discriminate(document)
    out = capsys.readouterr().out
    assert "constant baselines: decline" in out and out.count("| baselines passed:") == len(cases)


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_a_misbehaving_model_fails_the_suite_and_the_gate_saves_are_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, document = _measure(misbehaving, tmp_path, monkeypatch)
    assert code == 0  # a low pass rate is a measurement, not a crash
    assert document["pass_rate"] <= 0.2
    saves = document["gate_saves"]
    assert saves.get("unbacked_claim") and saves.get("deferred_promise")
    assert saves.get("schema_invalid")  # the target field it added
    low, high = document["interval_95"]
    assert 0.0 <= low <= document["pass_rate"] <= high
    _assert_baselines_discriminate(document)


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_min_pass_rate_fails_the_command_and_skips_are_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = _measure(
        misbehaving, tmp_path, monkeypatch, "--min-pass-rate", "0.5", paths=(SUITE, CLAIMS)
    )
    assert code == 1
    claims = len(list(CLAIMS.glob("*.json")))
    assert document["skipped_by_reason"] == {SKIP_MODEL_SCRIPT: claims}
    out = capsys.readouterr().out
    assert f"skipped {claims} case(s)" in out and "pass rate" in out
    assert out.count("0/2") >= 8  # one line per case with k/N


def _blind(view: ModelView) -> dict[str, Any]:
    """A model that never sees the skills: the probe's marker does not come back."""
    return {"kind": "reply", "text": "我不知道什么标记。"}


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_model_that_cannot_see_the_skills_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = _measure(_blind, tmp_path, monkeypatch)
    assert code == 2 and document == {}
    assert "cannot see the loaded skills" in capsys.readouterr().err


def test_the_flags_are_checked_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("DTA_OPENAI_BASE_URL", "DTA_OPENAI_MODEL", "DTA_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    assert main(["lab", "eval", "--repeat", "3", str(SUITE)]) == 2
    assert main(["lab", "eval", "--against-model", "--repeat", "0", str(SUITE)]) == 2
    assert main(["lab", "eval", "--against-model", "--live", str(SUITE)]) == 2
    assert main(["lab", "eval", "--against-model", str(SUITE)]) == 2  # no model configured
    err = capsys.readouterr().err
    assert "add --against-model" in err and "openai_base_url" in err


def _trail(msg: str, *receipts: dict[str, Any]) -> EventTrail:
    trail = EventTrail(msg, "u1", "cid", "dm", "", 1, None, "done")
    trail.receipts.extend(receipts)
    return trail


def test_refusals_of_the_model_count_as_saves_and_the_operators_do_not() -> None:
    case = load_case(next(SUITE.glob("*.json")))
    refused = {"kind": "reply", "status": "refused", "reason": "unbacked_claim", "evidence": {}}
    budget = {"kind": "reply", "status": "refused", "reason": "write_budget", "evidence": {}}
    operator = {"kind": "reply", "status": "refused", "reason": "at_all", "evidence": {}}
    result = CaseResult(case)
    result.transcript = Transcript(
        [_trail("m1", refused, budget), _trail("op1", operator)], [], [], []
    )
    repetition = repetition_of(result, [], frozenset({"op1"}))
    assert repetition.gate_saves == Counter({"unbacked_claim": 1})
    assert repetition.expectations_held and not repetition.passed
