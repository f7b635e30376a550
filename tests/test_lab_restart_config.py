"""Two keys lab-cases.md fixes for the "acts told truly" work: ``restart.config`` (overrides
applied from that restart on, in both runners) and ``fixtures.todos[].id`` (the id the fake
gives a seeded to-do, so a scripted model can name it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.clock import VirtualClock
from lab.eval.cases import CaseError, load_case
from lab.eval.runner import run_case
from lab.fake import FakeDingTalk

BASE: dict[str, Any] = {
    "schema": "dta.lab.case/1",
    "id": "x",
    "category": "host-loading",
    "title": "t",
    "steps": [{"at": 0, "send": {"msg": "m1", "from": "u1", "text": "hi"}}],
    "expect": {"platform": {"count": 1}},
}


def _write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def _send(msg: str, at: float, text: str) -> dict[str, Any]:
    return {"at": at, "send": {"msg": msg, "from": "u1", "text": text}}


def _restart(at: float, **spec: Any) -> dict[str, Any]:
    return {"at": at, "restart": spec}


# ------------------------------------------------------------------ restart.config: the file


@pytest.mark.parametrize(
    ("restart", "complaint"),
    [
        ({"config": {"pasued": True}}, "pasued"),  # a typo of a config key
        ({"config": {"paused": "yes please"}}, "paused"),  # a value that is no bool
        ({"config": {"max_event_age_s": "soon"}}, "max_event_age_s"),
        ({"crash": "after_send", "config": {"provder": "rules"}}, "provder"),
    ],
)
def test_a_bad_restart_config_makes_the_file_invalid_naming_field_and_reason(
    tmp_path, restart, complaint
):
    steps = [_send("m1", 0, "hi"), _restart(5, **restart)]
    path = _write(tmp_path, {**BASE, "steps": steps})
    with pytest.raises(CaseError) as info:
        load_case(path)
    message = str(info.value)
    assert str(path) in message
    assert "field 'steps.1.restart.config'" in message
    assert complaint in message


def test_restart_config_must_be_an_object_and_restart_takes_no_other_key(tmp_path):
    for restart, field in (
        ({"config": ["paused"]}, "steps.1.restart.config"),
        ({"confg": {"paused": True}}, "steps.1.restart"),
    ):
        path = _write(tmp_path, {**BASE, "steps": [_send("m1", 0, "hi"), _restart(5, **restart)]})
        with pytest.raises(CaseError, match=field.replace(".", r"\.")):
            load_case(path)


def test_restart_configs_are_checked_merged_over_the_case_and_earlier_restarts(tmp_path):
    # Each restart's keys go over the case's config and every earlier restart's; the
    # configuration each start runs with is what is validated.
    steps = [
        _send("m1", 0, "hi"),
        _restart(5, config={"paused": True, "deny_users": ["u9"]}),
        _restart(10, crash="after_send", config={"paused": False}),
    ]
    case = load_case(_write(tmp_path, {**BASE, "config": {"provider": "rules"}, "steps": steps}))
    assert case.configs() == [
        {"provider": "rules"},
        {"provider": "rules", "paused": True, "deny_users": ["u9"]},
        {"provider": "rules", "paused": False, "deny_users": ["u9"]},
    ]
    # the restart's override is checked against the whole configuration, not alone
    bad = [_send("m1", 0, "hi"), _restart(5, config={"write_budget_per_day": -1})]
    with pytest.raises(CaseError, match=r"steps\.1\.restart\.config.*write_budget_per_day"):
        load_case(_write(tmp_path, {**BASE, "steps": bad}))


# ------------------------------------------------------------------ restart.config: running


def _pause_case(tmp_path: Path, first_restart: dict[str, Any]) -> dict[str, Any]:
    return {
        **BASE,
        "id": "pause-by-restart",
        "steps": [
            _send("m1", 0, "1 + 1 等于几"),
            _restart(5, **first_restart),
            _send("m2", 10, "2 + 2 等于几"),
            _restart(15, config={"paused": False}),
            _send("m3", 20, "3 + 3 等于几"),
        ],
        "expect": {
            "platform": {
                "count": 2,
                "messages": [{"contains": ["2"]}, {"contains": ["6"]}],
            },
            "decisions": {
                "m1": {"verdict": "engage", "reason": "dm"},
                "m2": {"verdict": "silent", "reason": "paused"},
                "m3": {"verdict": "engage", "reason": "dm"},
            },
        },
    }


async def test_paused_from_a_restart_silences_and_a_later_restart_resumes(tmp_path):
    case = load_case(_write(tmp_path, _pause_case(tmp_path, {"config": {"paused": True}})))
    result = await run_case(case)
    assert result.error is None, result.error
    assert result.passed, [str(p) for p in result.problems]


async def test_without_the_override_the_same_case_fails(tmp_path):
    # The evidence is the override's doing: a restart without it answers m2.
    case = load_case(_write(tmp_path, _pause_case(tmp_path, {})))
    result = await run_case(case)
    failed = {problem.name for problem in result.problems}
    assert "decisions.m2" in failed and "platform.count" in failed


async def test_a_crash_restart_applies_its_config_when_the_runtime_starts_again(tmp_path):
    # The crash point is armed with the config: the runtime dies after m1's reply reached
    # the platform, starts again paused, and m2 is silent; m1 was not sent twice.
    document = {
        **BASE,
        "id": "pause-after-crash",
        "steps": [
            _restart(0, crash="after_send", config={"paused": True}),
            _send("m1", 1, "1 + 1 等于几"),
            _send("m2", 10, "2 + 2 等于几"),
        ],
        "expect": {
            "platform": {"count": 1, "messages": [{"contains": ["2"]}]},
            "decisions": {
                "m1": {"verdict": "engage", "reason": "dm"},
                "m2": {"verdict": "silent", "reason": "paused"},
            },
        },
    }
    result = await run_case(load_case(_write(tmp_path, document)))
    assert result.error is None, result.error
    assert result.passed, [str(p) for p in result.problems]


async def test_a_crash_config_waits_for_the_crash(tmp_path):
    # Armed but not yet hit, the crash's config is not in force: m1 before the crash is
    # answered by the running runtime.
    document = {
        **BASE,
        "id": "crash-config-waits",
        "steps": [
            _restart(0, crash="after_send", config={"paused": True}),
            _send("m1", 1, "1 + 1 等于几"),
        ],
        "expect": {
            "platform": {"count": 1},
            "decisions": {"m1": {"verdict": "engage", "reason": "dm"}},
        },
    }
    result = await run_case(load_case(_write(tmp_path, document)))
    assert result.passed, [str(p) for p in result.problems] or result.error


# ------------------------------------------------------------------ fixtures.todos[].id


def test_a_seeded_todo_is_held_with_its_explicit_id(tmp_path):
    todos = [
        {"subject": "交周报", "executors": ["u1", "u2"], "id": "todo-shared"},
        {"subject": "评审设计稿", "executors": ["u1"]},
    ]
    case = load_case(_write(tmp_path, {**BASE, "fixtures": {"todos": todos}}))
    fake = FakeDingTalk(VirtualClock(1_767_225_600.0), users={"u1": {"name": "张三"}})
    fake.seed_todos([todo.seed() for todo in case.fixtures.todos])
    held = fake.workspace_view()["todos"]
    assert held[0]["id"] == "todo-shared" and held[0]["subject"] == "交周报"
    assert sorted(held[0]["executors"]) == ["u1", "u2"]
    assert held[1]["id"] != "todo-shared" and held[1]["id"]  # one of the fake's own
    # the fake's to-do API finds it by that id
    assert fake.workspace.todo("todo-shared") is fake.workspace.todos[0]


def test_a_todo_id_given_twice_makes_the_file_invalid(tmp_path):
    todos = [
        {"subject": "交周报", "executors": ["u1"], "id": "todo-1"},
        {"subject": "评审", "executors": ["u2"], "id": "todo-1"},
    ]
    path = _write(tmp_path, {**BASE, "fixtures": {"todos": todos}})
    with pytest.raises(CaseError) as info:
        load_case(path)
    assert "fixtures.todos" in str(info.value) and "todo-1" in str(info.value)
    # an empty id names nothing
    empty = [{"subject": "交周报", "executors": ["u1"], "id": ""}]
    with pytest.raises(CaseError, match=r"fixtures\.todos\.0\.id"):
        load_case(_write(tmp_path, {**BASE, "fixtures": {"todos": empty}}))


def test_the_fake_refuses_two_seeded_todos_with_one_id():
    fake = FakeDingTalk(VirtualClock(1_767_225_600.0))
    fake.seed_todos([{"subject": "a", "executors": ["u1"], "id": "t"}])
    with pytest.raises(ValueError, match="'t'"):
        fake.seed_todos([{"subject": "b", "executors": ["u1"], "id": "t"}])


COMPLETE = "dingtalk.todo.complete"


async def test_a_scripted_model_completes_a_seeded_todo_by_its_id(tmp_path):
    document = {
        **BASE,
        "id": "complete-seeded-by-id",
        "category": "workspace-and-artifacts",
        "config": {"provider": "openai", "tools": [COMPLETE]},
        "fixtures": {
            "users": {"u1": {"name": "李四"}},
            "todos": [
                {"subject": "评审设计稿", "executors": ["u1"]},
                {"subject": "交周报", "executors": ["u1"], "id": "todo-mine"},
            ],
            "model_script": {
                "m1": [
                    {"tool_calls": [{"name": COMPLETE, "arguments": {"todo_id": "todo-mine"}}]},
                    {"json": {"kind": "reply", "text": "「交周报」已标记完成。"}},
                ]
            },
        },
        "steps": [_send("m1", 0, "把交周报那条待办标记完成")],
        "expect": {
            "platform": {
                "todos": [
                    {"contains": ["评审设计稿"], "done": False},
                    {"contains": ["交周报"], "done": True},
                ],
                "todos_count": 2,
            },
            "receipts": [{"msg": "m1", "kind": "act", "status": "verified"}],
        },
    }
    result = await run_case(load_case(_write(tmp_path, document)))
    assert result.error is None, result.error
    assert result.passed, [str(p) for p in result.problems]
