"""``dta run`` and its store, as operators meet them: start-up refusals on one line, and a
store deleted under a running daemon (subprocesses, real sockets, the fake DingTalk)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path

import httpx

from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk
from storage import Store
from storage.lock import StoreLock, claim_store
from tests.test_store_integrity import corrupt_middle, fill, read_only

ROOT = Path(__file__).resolve().parents[2]


async def dta_run(*args: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    return await dta("run", *args, env=env, timeout=timeout)


async def dta(*args: str, env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent.cli.main",
        *args,
        cwd=ROOT,
        env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


def offline_env(store: Path) -> dict[str, str]:
    """Enough to get past the config check; a refusal happens before anything connects."""
    return {
        "DINGTALK_CLIENT_ID": "app",
        "DINGTALK_CLIENT_SECRET": "secret",
        "DINGTALK_OPENAPI_ENDPOINT": "http://127.0.0.1:9",
        "DTA_STORE_PATH": str(store),
        "DTA_HEALTH_PORT": "0",
    }


def assert_one_line(code: int, output: str, *fragments: str) -> None:
    lines = output.strip().splitlines()
    assert code == 2, output
    assert len(lines) == 1 and lines[0].startswith("dta: "), output
    assert "Traceback" not in output
    for fragment in fragments:
        assert fragment in lines[0], output


def remove_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def test_run_refuses_while_another_daemon_holds_the_store(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    with StoreLock(path):
        code, output = await dta_run(env=offline_env(path))
    assert_one_line(code, output, "in use", f"pid {os.getpid()}", "since")


async def test_a_second_daemon_on_another_name_of_the_store_is_refused(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    """One daemon on d1/dta.db; a second started on a symlink and on a hard link to it is
    refused in one line, and the first goes on answering on an intact store."""
    daemon = DaemonProcess(fake, tmp_path / "d1")
    await daemon.start()
    try:
        fake.inject({"msg": "m1", "from": "u1", "text": "7 + 5 等于多少"})
        assert await until(lambda: len(fake.received) == 1, 10), daemon.log_tail()
        (tmp_path / "d2").mkdir()
        symlink, hard = tmp_path / "d2" / "sym.db", tmp_path / "d2" / "hard.db"
        symlink.symlink_to(daemon.store_path)
        os.link(daemon.store_path, hard)
        for other in (symlink, hard):
            env = {**daemon._env(), "DTA_STORE_PATH": str(other), "DTA_HEALTH_PORT": "0"}
            code, output = await dta_run("--config", str(daemon.config_path), env=env)
            assert_one_line(code, output, "in use by another dta run")
        assert not Path(f"{hard}-wal").exists(), "the refusal came before SQLite opened it"
        fake.inject({"msg": "m2", "from": "u2", "text": "8 + 5 等于多少"})
        assert await until(lambda: len(fake.received) == 2, 10), daemon.log_tail()
    finally:
        await daemon.stop()
    with sqlite3.connect(daemon.store_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert [m.text for m in fake.received] == ["7 + 5 = 12", "8 + 5 = 13"]


async def test_other_commands_open_the_store_without_the_daemons_lock(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    with claim_store(path):
        code, output = await dta("store", "stats", env=offline_env(path))
    assert code == 0 and "0 events" in output, output


async def test_store_commands_refuse_a_corrupt_store_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    path.write_bytes(os.urandom(16_384))
    code, output = await dta("store", "stats", env=offline_env(path))
    assert_one_line(code, output, "store_corrupt")


async def test_run_refuses_a_missing_store_that_existed(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    claim_store(path).release()  # a daemon ran here before
    remove_store(path)
    code, output = await dta_run(env=offline_env(path))
    assert_one_line(code, output, "missing", "--new-store")
    assert not path.exists()


async def test_run_refuses_a_corrupt_store(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    with Store(path) as store:
        fill(store)
    corrupt_middle(path)
    code, output = await dta_run(env=offline_env(path))
    assert_one_line(code, output, "corrupt", str(path))


async def test_run_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    path.write_bytes(os.urandom(16_384))
    code, output = await dta_run(env=offline_env(path))
    assert_one_line(code, output, "store_corrupt", str(path))


async def test_run_refuses_a_store_from_a_newer_dta(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    code, output = await dta_run(env=offline_env(path))
    assert_one_line(code, output, "newer than this dta")


async def test_run_refuses_a_read_only_store(tmp_path: Path) -> None:
    path = tmp_path / "dta.db"
    claim_store(path).release()
    with read_only(path):
        code, output = await dta_run(env=offline_env(path))
    assert_one_line(code, output, "store_readonly", str(path))


# ---------------------------------------------------------------------- under a daemon


async def wait_exit(daemon: DaemonProcess, timeout: float) -> int | None:
    assert daemon.proc is not None
    try:
        return await asyncio.wait_for(daemon.proc.wait(), timeout)
    except TimeoutError:
        return None


async def test_a_deleted_store_stops_acking_exits_and_the_restart_refuses(
    fake: FakeDingTalk, tmp_path: Path
) -> None:
    daemon = DaemonProcess(fake, tmp_path, {"log_level": "INFO"})
    await daemon.start()
    try:
        fake.inject({"msg": "m1", "from": "u1", "text": "7 + 5 等于多少"})
        assert await until(lambda: len(fake.received) == 1, 10), daemon.log_tail()
        assert await fake.wait_acked(["m1"], timeout=5)

        remove_store(daemon.store_path)
        async with httpx.AsyncClient(trust_env=False) as client:
            ready = await client.get(daemon.url("/readyz"), timeout=2)
        assert ready.status_code == 503, ready.text
        assert ready.json()["store"]["problem"] == "store_deleted"
        for i in (2, 3):
            fake.inject({"msg": f"m{i}", "from": f"u{i}", "text": f"{i} + 1 等于多少"})

        assert await wait_exit(daemon, 20) == 3, daemon.log_tail()
        assert not fake.stream.acked("m2") and not fake.stream.acked("m3")
        assert len(fake.received) == 1
        lost = [line for line in daemon.log_tail(20_000).splitlines() if "store lost" in line]
        assert len(lost) == 1 and "store_deleted" in lost[0], daemon.log_tail()
        assert "Traceback" not in daemon.log_tail(20_000)
    finally:
        await daemon.stop()

    env = daemon._env()
    code, output = await dta_run("--config", str(daemon.config_path), env=env)
    assert_one_line(code, output, "missing", "--new-store")

    # Told to, it starts on an empty store and answers what was never acked, once.
    try:
        await daemon.start(30, "--new-store")
        assert await until(lambda: len(fake.received) == 3, 15)
        await asyncio.sleep(1.5)
        texts = sorted(m.text for m in fake.received)
        assert texts == ["2 + 1 = 3", "3 + 1 = 4", "7 + 5 = 12"], texts
    finally:
        await daemon.stop()
