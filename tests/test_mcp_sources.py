"""MCP servers as tool sources: the lab's fake notebook over stdio, a server that will not
start, and one that dies; reads answer as data, a dead server's tools are absent; a stdio
server gets none of the daemon's secrets."""

import os
import signal

import pytest

from agent.cli.doctor import mcp_checks
from agent.config import McpServer, Settings
from agent.tools.catalog import ToolCatalog
from agent.tools.mcp.sources import McpSources, split_name

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def notes(**kw) -> McpServer:
    return McpServer(
        name="notes",
        python_module="lab.models.fake_mcp",
        reads=["read_note", "environment_names"],
        env={"DTA_FAKE_MCP_SEED": '{"plan": "周一 评审"}'},
        **kw,
    )


async def test_tools_are_classed_by_configuration_and_reads_answer_as_data():
    sources = McpSources([notes()])
    await sources.start()
    try:
        (report,) = sources.report()
        assert report["status"] == "ready"
        assert report["tools"] == {
            "mcp.notes.append_note": "write",
            "mcp.notes.environment_names": "read",
            "mcp.notes.read_note": "read",
            "mcp.notes.slow_append": "write",
        }
        write = sources.spec("mcp.notes.append_note")
        assert write.effect == "write" and write.reversible is False  # unclassed: a write
        assert "name" in write.parameters["properties"] and "title" not in write.parameters
        answer = await sources.call("mcp.notes.read_note", {"name": "plan"})
        assert answer.ok and "周一 评审" in str(answer.data)
        assert ToolCatalog(sources).spec("dingtalk.todo.list") is not None
    finally:
        await sources.aclose()


async def test_a_server_that_will_not_start_is_reported_and_offers_nothing():
    broken = McpServer(name="broken", command=["/bin/false"], start_timeout_s=5)
    sources = McpSources([broken, notes()])
    await sources.start()
    try:
        status = {r["server"]: r["status"] for r in sources.report()}
        assert status["broken"].startswith("failed") and status["notes"] == "ready"
        assert sources.spec("mcp.broken.anything") is None
        answer = await sources.call("mcp.broken.anything", {})
        assert not answer.ok and answer.error == "mcp_unavailable"
    finally:
        await sources.aclose()


async def test_a_server_that_dies_leaves_its_tools_absent():
    sources = McpSources([notes(call_timeout_s=3)])
    await sources.start()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        mine = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"lab.models.fake_mcp" in f.read() and int(pid) != os.getpid():
                        mine.append(int(pid))
            except OSError:
                continue
        assert mine, "the fake MCP server runs as a subprocess"
        for pid in mine:
            os.kill(pid, signal.SIGKILL)
        answer = await sources.call("mcp.notes.read_note", {"name": "plan"})
        assert not answer.ok
        assert sources.spec("mcp.notes.read_note") is None  # absent from the next run
        assert sources.report()[0]["status"].startswith("dead")
    finally:
        await sources.aclose()


# the daemon's secrets as they are named in its environment (agent/config/loading.py)
SECRETS = [
    "DINGTALK_CLIENT_SECRET",
    "DTA_ROBOT_HR_CLIENT_SECRET",
    "DTA_STORE_URL",
    "DTA_OPENAI_API_KEY",
    "OPENAI_API_KEY",
]


async def test_a_stdio_server_gets_none_of_the_daemons_secrets(monkeypatch):
    for name in SECRETS:
        monkeypatch.setenv(name, "s3cret")
    monkeypatch.setenv("NOTES_REGION", "cn-hangzhou")
    sources = McpSources([notes(pass_env=["NOTES_REGION", "NOTES_UNSET"])])
    await sources.start()
    try:
        answer = await sources.call("mcp.notes.environment_names", {})
        assert answer.ok, answer
        names = set(answer.data["result"])
        assert not names & set(SECRETS)
        assert {"NOTES_REGION", "DTA_FAKE_MCP_SEED", "PATH"} <= names  # pass_env, env, harmless
        assert "NOTES_UNSET" not in names and "s3cret" not in str(answer.data)
    finally:
        await sources.aclose()


def test_doctor_warns_of_dtas_own_variables_in_pass_env(monkeypatch):
    monkeypatch.setenv("DTA_STORE_URL", "postgresql://dta:pw@db/dta")
    named = notes(pass_env=["DTA_STORE_URL"])
    (check,) = mcp_checks(Settings(mcp_servers=[named]))
    assert check.ok and "warning: pass_env gives it DTA_STORE_URL" in check.detail
    assert "pw@" not in check.detail
    (plain,) = mcp_checks(Settings(mcp_servers=[notes()]))
    assert plain.ok and "warning" not in plain.detail


def test_names_split_into_server_and_tool():
    assert split_name("mcp.notes.read_note") == ("notes", "read_note")
    assert split_name("mcp.notes") is None and split_name("dingtalk.todo.list") is None


async def test_a_server_over_streamable_http():
    import asyncio
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "DTA_FAKE_MCP_SEED": '{"plan": "周二 上线"}'}
    server = subprocess.Popen(
        [sys.executable, "-m", "lab.models.fake_mcp", "--http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):  # until it listens
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        config = McpServer(name="notes", url=f"http://127.0.0.1:{port}/mcp", reads=["read_note"])
        sources = McpSources([config])
        await sources.start()
        try:
            assert sources.report()[0]["status"] == "ready"
            answer = await sources.call("mcp.notes.read_note", {"name": "plan"})
            assert answer.ok and "周二 上线" in str(answer.data)
        finally:
            await sources.aclose()
    finally:
        server.kill()
        server.wait(10)


async def test_a_stdio_server_starts_when_sys_stderr_has_no_descriptor(monkeypatch):
    # a test's capture or an embedding host may replace sys.stderr with a stream that has no
    # file descriptor; the child still needs one for its stderr (it once failed "fileno")
    import io

    monkeypatch.setattr("sys.stderr", io.StringIO())
    sources = McpSources([notes()])
    await sources.start()
    try:
        (report,) = sources.report()
        assert report["status"] == "ready"
    finally:
        await sources.aclose()
