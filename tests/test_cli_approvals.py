"""``dta approvals list|show``: what became of each approval's act in the one outcome
vocabulary (agent/acts/told.py), people by name, arguments as a person reads them (no reprs,
no JSON escapes), times in the configured zone — from a store a lab case left, and from
hand-made approvals for the outcomes a case does not reach."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from agent.cli.approvals import list_approvals, show_approval
from agent.cli.main import main
from agent.cli.trace_acts import approval_act
from agent.contracts import (
    ActionKind,
    ApprovalRecord,
    ApprovalStatus,
    Evidence,
    Receipt,
    ReceiptStatus,
    VoidReason,
)
from lab.eval.cases import load_case
from lab.eval.runner import CaseRun
from storage import Store

CASE = Path(__file__).resolve().parents[1] / (
    "lab/cases/workspace-and-artifacts/acts/colleague-todo-waits-for-the-askers-click.json"
)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("cli-approvals")
    result = asyncio.run(CaseRun(load_case(CASE), workdir).run())
    assert result.passed, (result.error, [str(p) for p in result.problems])
    return workdir / "dta.db"


def _approval_id(store_path: Path) -> str:
    with Store(store_path) as store:
        return store.approvals.all()[0].approval_id


def test_list_says_what_became_of_the_act_with_names_and_the_zone(store_path, capsys):
    assert main(["--config", "/dev/null", "approvals", "list", "--store", str(store_path)]) == 0
    out = capsys.readouterr().out
    assert "→ done, read back" in out  # the act was created and read back
    assert "for 张三" in out and "asked by 李四" in out and "by 李四" in out
    assert "u1" not in out and "u2" not in out, "names, not staff ids"
    assert "2026-01-01 08:00:00 +08:00" in out, "asked, in Asia/Shanghai (the default zone)"
    assert "UTC" not in out and "+0000" not in out


def test_show_reads_the_arguments_and_each_receipts_outcome(store_path, capsys):
    apv = _approval_id(store_path)
    argv = ["--config", "/dev/null", "approvals", "show", "--store", str(store_path), apv]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "argument        主题：整理发票" in out and "argument        执行人：张三" in out
    assert "names           u1 李四, u2 张三" in out
    assert "outcome         verified: done, read back" in out
    assert "receipt         act verified → done, read back" in out
    assert "prompt          accepted via card" in out
    assert "click           李四 approve → approved" in out
    assert "click           u3 approve → not_authorizer" in out  # the directory never named u3
    for row in ("arguments hash", "code", "card"):
        assert f"  {row:<15} " in out
    assert "asked           2026-01-01 08:00:00 +08:00 (card)" in out
    assert "decided         2026-01-01 08:00:10 +08:00" in out
    assert "['" not in out and "{'" not in out and "\\u" not in out, "no reprs, no escapes"
    assert "UTC" not in out


def test_the_configured_zone_is_the_one_shown(store_path, tmp_path, capsys):
    config = tmp_path / "dta.toml"
    config.write_text('timezone = "Europe/Berlin"\n')
    argv = ["--config", str(config), "approvals", "list", "--store", str(store_path)]
    assert main(argv) == 0
    assert "2026-01-01 01:00:00 +01:00" in capsys.readouterr().out


# ------------------------------------------------------------- outcomes a case does not reach


def _receipt(record: ApprovalRecord, run_id: str, status: ReceiptStatus, **extra) -> Receipt:
    return Receipt(
        receipt_id=f"rcp_{run_id}_{status.value}",
        run_id=run_id,
        event_id=record.event_id,
        kind=ActionKind.ACT,
        status=status,
        gate_version="test",
        skill_snapshot="test",
        created_at=record.created_at + 20,
        updated_at=record.created_at + 20,
        **extra,
    )


@pytest.fixture
def made(store_path: Path, tmp_path: Path):
    """A fresh store holding variations of the case's approval, one message each."""
    with Store(store_path) as lab:
        base = lab.approvals.all()[0]
    store = Store(tmp_path / "made.db")

    def add(name: str, **update) -> ApprovalRecord:
        record = base.model_copy(
            update={"approval_id": f"apv_{name}", "event_id": f"msg_{name}", **update}
        )
        store.approvals.add_approval(record)
        return record

    decided = {"decided_by": "u1", "decided_at": base.created_at + 10}
    add("pending", status=ApprovalStatus.PENDING, decided_by=None, decided_at=None)
    add("void", status=ApprovalStatus.VOID, void_reason=VoidReason.SUPERSEDED)
    refused = add("refused", status=ApprovalStatus.APPROVED, **decided)
    store.actions.add_receipt(
        _receipt(refused, "run_settle", ReceiptStatus.REFUSED, reason="stale_generation")
    )
    old = add("old", status=ApprovalStatus.APPROVED, act_key=None, **decided)
    store.actions.add_receipt(
        _receipt(old, "run_settle_old", ReceiptStatus.FAILED, evidence=Evidence(errmsg="no"))
    )
    add("waiting", status=ApprovalStatus.APPROVED, **decided)
    yield store
    store.close()


def test_every_outcome_is_told_in_the_vocabulary(made):
    said = {r.approval_id: approval_act(made, r) for r in made.approvals.all()}
    assert said["apv_pending"].words == "waiting for the asker's approval"
    assert said["apv_void"].words == "not run: the approval is void (superseded)"
    # approved, then refused carrying it out (its act never became an intent)
    assert said["apv_refused"].outcome.value == "refused"
    assert said["apv_refused"].words == "not run: refused (stale_generation)"
    # an older record without act_key: the act receipts of its message
    assert said["apv_old"].words == "not done: the platform said it did not happen"
    assert said["apv_waiting"].words == "approved; not carried out yet"
    out = io.StringIO()
    assert list_approvals(made, None, out, "Asia/Shanghai") == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == 5 and all("→ " in line for line in lines)
    assert any(line.endswith("→ not run: refused (stale_generation)") for line in lines)
    shown = io.StringIO()
    assert show_approval(made, "apv_old", shown, "Asia/Shanghai") == 0
    assert (
        "receipt         act failed → not done: the platform said it did not happen · no"
        in shown.getvalue()
    )
