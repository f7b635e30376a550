"""Lab output a person reads: counts as counts, one missing message reported once, every
valid file run despite an invalid one, failures first in HTML, evidence as JSON, and every
report saying what the run did not prove."""

from __future__ import annotations

import io
import json
from html import unescape
from pathlib import Path
from typing import Any

from lab.eval.align import message_findings
from lab.eval.evaluate import EXIT_FAILED, EXIT_INVALID, EXIT_OK, evaluate
from lab.report import FAKE_PLATFORM, IN_PROCESS, LIVE, human, not_proven

THREE_DMS = [
    {"at": 0, "send": {"msg": "m1", "from": "u1", "text": "1 + 1 等于多少？"}},
    {"at": 1, "send": {"msg": "m2", "from": "u1", "text": "2 + 2 等于多少？"}},
    {"at": 2, "send": {"msg": "m3", "from": "u1", "text": "3 + 3 等于多少？"}},
]


def case(case_id: str, expect: dict[str, Any], steps: list[dict[str, Any]] | None = None) -> dict:
    return {
        "schema": "dta.lab.case/1",
        "id": case_id,
        "category": "conversation-contract",
        "title": f"case {case_id}",
        "steps": steps or THREE_DMS,
        "expect": expect,
    }


def write(folder: Path, name: str, document: Any) -> Path:
    path = folder / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_count_is_reported_as_a_count(tmp_path):
    write(tmp_path, "a.json", case("a", {"platform": {"count": 2}}))
    out = io.StringIO()
    assert evaluate([tmp_path], out=out) == EXIT_FAILED
    text = out.getvalue()
    assert "platform.count: expected 2, got 3 (received:" in text
    assert "[" not in text.split("platform.count")[1].split("\n")[0], "no list as the actual"


def test_one_missing_message_is_one_finding_not_a_cascade(tmp_path):
    # The robot answers 2, 4 and 6; the case expects 2, 3 (never sent), 4, 6.
    wanted = [
        {"contains": ["= 2"]},
        {"contains": ["= 3"]},
        {"contains": ["= 4"]},
        {"contains": ["= 6"]},
    ]
    write(tmp_path, "a.json", case("a", {"platform": {"messages": wanted}}))
    out = io.StringIO()
    assert evaluate([tmp_path], out=out) == EXIT_FAILED
    problems = [line for line in out.getvalue().splitlines() if line.startswith("    - ")]
    assert len(problems) == 1, problems
    assert "platform.messages[1]" in problems[0] and "missing" in problems[0]


def test_an_extra_message_is_named_once():
    received = [{"channel": "c", "text": t} for t in ("a", "EXTRA", "b", "c")]
    wanted = ["a", "b", "c"]

    def problems_of(i: int, want: str, got: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [] if got["text"] == want else [(f"platform.messages[{i}]", want, got["text"])]

    findings = message_findings(wanted, received, problems_of, lambda w: w)
    assert findings == [("platform.messages", "no message here", "an extra message #1: c: EXTRA")]
    # a plain mismatch in place keeps its field-by-field wording
    received[1]["text"] = "B"
    findings = message_findings(["a", "b"], received[:2], problems_of, lambda w: w)
    assert findings == [("platform.messages[1]", "b", "B")]
    assert message_findings(["a"], received, problems_of, lambda w: w) == []


def test_every_valid_file_runs_when_one_is_invalid_then_exit_2(tmp_path):
    write(tmp_path, "a-good.json", case("good", {"platform": {"count": 3}}))
    write(tmp_path, "b-broken.json", case("broken", {"platfrom": {"count": 1}}))
    write(tmp_path, "c-good.json", case("good2", {"processed": ["m1"]}))
    (tmp_path / "d-not-json.json").write_text("{", encoding="utf-8")
    out = io.StringIO()
    report, html = tmp_path / "r.json", tmp_path / "r.html"
    assert evaluate([tmp_path], report=report, html=html, out=out) == EXIT_INVALID
    text = out.getvalue()
    assert "PASS" in text and "good2" in text and "2/2 cases passed" in text
    assert "b-broken.json" in text and "d-not-json.json" in text
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["summary"]["invalid_files"] == 2 and len(document["invalid"]) == 2
    assert "b-broken.json" in html.read_text(encoding="utf-8")


def test_html_lists_failures_first_with_links_json_evidence_and_cjk_fonts(tmp_path):
    write(tmp_path, "a.json", case("a-passes", {"platform": {"count": 3}}))
    write(tmp_path, "b.json", case("b-passes", {"processed": ["m2"]}))
    write(tmp_path, "z.json", case("z-fails", {"decisions": {"m1": {"reason": "mentioned"}}}))
    html = tmp_path / "r.html"
    assert evaluate([tmp_path], html=html, out=io.StringIO()) == EXIT_FAILED
    page = unescape(html.read_text(encoding="utf-8"))
    assert page.index('id="case-z-fails"') < page.index('id="case-a-passes"')
    assert 'href="#case-z-fails"' in page and 'href="#case-a-passes"' not in page
    assert '"reason": "mentioned"' in page, "evidence as JSON"
    assert "{'" not in page, "no Python dicts"
    assert "Noto Sans CJK SC" in page and "PingFang SC" in page
    assert "What this run did not prove" in page and "real DingTalk" in page


def test_every_report_says_what_the_run_did_not_prove(tmp_path):
    cases = tmp_path / "cases"
    cases.mkdir()
    write(cases, "a.json", case("a", {"platform": {"count": 3}}))
    out, report = io.StringIO(), tmp_path / "r.json"
    assert evaluate([cases], report=report, out=out) == EXIT_OK
    assert "not proven by this run:" in out.getvalue() and "no websocket" in out.getvalue()
    assert json.loads(report.read_text())["not_proven"] == [IN_PROCESS, FAKE_PLATFORM]
    assert not_proven(True) == [LIVE, FAKE_PLATFORM]
    as_json = io.StringIO()
    assert evaluate([cases], out=as_json, as_json=True) == EXIT_OK
    assert json.loads(as_json.getvalue())["mode"] == "in-process"


def test_human_values_are_never_reprs():
    assert human(True) == "yes" and human(False) == "no"
    assert human({"schema_invalid": 18, "write_budget": 2}) == "schema_invalid 18, write_budget 2"
    assert human([]) == "none" and human(None) == "—"
