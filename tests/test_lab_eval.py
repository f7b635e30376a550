"""The lab judges behaviour from evidence: good code passes, a broken gate fails named cases,
and a case that checks nothing (or the wrong thing) is refused before it can pass."""

import io
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import gates.response
from agent.contracts import (
    CardReason,
    EngageReason,
    RefusalReason,
    SessionWebhook,
    SilentReason,
)
from gates.action import CHECKS, ActionGate, ActionPolicy
from lab.eval.cases import Case, CaseError, CasePathError, discover, load_case
from lab.eval.evaluate import EXIT_FAILED, EXIT_INVALID, EXIT_OK, evaluate
from lab.eval.runner import run_case
from tests.environment import in_ci, unavailable

ROOT = Path(__file__).resolve().parents[1]
PROJECT_CASES = ROOT / "lab" / "cases"
SHARED_CASES = ROOT.parent / "shared" / "cases"


def shared_cases() -> list[Path]:
    """The shared example cases. Their absence is never silent: under CI it fails the test
    that asked for them, elsewhere it warns, so a green run cannot hide that they were skipped.
    """
    if SHARED_CASES.is_dir():
        return [SHARED_CASES]
    message = f"the shared lab cases are missing: {SHARED_CASES} was not run"
    if in_ci():
        pytest.fail(message)
    warnings.warn(message, stacklevel=2)
    return []


def case_paths() -> list[Path]:
    return [PROJECT_CASES, *shared_cases()]


def test_shared_cases_are_present():
    """The one place the shared cases' absence shows as its own line: a skip with the reason
    outside CI, a failure under CI (README's test command runs them and must find them)."""
    if not SHARED_CASES.is_dir():
        unavailable(f"the shared lab cases are missing: {SHARED_CASES}")
    assert sorted(SHARED_CASES.glob("*.json"))


def test_a_missing_path_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "shared" / "cases"
    out = io.StringIO()
    few = PROJECT_CASES / "task-lifecycle" / "reactions"
    assert evaluate([few, missing], out=out) == EXIT_INVALID
    assert str(missing) in out.getvalue() and "no such file or folder" in out.getvalue()
    with pytest.raises(CasePathError):
        discover([missing])


def test_a_folder_without_cases_is_an_error_naming_it(tmp_path):
    empty = tmp_path / "cases"
    empty.mkdir()
    out = io.StringIO()
    few = PROJECT_CASES / "task-lifecycle" / "reactions"
    assert evaluate([few, empty], out=out) == EXIT_INVALID
    assert str(empty) in out.getvalue()


def one_case_per_category() -> list[Path]:
    """The first case of each category (and the shared ones). Every case is run by the last
    step of README's test command (`dta lab eval lab/cases ../shared/cases`); running them all
    here as well cost CI a minute and proved nothing more about the reports."""
    first: dict[str, Path] = {}
    for case in discover([PROJECT_CASES]):
        first.setdefault(case.category, Path(case.path))
    return [*first.values(), *shared_cases()]


def test_a_case_of_every_category_passes_and_reports_are_written(tmp_path):
    out = io.StringIO()
    in_flight = PROJECT_CASES / "platform-reliability" / "redelivery-in-flight.json"
    paths = list(dict.fromkeys([*one_case_per_category(), in_flight]))
    code = evaluate(paths, report=tmp_path / "r.json", html=tmp_path / "r.html", out=out)
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


def expected_reasons(case: Case) -> set[str]:
    """The reason codes a case demands of the evidence: its titles, tags and steps don't count,
    only what ``expect`` checks (a code the case merely mentions proves nothing)."""
    expect = case.expect
    reasons = {want.reason for want in (expect.decisions or {}).values()}
    reasons |= {want.reason for want in expect.receipts or []}
    reasons |= {want.reason for want in expect.refusals or []}
    if expect.duplicates:  # duplicates are acked and counted, never decided
        reasons.add(SilentReason.DUPLICATE.value)
    return {reason for reason in reasons if reason is not None}


def test_project_cases_cover_every_reason_code():
    covered = set().union(*(expected_reasons(case) for case in discover([PROJECT_CASES])))
    gate_silences = list(SilentReason)[: list(SilentReason).index(SilentReason.PROVIDER_SILENCE)]
    kinds = [*gate_silences, *EngageReason, *RefusalReason, *CardReason]
    codes = {code.value for code in kinds}
    assert not codes - covered


def test_coverage_counts_only_the_expect_block(tmp_path):
    """A reason code in a title, a tag or a step's text is not a check on the evidence."""
    path = _write(
        tmp_path,
        {
            **BASE,
            "title": "run_budget and content_too_large, mentioned only here",
            "tags": ["write_budget"],
            "steps": [{"at": 0, "send": {"msg": "m1", "from": "u1", "text": "stale_generation"}}],
            "expect": {"decisions": {"m1": {"reason": "dm"}}, "refusals": []},
        },
    )
    assert expected_reasons(load_case(path)) == {"dm"}


async def _failing_ids(paths: list[Path]) -> set[str]:
    return {r.case.id for r in [await run_case(c) for c in discover(paths)] if not r.passed}


async def test_gate_answering_unmentioned_group_messages_fails_named_cases(monkeypatch):
    broken = [rule for rule in gates.response._RULES if rule[0] != "group_not_mentioned"]
    monkeypatch.setattr(gates.response, "_RULES", broken)
    shared = shared_cases()
    named = PROJECT_CASES / "conversation-contract" / "group-at-someone-else-is-silent.json"
    others = [SHARED_CASES / "group-without-mention-is-silent.json"] if shared else []
    dm = PROJECT_CASES / "conversation-contract" / "dm-decimal-arithmetic.json"
    failing = await _failing_ids([named, *others, dm])
    assert "group-at-someone-else-is-silent" in failing and "dm-decimal-arithmetic" not in failing
    if shared:
        assert "group-without-mention-is-silent" in failing


async def test_webhook_used_after_expiry_fails_the_expired_webhook_cases(monkeypatch):
    """Trying an expired webhook and falling back still reaches the person, so only the
    receipt's channels tell "chosen only while valid" from "tried it anyway"."""
    monkeypatch.setattr(SessionWebhook, "valid_at", lambda self, now, margin_s=0.0: True)
    failing = await _failing_ids([PROJECT_CASES / "platform-reliability"])
    assert {"expired-webhook-uses-openapi-dm", "expired-webhook-uses-openapi-group"} <= failing
    assert "session-gone-falls-back-to-openapi" not in failing


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


async def test_gate_without_the_claim_checks_fails_the_claim_cases(monkeypatch):
    import gates.action
    import gates.action_checks

    kept = tuple(c for c in CHECKS if c.name not in ("claims", "promises"))
    monkeypatch.setattr(gates.action_checks, "CHECKS", kept)
    monkeypatch.setattr(gates.action, "CHECKS", kept)
    failing = await _failing_ids([PROJECT_CASES / "authority-and-egress" / "claims"])
    # every claim case needs the checks: none passes without them
    assert failing == {
        "unbacked-claim-is-repaired",
        "unbacked-claim-twice-says-what-is-true",
        "bare-promise-is-repaired",
        "lookup-then-claim-of-a-notice-is-refused",
        "ack-claim-is-refused",
        "refused-act-backs-no-claim",
        "own-todo-backs-only-its-own-sentence",
        "act-then-unbacked-claims-twice-tells-the-act",
        "reminder-backs-no-claim-of-a-send",
    }


async def test_gate_without_the_figure_and_raw_output_checks_fails_their_cases(monkeypatch):
    import gates.action
    import gates.action_checks

    kept = tuple(c for c in CHECKS if c.name not in ("figures", "raw_output"))
    monkeypatch.setattr(gates.action_checks, "CHECKS", kept)
    monkeypatch.setattr(gates.action, "CHECKS", kept)
    failing = await _failing_ids(
        [
            PROJECT_CASES / "conversation-contract" / "grounding",
            PROJECT_CASES / "workspace-and-artifacts" / "reads",
        ]
    )
    assert failing == {
        "figure-not-in-the-source-is-repaired",
        "figure-never-grounded-is-not-sent",
        "raw-tool-output-is-said-in-words",
    }


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


HOLLOW: list[tuple[dict[str, Any], str]] = [
    ({}, "expect"),
    ({"platform": {}}, "expect.platform"),
    ({"platform": {"count": None}}, "expect.platform"),
    ({"platform": {"messages": []}}, "expect.platform"),
    ({"platform": {"messages": [{}]}}, "expect.platform.messages.0"),
    ({"platform": {"messages": [{"contains": []}]}}, "expect.platform.messages.0"),
    ({"receipts": [{}]}, "expect.receipts.0"),
    ({"receipts": [{"msg": "m1", "chanel": "openapi_oto"}]}, "expect.receipts.0.chanel"),
    ({"receipts": [{"msg": "m1", "channel": "webhook"}]}, "expect.receipts.0.channel"),
    ({"decisions": {}}, "expect.decisions"),
    ({"decisions": {"m1": {}}}, "expect.decisions.m1"),
    ({"decisions": {"m1": {"verdit": "engage"}}}, "expect.decisions.m1.verdit"),
    ({"refusals": [{}]}, "expect.refusals.0.reason"),
    ({"processed": []}, "expect.processed"),
    ({"tasks": [{}]}, "expect.tasks.0"),
    ({"tasks": [{"stauts": "completed"}]}, "expect.tasks.0"),
    ({"tasks": [{"status": "complete"}]}, "expect.tasks.0"),
    ({"memory_candidates": [{"scope": "dm:u1"}]}, "expect.memory_candidates.0"),
    (
        {"memory_candidates": [{"status": "proposed", "confidense": 1}]},
        "expect.memory_candidates.0",
    ),
    ({"platform": {"messages": [{"contains": [""]}]}}, "expect.platform.messages.0.contains.0"),
    ({"platform": {"messages": [{"matches": ""}]}}, "expect.platform.messages.0.matches"),
    ({"platform": {"cards": [{"contains": [""]}]}}, "expect.platform.cards.0.contains.0"),
    ({"platform": {"cards": [{"final": ""}]}}, "expect.platform.cards.0.final"),
    ({"platform": {"calls": {}}}, "expect.platform.calls"),
    ({"platform": {"calls": {"tokens": 0}}}, "expect.platform.calls.tokens"),
    ({"platform": {"calls": {"total": -1}}}, "expect.platform.calls.total"),
]


@pytest.mark.parametrize(("expect", "field"), HOLLOW)
def test_hollow_expectations_are_invalid_case_files(tmp_path, expect, field):
    """Each of these would once have passed whatever the robot did; now the file is refused."""
    path = _write(tmp_path, {**BASE, "expect": expect})
    with pytest.raises(CaseError) as info:
        load_case(path)
    assert f"field '{field}'" in str(info.value) or f"field '{field}." in str(info.value)
    out = io.StringIO()
    assert evaluate([path], out=out) == EXIT_INVALID
    assert str(path) in out.getvalue() and field in out.getvalue()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"steps": [{"at": 0, "send": {"msg": "m1", "from": "u1", "quote": {"mgs": "m0"}}}]},
            "steps.0.send.quote",
        ),
        (
            {
                "steps": [
                    {
                        "at": 0,
                        "send": {"msg": "m1", "from": "u1", "quote": {"msg": "m0", "shpe": "text"}},
                    }
                ]
            },
            "steps.0.send.quote",
        ),
        (
            {"fixtures": {"users": {"u1": {"name": "王芳", "titel": "经理"}}}},
            "fixtures.users.u1.titel",
        ),
        ({"fixtures": {"users": {"u1": {"title": "经理"}}}}, "fixtures.users.u1.name"),
    ],
)
def test_misspelt_keys_in_quotes_and_users_make_the_file_invalid(tmp_path, change, field):
    path = _write(tmp_path, {**BASE, **change})
    with pytest.raises(CaseError) as info:
        load_case(path)
    assert f"field '{field}" in str(info.value), str(info.value)
    assert evaluate([path], out=io.StringIO()) == EXIT_INVALID


def test_misspelt_record_keys_are_named(tmp_path):
    path = _write(tmp_path, {**BASE, "expect": {"tasks": [{"stauts": "completed"}]}})
    with pytest.raises(CaseError, match=r"'stauts' is not a field of TaskCheckpoint"):
        load_case(path)


GROUP_QUESTION = {
    **BASE,
    "steps": [
        {
            "at": 0,
            "send": {
                "msg": "m1",
                "from": "u1",
                "group": "g1",
                "at_bot": True,
                "text": "9 + 1 等于几",
            },
        }
    ],
}


@pytest.mark.parametrize(
    ("expect", "code", "complaint"),
    [
        # the reply in a group @-s the asker: "nobody" and "someone else" are both wrong
        ({"platform": {"messages": [{"at_users": []}]}}, EXIT_FAILED, "at_users: expected []"),
        ({"platform": {"messages": [{"at_users": ["u2"]}]}}, EXIT_FAILED, "at_users"),
        ({"platform": {"messages": [{"at_users": ["u1", "u2"]}]}}, EXIT_FAILED, "at_users"),
        ({"platform": {"messages": [{"at_users": ["u1"]}]}}, EXIT_OK, ""),
        # the webhook was valid, so it carried the reply and nothing else was tried
        ({"receipts": [{"msg": "m1", "channel": "openapi_group"}]}, EXIT_FAILED, "receipts[0]"),
        ({"receipts": [{"msg": "m1", "channels": ["session_webhook"]}]}, EXIT_OK, ""),
        ({"platform": {"messages": [{"channel": "openapi_group"}]}}, EXIT_FAILED, "channel"),
        ({"platform": {"messages": [{"channel": "session_webhook"}]}}, EXIT_OK, ""),
        # an explicit [] demands none at all
        ({"receipts": []}, EXIT_FAILED, "receipts: expected []"),
        ({"refusals": []}, EXIT_OK, ""),
        # every request the fake answered, by kind: a token, the directory, the webhook send
        ({"platform": {"calls": {"total": 3, "token": 1, "directory": 1, "send": 1}}}, EXIT_OK, ""),
        ({"platform": {"calls": {"total": 0}}}, EXIT_FAILED, "platform.calls.total: expected 0"),
        ({"platform": {"calls": {"download": 1}}}, EXIT_FAILED, "platform.calls.download"),
    ],
)
def test_the_judge_checks_what_it_is_given(tmp_path, expect, code, complaint):
    path = _write(tmp_path, {**GROUP_QUESTION, "expect": expect})
    out = io.StringIO()
    assert evaluate([path], out=out) == code, out.getvalue()
    assert complaint in out.getvalue()


def test_at_users_empty_passes_when_nobody_is_at_ed(tmp_path):
    path = _write(tmp_path, {**BASE, "expect": {"platform": {"messages": [{"at_users": []}]}}})
    out = io.StringIO()
    assert evaluate([path], out=out) == EXIT_OK, out.getvalue()


def test_a_failing_case_exits_1_with_expected_and_actual(tmp_path):
    path = _write(tmp_path, {**BASE, "expect": {"platform": {"count": 2}}})
    out = io.StringIO()
    assert evaluate([path], out=out) == EXIT_FAILED
    assert "platform.count: expected 2" in out.getvalue()
