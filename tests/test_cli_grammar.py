"""One grammar for every command: --config and --json in one place, --version, help that
never fails, documented exit codes, and no Python reprs in what people read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agent.cli import main as cli
from agent.cli.doctor import network_failure, sources
from agent.cli.main import main, parser
from agent.cli.probe import ProbeResult
from agent.cli.skills import probe_verdict


def every_command(top: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple]:
    found = []
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((*prefix, name))
                found.extend(every_command(sub, (*prefix, name)))
    return found


COMMANDS = every_command(parser())


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_never_fails_and_documents_exit_codes(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: dta") and "exit status" in out


FULL = [
    ["run"],
    ["send", "--user", "u1", "hi"],
    ["dev"],
    ["dev", "say", "hi"],
    ["trace", "m1"],
    ["console"],
    ["doctor"],
    ["init"],
    ["skills", "list"],
    ["skills", "probe"],
    ["store", "stats"],
    ["store", "prune", "--keep-days", "30"],
    ["memory", "list"],
    ["memory", "approve", "mem_x", "--revision", "1"],
    ["memory", "reject", "mem_x", "--revision", "1"],
    ["memory", "publish", "mem_x", "--to", "MEMORY.md"],
    ["approvals", "list"],
    ["approvals", "show", "apv_x"],
    ["jobs", "list"],
    ["jobs", "show", "job_x"],
    ["jobs", "cancel", "job_x"],
    ["jobs", "resume", "job_x"],
    ["knowledge", "sync"],
    ["knowledge", "status"],
    ["feedback", "export", "--since", "7d"],
    ["feedback", "case", "m1"],
    ["lab", "eval", "cases"],
    ["lab", "replay", "frames.jsonl"],
    ["lab", "security"],
    ["lab", "reliability", "storm"],
    ["lab", "bench"],
]


def test_the_list_below_names_every_command():
    named = {tuple(w for w in argv if not w.startswith("-"))[:3] for argv in FULL}
    leaves = {c for c in COMMANDS if not any(o[: len(c)] == c and o != c for o in COMMANDS)}
    assert leaves <= {n[: len(leaf)] for n in named for leaf in leaves if n[: len(leaf)] == leaf}


@pytest.mark.parametrize("argv", FULL, ids=" ".join)
def test_config_is_accepted_before_or_after_every_command(argv):
    assert parser().parse_args([*argv, "--config", "x.toml"]).config == Path("x.toml")
    assert parser().parse_args(["--config", "y.toml", *argv]).config == Path("y.toml")


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("dta ")


def test_json_where_it_inspects_and_a_clear_no_elsewhere(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DTA_STORE_PATH", str(tmp_path / "s.db"))
    assert main(["memory", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--json", "store", "stats"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["events"] == 0 and stats["store"].endswith("s.db")
    assert main(["skills", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "basic-behavior"
    assert main(["--json", "run"]) == 2
    assert "`dta run` has no JSON output" in capsys.readouterr().err


def test_people_read_words_not_reprs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DTA_STORE_PATH", str(tmp_path / "s.db"))
    assert main(["store", "stats"]) == 1, "no store yet: nothing found, and none created"
    assert "no store at" in capsys.readouterr().err
    assert main(["memory", "list"]) == 0
    assert main(["store", "stats"]) == 0
    assert main(["skills", "probe"]) == 0
    out = capsys.readouterr().out
    for repr_sign in ("True", "False", "None", "{'", "['"):
        assert repr_sign not in out, out
    assert "not applicable" in out and "knowledge_dir" in out, "the probe explained under rules"


def test_a_bad_config_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "dta.toml"
    bad.write_text("provider = 'gpt'\n", encoding="utf-8")
    assert main(["--config", str(bad), "store", "stats"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dta: ") and "provider" in err and "Traceback" not in err


def test_probe_verdicts_are_words():
    assert probe_verdict(ProbeResult("rules", "M", None, ""))[0] == "not applicable"
    assert probe_verdict(ProbeResult("openai", "M", True, "M"))[0] == "loaded"
    assert probe_verdict(ProbeResult("openai", "M", False, "no"))[0] == "NOT loaded"


def test_doctor_tells_dns_network_and_timeouts_apart():
    import socket

    import httpx

    def connect_error(cause: BaseException) -> httpx.ConnectError:
        try:
            raise httpx.ConnectError("failed") from cause
        except httpx.ConnectError as exc:
            return exc

    url = "https://api.dingtalk.com/v1.0/oauth2/accessToken"
    dns = network_failure("access token", url, connect_error(socket.gaierror(-2, "unknown")))
    refused = network_failure("access token", url, connect_error(ConnectionRefusedError()))
    slow = network_failure("access token", url, httpx.ConnectTimeout("slow"))
    assert (dns.cause, refused.cause, slow.cause) == ("dns", "network", "network")
    assert "does not resolve" in dns.detail and "DNS" in dns.fix
    assert "did not answer in time" in slow.detail
    assert len({dns.fix, refused.fix}) == 2, "one cause, one fix"


def test_doctor_names_the_file_and_variables_never_values(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dta.toml").write_text("", encoding="utf-8")
    read = sources(None, {"DINGTALK_CLIENT_SECRET": "s3cret", "HOME": "/root"})
    assert read == {
        "config_file": str((tmp_path / "dta.toml").resolve()),
        "environment": ["DINGTALK_CLIENT_SECRET"],
    }
    assert "s3cret" not in json.dumps(read)


def test_every_reliability_script_is_offered():
    assert set(cli.RELIABILITY) >= {"storm", "crashloop", "chaos", "soak", "storefaults"}
