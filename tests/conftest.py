"""Shared fixtures: the storage suite runs against both backends; ``respx`` sees our
HTTP connections.

``store`` (and ``store_target``, ``store_settings``) are parametrized over SQLite (a file in
``tmp_path``) and PostgreSQL (a fresh schema on the machine's server, dropped afterwards).
A PostgreSQL that cannot be reached skips those tests locally, with the reason; under CI
(``CI=true``) it fails them: a backend that was never exercised is not a green run.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from respx.mocks import HTTPCoreMocker

from storage import Store
from tests.environment import unavailable

# The daemon's requests go over its own HTTP/1.1 connection (agent/dingtalk/http_wire.py), which
# keeps httpcore's interface: ``respx.mock`` patches it like httpcore's own connections.
HTTPCoreMocker.add_targets("agent.dingtalk.http_wire.WireConnection")

PG_URL = os.environ.get("DTA_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")


def require_postgres() -> None:
    try:
        psycopg.connect(PG_URL, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL at {PG_URL} unreachable: {str(exc).strip()[:200]}")


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh PostgreSQL schema for one test, dropped afterwards."""
    require_postgres()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    yield schema
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[str, str | None]:
    """(where, schema): a SQLite file, or the PostgreSQL URL and a fresh schema."""
    if request.param == "sqlite":
        return str(tmp_path / "dta.db"), None
    return PG_URL, request.getfixturevalue("pg_schema")


@pytest.fixture
def store_settings(store_target: tuple[str, str | None]) -> dict[str, Any]:
    """Settings overrides that put a runtime on the parametrized store."""
    where, schema = store_target
    if schema is None:
        return {"store_path": where}
    return {"store_url": where, "store_schema": schema}


@pytest.fixture
def store(store_target: tuple[str, str | None]) -> Iterator[Store]:
    where, schema = store_target
    opened = Store(where, schema=schema)
    yield opened
    opened.close()


# ------------------------------------------------------------------ the fast subset
# Slow means a test starts processes, opens sockets to a daemon, drives a browser, runs a
# whole lab suite or a property-based search: seconds each, minutes together. The marks
# are kept in one list, measured with `pytest --durations`, so `pytest -m "not slow"` (the
# inner loop) leaves out exactly these; a module may also mark itself with `pytestmark`.
SLOW_MODULES = (
    "integration/",
    "test_fuzz_ingest.py",
)
SLOW_TESTS = (
    "test_lab_eval.py::test_every_case_passes_and_reports_are_written",
    "test_lab_eval.py::test_gate_answering_unmentioned_group_messages_fails_named_cases",
    "test_lab_eval.py::test_webhook_used_after_expiry_fails_the_expired_webhook_cases",
    "test_lab_eval.py::test_gate_without_generation_check_fails_the_burst_case",
    "test_lab_eval.py::test_gate_without_write_budget_fails_budget_cases",
    "test_lab_eval.py::test_a_folder_without_cases_is_an_error_naming_it",
    "test_lab_eval.py::test_a_missing_path_is_an_error_naming_it",
    "test_store_queue.py::test_a_lock_held_past_the_busy_timeout_is_waited_out_by_the_recovery",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.nodeid.removeprefix("tests/")
        if where.startswith(SLOW_MODULES) or where.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
