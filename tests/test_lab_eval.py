"""The lab judges behaviour from evidence: good code passes, a broken gate fails named cases."""

import io
import json
from pathlib import Path

import pytest

import gates.response
from gates.action import ActionGate, ActionPolicy
from lab.cases import CaseError, discover, load_case
from lab.evaluate import EXIT_FAILED, EXIT_INVALID, EXIT_OK, evaluate
from lab.runner import run_case

ROOT = Path(__file__).resolve().parents[1]
PROJECT_CASES = ROOT / "lab" / "cases"
SHARED_CASES = ROOT.parent / "shared" / "cases"


def case_paths() -> list[Path]:
    return [PROJECT_CASES, *([SHARED_CASES] if SHARED_CASES.exists() else [])]


def test_every_case_passes_and_reports_are_written(tmp_path):
    out = io.StringIO()
    code = evaluate(case_paths(), report=tmp_path / "r.json", html=tmp_path / "r.html", out=out)
    assert code == EXIT_OK, out.getvalue()
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["failed"] == 0
    assert set(report["summary"]["by_category"]) == {
        "host-loading",
        "conversation-contract",
        "authority-and-egress",
        "task-lifecycle",
        "memory-and-storage",
        "workspace-and-artifacts",
        "platform-reliability",
    }
    html = (tmp_path / "r.html").read_text()
    assert "redelivery-in-flight" in html and "platform received" in html


def test_project_cases_cover_every_reason_code():
    texts = "\n".join(p.read_text() for p in PROJECT_CASES.rglob("*.json"))
    codes = [
        "self_message",
        "paused",
        "denied",
        "not_allowed",
        "stale_event",
        "unsupported_msgtype",
        "empty_message",
        "group_not_mentioned",
        '"dm"',
        '"mentioned"',
        "schema_invalid",
        "action_not_allowed",
        "run_silent",
        "run_terminal",
        "stale_generation",
        "run_budget",
        "duplicate_intent",
        "identity_mismatch",
        "write_budget",
        "target_unavailable",
        "content_too_large",
        '"duplicates"',
    ]
    missing = [code for code in codes if code not in texts]
    assert not missing


async def _failing_ids(paths: list[Path]) -> set[str]:
    return {r.case.id for r in [await run_case(c) for c in discover(paths)] if not r.passed}


async def test_gate_answering_unmentioned_group_messages_fails_named_cases(monkeypatch):
    broken = [rule for rule in gates.response._SILENT_RULES if rule[0] != "group_not_mentioned"]
    monkeypatch.setattr(gates.response, "_SILENT_RULES", broken)
    failing = await _failing_ids(case_paths())
    assert "group-at-someone-else-is-silent" in failing
    if SHARED_CASES.exists():
        assert "group-without-mention-is-silent" in failing


async def test_gate_without_generation_check_fails_the_burst_case(monkeypatch):
    original = ActionGate.decide

    def ignore_generation(self, raw, run, tally, facts):
        facts = type(facts)(**{**facts.__dict__, "thread_generation": run.generation})
        return original(self, raw, run, tally, facts)

    monkeypatch.setattr(ActionGate, "decide", ignore_generation)
    failing = await _failing_ids([PROJECT_CASES / "task-lifecycle"])
    assert "three-quick-messages-one-reply" in failing


async def test_gate_without_write_budget_fails_budget_cases(monkeypatch):
    original = ActionPolicy.__init__

    def generous(self, *args, **kwargs):
        original(self, *args, **kwargs)
        object.__setattr__(self, "write_budget_per_day", 10**9)
        object.__setattr__(self, "write_budget_per_conversation_per_minute", 10**9)

    monkeypatch.setattr(ActionPolicy, "__init__", generous)
    failing = await _failing_ids(
        [PROJECT_CASES / "authority-and-egress", PROJECT_CASES / "memory-and-storage"]
    )
    assert {
        "write-budget-in-busy-group",
        "daily-write-budget",
        "budget-survives-restart",
    } <= failing


def _write(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


BASE = {
    "schema": "dta.lab.case/1",
    "id": "x",
    "category": "conversation-contract",
    "title": "t",
    "steps": [{"at": 0, "send": {"msg": "m1", "from": "u1", "text": "hi"}}],
    "expect": {"platform": {"count": 1}},
}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"category": "vibes"}, "category"),
        ({"expect": {"platfrom": {"count": 1}}}, "expect.platfrom"),
        ({"steps": [{"at": 0, "send": {"msg": "m1", "text": "no sender"}}]}, "steps.0.send.from"),
        ({"steps": [{"at": 0, "wait": 1, "redeliver": "m1"}]}, "steps.0"),
        ({"config": {"max_event_age": 5}}, "config"),
        ({"steps": [{"at": 0, "fault": {"webhook": {"stauts": 500}}}]}, "steps.0.fault"),
        ({"steps": [{"at": 0, "restart": {"crash": "before_lunch"}}]}, "steps.0.restart"),
    ],
)
def test_invalid_case_files_name_file_and_field(tmp_path, change, field):
    path = _write(tmp_path, {**BASE, **change})
    with pytest.raises(CaseError) as info:
        load_case(path)
    assert str(path) in str(info.value)
    assert field in str(info.value)
    out = io.StringIO()
    assert evaluate([path], out=out) == EXIT_INVALID
    assert str(path) in out.getvalue()


def test_a_failing_case_exits_1_with_expected_and_actual(tmp_path):
    path = _write(tmp_path, {**BASE, "expect": {"platform": {"count": 2}}})
    out = io.StringIO()
    assert evaluate([path], out=out) == EXIT_FAILED
    assert "platform.count: expected 2" in out.getvalue()
