"""An act's identity: the same act however a model words it, never two acts merged."""

import pytest

from agent.acts.authority import authorize
from agent.acts.identity import identity_of, same_object
from agent.contracts import Origin, ToolSpec
from agent.tools.builtin import BUILTIN
from tests.factories import T0, event


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("续费域名", "续费公司域名"),
        ("续费域名", "域名续费"),
        ("交 周报！", "交周报"),
        ("Renew Domain", "renew domain"),
    ],
)
def test_wordings_of_one_object(a, b):
    assert same_object(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("买咖啡豆", "买咖啡杯"),
        ("开会", "开会准备"),
        ("buy milk", "buy milk and eggs"),
        ("写周报", "写月报"),
    ],
)
def test_different_objects(a, b):
    assert not same_object(a, b)


ORIGIN = Origin.of(event(user="u1"))


def ident(tool, arguments, spec: ToolSpec | None = None):
    auth = authorize(spec or BUILTIN[tool], arguments, ORIGIN, T0, 600)
    return identity_of(auth, arguments)


def test_an_added_argument_or_the_asker_among_the_people_is_the_same_act():
    first = ident("dingtalk.todo.create", {"subject": "续费域名", "executors": ["u2"]})
    again = ident(
        "dingtalk.todo.create",
        {"subject": "续费公司域名", "executors": ["u1", "u2"], "due": "2026-01-09T18:00:00+08:00"},
    )
    assert first.same_as(again)


def test_other_times_other_people_or_another_to_do_are_other_acts():
    meeting = {"summary": "周会", "attendees": ["u1"]}
    fifth = {**meeting, "start": "2026-01-05T10:00:00+08:00", "end": "2026-01-05T11:00:00+08:00"}
    twelfth = {**meeting, "start": "2026-01-12T10:00:00+08:00", "end": "2026-01-12T11:00:00+08:00"}
    tool = "dingtalk.calendar.create_event"
    assert not ident(tool, fifth).same_as(ident(tool, twelfth))
    utc = {**fifth, "start": "2026-01-05T02:00:00Z", "end": "2026-01-05T03:00:00Z"}
    assert ident(tool, fifth).same_as(ident(tool, utc))  # one instant, written otherwise
    todo = "dingtalk.todo.create"
    assert not ident(todo, {"subject": "交周报", "executors": ["u2"]}).same_as(
        ident(todo, {"subject": "交周报", "executors": ["u3"]})
    )
    done = "dingtalk.todo.complete"
    assert not ident(done, {"todo_id": "t1"}).same_as(ident(done, {"todo_id": "t2"}))


def test_an_mcp_tool_compares_every_argument():
    spec = ToolSpec(
        name="mcp.bank.transfer",
        description="pay",
        parameters={"type": "object", "properties": {}},
        effect="write",
        reversible=False,
        people_args=[],
    )
    hundred = ident(spec.name, {"amount": 100, "to": "acct-12"}, spec)
    thousand = ident(spec.name, {"amount": 1000, "to": "acct-12"}, spec)
    assert not hundred.same_as(thousand)
    assert hundred.same_as(ident(spec.name, {"amount": 100, "to": "acct-12"}, spec))
