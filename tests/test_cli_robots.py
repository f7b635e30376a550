"""The commands that read a store, with several robots: ``--robot`` picks one robot's store;
``dta trace`` without it looks in every robot's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent.cli.main import main
from lab.eval.cases import Case
from lab.eval.runner import CaseRun

ROBOTS = [{"robot_code": "finance"}, {"robot_code": "hr"}]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two robots' stores as a lab case leaves them, and a dta.toml naming both."""
    workdir = tmp_path_factory.mktemp("robots")
    case = Case.model_validate(
        {
            "schema": "dta.lab.case/1",
            "id": "robots",
            "category": "host-loading",
            "title": "two robots",
            "config": {"robots": ROBOTS},
            "steps": [
                {"at": 0, "send": {"msg": "f1", "from": "u1", "text": "1 + 1 等于几"}},
                {"at": 1, "send": {"msg": "h1", "from": "u2", "robot": "hr", "text": "2 + 3"}},
            ],
            "expect": {"processed": ["f1", "h1"]},
        }
    )
    done = asyncio.run(CaseRun(case, workdir).run())
    assert done.passed, (done.error, done.problems)
    assert (workdir / "finance.db").exists() and (workdir / "hr.db").exists()
    path = workdir / "dta.toml"
    tables = "".join(f'[[robots]]\nrobot_code = "{r["robot_code"]}"\n' for r in ROBOTS)
    path.write_text(f'store_path = "{workdir / "dta.db"}"\n{tables}', encoding="utf-8")
    return path


def test_trace_without_robot_finds_the_message_in_whichever_store(config, capsys) -> None:
    assert main(["--config", str(config), "trace", "h1"]) == 0
    out = capsys.readouterr().out
    assert "== robot finance" in out and "== robot hr" in out
    assert main(["--config", str(config), "--json", "trace", "f1"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document["robots"]) == {"finance", "hr"}


def test_trace_with_robot_reads_only_that_robots_store(config) -> None:
    assert main(["--config", str(config), "trace", "--robot", "finance", "f1"]) == 0
    assert main(["--config", str(config), "trace", "--robot", "hr", "f1"]) == 1  # not hers


def test_a_store_command_names_the_robots_when_none_is_given(config, capsys) -> None:
    assert main(["--config", str(config), "store", "stats"]) == 2
    assert "several robots (finance, hr): name one with --robot" in capsys.readouterr().err
    assert main(["--config", str(config), "--json", "store", "stats", "--robot", "hr"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["store"].endswith("hr.db") and stats["events"] == 1
    assert main(["--config", str(config), "store", "stats", "--robot", "ops"]) == 2
    assert "no robot 'ops'" in capsys.readouterr().err
