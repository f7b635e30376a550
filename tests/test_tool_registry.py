"""One home for tools: each built-in workspace tool is one module of agent/tools/workspace/
(its ``TOOL``: spec and call), found by name; acts look tools up there."""

from __future__ import annotations

import pkgutil

from agent.acts.authority import authorize
from agent.acts.identity import identity_of
from agent.acts.shown import readable
from agent.contracts import Origin
from agent.tools import workspace
from agent.tools.base import ReadTool, WriteTool
from agent.tools.builtin import BUILTIN, READ_TOOLS, READS, TOOLS, WRITES
from agent.tools.registry import RunTools
from tests import factories


def test_every_workspace_module_is_one_tool_found_by_name() -> None:
    modules = [info.name for info in pkgutil.iter_modules(workspace.__path__)]
    assert len(modules) == len(TOOLS) == 6
    assert set(BUILTIN) == set(TOOLS) == set(READS) | set(WRITES)
    assert {
        "dingtalk.directory.search",
        "dingtalk.calendar.free_busy",
        "dingtalk.todo.list",
    } == READ_TOOLS
    for name, tool in TOOLS.items():
        assert tool.spec.name == name
        assert isinstance(tool, ReadTool) == (tool.spec.effect == "read")
        assert isinstance(tool, WriteTool) == (tool.spec.effect == "write")


def test_a_write_tool_holds_its_people_and_its_object() -> None:
    create = WRITES["dingtalk.todo.create"]
    assert create.people("u1", {"executors": ["u2"]}) == ["u1", "u2"]
    assert create.people("u1", {}) == ["u1"]
    assert (create.object_arg, create.object_is_wording) == ("subject", True)
    assert WRITES["dingtalk.todo.complete"].touches is not None
    assert WRITES["dingtalk.calendar.create_event"].touches is None


def test_acts_read_the_tool_for_identity_and_words() -> None:
    origin = Origin.of(factories.event(user="u1"))
    arguments = {"todo_id": "t1"}
    auth = authorize(BUILTIN["dingtalk.todo.complete"], arguments, origin, factories.T0, 600)
    identity = identity_of(auth, arguments)
    assert (identity.object, identity.loose) == ("t1", False)
    shown = readable("dingtalk.todo.create", {"subject": "交报告"}, {}, "Asia/Shanghai")
    assert shown == [("主题", "交报告"), ("执行人", "你自己")]


def test_a_run_view_builds_no_calls_of_its_own() -> None:
    tools = RunTools(list(BUILTIN), object(), factories.event(user="u1"))
    assert tools.enabled == list(BUILTIN)
    assert not [value for value in vars(tools).values() if callable(value)]
