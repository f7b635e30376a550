"""The fake DingTalk's workspace over real loopback HTTP: directory, to-do, calendar.

A workspace tool is only as well tested as this fake is faithful: the unionIds the to-do
and calendar APIs take, their answers' shapes, the repeats that must not make a second
object, and the faults (applied then silent, no permission, throttled) are pinned here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.clock import VirtualClock
from lab.eval.cases import TodoFixture, load_case
from lab.eval.judge import workspace_findings
from lab.fake import FakeDingTalk
from lab.fake.calls import call_counts

START = 1_767_225_600.0
USERS: dict[str, dict[str, Any]] = {
    "u1": {"name": "张三", "title": "工程师", "union_id": "UNION-ZS"},
    "u2": {"name": "张三丰", "title": "顾问"},
    "u3": {"name": "李四"},
}
T9 = "2026-01-02T09:00:00.000Z"
T10 = "2026-01-02T10:00:00.000Z"

slow = pytest.mark.slow  # sockets: a started server on loopback


@pytest.fixture
async def fake() -> AsyncIterator[FakeDingTalk]:
    platform = FakeDingTalk(VirtualClock(START), timeout_fault_s=0.2, users=USERS)
    await platform.start()
    try:
        yield platform
    finally:
        await platform.stop()


@pytest.fixture
async def api(fake: FakeDingTalk) -> AsyncIterator[httpx.AsyncClient]:
    """A client carrying a token the fake issued, the way every ``/v1.0`` call needs it."""
    async with httpx.AsyncClient(base_url=fake.base_url, trust_env=False, timeout=5.0) as client:
        answer = await client.post(
            "/v1.0/oauth2/accessToken",
            json={"appKey": fake.app_key, "appSecret": fake.app_secret},
        )
        token = answer.json()["accessToken"]
        client.headers["x-acs-dingtalk-access-token"] = token
        client.params = {"access_token": token}  # the oapi way, harmless on /v1.0
        yield client


TASKS = "/v1.0/todo/users/UNION-ZS/tasks"
EVENTS = "/v1.0/calendar/users/UNION-ZS/calendars/primary/events"


async def _todo(api: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await api.post(TASKS, params={"operatorId": "UNION-ZS"}, json=body)


def _event(summary: str = "周会", start: str = T9, end: str = T10, **more: Any) -> dict[str, Any]:
    return {
        "summary": summary,
        "start": {"dateTime": start, "timeZone": "UTC"},
        "end": {"dateTime": end, "timeZone": "UTC"},
        **more,
    }


@slow
async def test_search_by_name_answers_staff_ids_in_pages(api: httpx.AsyncClient) -> None:
    first = (
        await api.post(
            "/v1.0/contact/users/search", json={"queryWord": "张三", "offset": 0, "size": 1}
        )
    ).json()
    assert first == {"hasMore": True, "totalCount": 2, "list": ["u1"]}
    rest = await api.post(
        "/v1.0/contact/users/search", json={"queryWord": "张三", "offset": 1, "size": 20}
    )
    assert rest.json() == {"hasMore": False, "totalCount": 2, "list": ["u2"]}
    too_big = await api.post(
        "/v1.0/contact/users/search", json={"queryWord": "张", "offset": 0, "size": 21}
    )
    assert too_big.status_code == 400


@slow
async def test_union_ids_given_derived_and_converted_back(api: httpx.AsyncClient) -> None:
    given = (await api.post("/topapi/v2/user/get", json={"userid": "u1"})).json()["result"]
    derived = (await api.post("/topapi/v2/user/get", json={"userid": "u2"})).json()["result"]
    assert given["unionid"] == "UNION-ZS" and given["name"] == "张三"
    assert derived["unionid"] == "union-u2" and derived["title"] == "顾问"
    assert "dept_id_list" in derived
    back = (await api.post("/topapi/user/getbyunionid", json={"unionid": "union-u2"})).json()
    assert back["errcode"] == 0 and back["result"]["userid"] == "u2"
    nobody = (await api.post("/topapi/user/getbyunionid", json={"unionid": "union-u9"})).json()
    assert nobody["errcode"] == 60122


@slow
async def test_todo_create_get_list_complete_delete(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    created = await _todo(api, subject="写周报", executorIds=["UNION-ZS", "union-u3"], dueTime=1)
    assert created.status_code == 200
    task = created.json()
    assert task["creatorId"] == "UNION-ZS" and task["done"] is False and task["dueTime"] == 1
    assert (await api.get(f"{TASKS}/{task['id']}")).json()["subject"] == "写周报"
    listed = await api.post("/v1.0/todo/users/union-u3/tasks/list", json={"isDone": False})
    assert listed.json()["totalCount"] == 1
    assert listed.json()["todoCards"][0]["taskId"] == task["id"]
    done = await api.put(f"{TASKS}/{task['id']}", json={"done": True})
    assert done.json()["result"] is True
    assert (await api.post(f"{TASKS}/list", json={"isDone": False})).json()["totalCount"] == 0
    assert fake.workspace_view()["todos"][0]["executors"] == ["u1", "u3"]
    assert (await api.delete(f"{TASKS}/{task['id']}")).json()["result"] is True
    gone = await api.get(f"{TASKS}/{task['id']}")
    assert gone.status_code == 400 and "task not exist" in gone.json()["message"]
    assert call_counts(fake.request_log)["todo"] == 7


@slow
async def test_a_repeated_source_id_returns_the_first_todo(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    first = (await _todo(api, subject="订会议室", sourceId="act-1")).json()
    again = (await _todo(api, subject="订会议室", sourceId="act-1")).json()
    assert again["id"] == first["id"] and len(fake.workspace.todos) == 1
    found = await api.get(f"{TASKS}/sources/act-1")
    assert found.json()["id"] == first["id"]
    assert (await api.get(f"{TASKS}/sources/act-2")).status_code == 400
    assert (await _todo(api, description="no subject")).status_code == 400


@slow
async def test_calendar_create_repeat_get_and_free_busy(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    body = _event(attendees=[{"id": "union-u3"}], location={"displayName": "A 会议室"})
    first = await api.post(EVENTS, json=body, headers={"x-client-token": "k1"})
    again = await api.post(EVENTS, json=body, headers={"x-client-token": "k1"})
    assert first.status_code == 200 and again.json()["id"] == first.json()["id"]
    assert len(fake.workspace.events) == 1
    got = (await api.get(f"{EVENTS}/{first.json()['id']}")).json()
    assert got["attendees"] == [{"id": "union-u3", "responseStatus": "needsAction"}]
    assert got["location"] == {"displayName": "A 会议室"}
    schedule = await api.post(
        "/v1.0/calendar/users/UNION-ZS/querySchedule",
        json={"startTime": T9, "endTime": T10, "userIds": ["union-u3", "union-u2"]},
    )
    info = {i["userId"]: i["scheduleItems"] for i in schedule.json()["scheduleInformation"]}
    assert info["union-u2"] == [] and info["union-u3"][0]["status"] == "BUSY"
    view = fake.workspace_view()["events"][0]
    assert view["organizer"] == "u1" and view["attendees"] == ["u3"]
    assert call_counts(fake.request_log)["calendar"] == 4


@slow
async def test_times_without_milliseconds_are_refused(api: httpx.AsyncClient) -> None:
    answer = await api.post(EVENTS, json=_event(start="2026-01-02T09:00:00Z"))
    assert answer.status_code == 400
    assert answer.json()["code"] == "InvalidParameter.ParsedISO8601TimestampError"


@slow
async def test_applied_then_timeout_keeps_the_todo_and_never_answers(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    fake.arm_fault({"todo_create": {"error": "applied_then_timeout"}})
    with pytest.raises(httpx.ReadTimeout):
        await api.post(
            TASKS,
            json={"subject": "迟到的待办", "sourceId": "s1"},
            timeout=httpx.Timeout(5.0, read=0.3),
        )
    assert [t.subject for t in fake.workspace.todos] == ["迟到的待办"]
    assert (await api.get(f"{TASKS}/sources/s1")).status_code == 200


@slow
@pytest.mark.parametrize(
    ("spec", "status", "code"),
    [
        ({"error": "no_permission"}, 403, "Forbidden.AccessDenied"),
        ({"error": "throttled", "retry_after": 1}, 429, "Throttling"),
        ({"qps_limit": True}, 403, "Forbidden.AccessDenied.QpsLimitForApi"),
    ],
)
async def test_refusal_faults_keep_nothing(
    fake: FakeDingTalk, api: httpx.AsyncClient, spec: dict[str, Any], status: int, code: str
) -> None:
    fake.arm_fault({"calendar_create": spec, "todo_list": spec})
    refused = await api.post(EVENTS, json=_event())
    assert refused.status_code == status and refused.json()["code"] == code
    listed = await api.post(f"{TASKS}/list", json={})
    assert listed.status_code == status
    assert fake.workspace.events == []
    assert (await api.post(EVENTS, json=_event())).status_code == 200  # one use only


@slow
async def test_a_fault_spares_a_request_without_a_token(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    fake.arm_fault({"directory_search": {"status": 500}})
    bare = await api.post(
        "/v1.0/contact/users/search",
        json={"queryWord": "李", "offset": 0, "size": 5},
        headers={"x-acs-dingtalk-access-token": "wrong"},
    )
    assert bare.status_code == 401
    hit = await api.post(
        "/v1.0/contact/users/search", json={"queryWord": "李", "offset": 0, "size": 5}
    )
    assert hit.status_code == 500


@slow
async def test_control_route_shows_the_workspace(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    fake.seed_todos([{"subject": "已有的待办", "executors": ["u3"], "done": True}])
    shown = (await api.get("/_lab/workspace")).json()
    assert shown["todos"][0]["executors"] == ["u3"] and shown["todos"][0]["done"] is True
    assert shown["events"] == []
    assert call_counts(fake.request_log)["total"] == 1  # the token only; controls are free


@slow
async def test_seeded_todos_list_with_their_due_time(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    fixture = TodoFixture.model_validate({"subject": "交报销单", "executors": ["u1"], "due": T9})
    fake.seed_todos([fixture.seed()])
    cards = (await api.post(f"{TASKS}/list", json={"isDone": False})).json()["todoCards"]
    assert cards[0]["subject"] == "交报销单"
    assert cards[0]["dueTime"] == 1_767_344_400_000 and cards[0]["creatorId"] == "UNION-ZS"


def _at(hour: int, minute: int = 0, day: int = 2) -> str:
    return f"2026-01-{day:02d}T{hour:02d}:{minute:02d}:00.000Z"


async def _list(api: httpx.AsyncClient, user: str = "UNION-ZS", **query: Any) -> httpx.Response:
    return await api.get(f"/v1.0/calendar/users/{user}/calendars/primary/events", params=query)


@slow
async def test_calendar_list_answers_the_events_overlapping_the_window(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    token_note = "dta act key-1"
    mine = await api.post(
        EVENTS,
        json=_event("周会", _at(9), _at(10), description=token_note, extra={"act": "key-1"}),
        headers={"x-client-token": "key-1"},
    )
    await api.post(EVENTS, json=_event("午饭", _at(12), _at(13)))
    await api.post(EVENTS, json=_event("明天", _at(9, day=3), _at(10, day=3)))
    invited = await api.post(
        "/v1.0/calendar/users/union-u3/calendars/primary/events",
        json=_event("评审", _at(9, 30), _at(11), attendees=[{"id": "UNION-ZS"}]),
    )
    await api.post(EVENTS, json=_event("早会", _at(8), _at(9)))  # ends as the window opens
    listed = await _list(api, timeMin=_at(9), timeMax=_at(12))
    assert listed.status_code == 200
    body = listed.json()
    assert set(body) == {"events", "nextToken"} and body["nextToken"] is None
    assert [e["summary"] for e in body["events"]] == ["周会", "评审"]  # by start
    got = (await api.get(f"{EVENTS}/{mine.json()['id']}")).json()
    assert body["events"][0] == got  # each entry in GetEvent's shape
    # the description comes back, so a token written there can be matched; the
    # x-client-token and ``extra`` never do (GetEvent and ListEvents have no such field)
    assert got["description"] == token_note
    assert "extra" not in got and "key-1" not in json.dumps({**got, "description": ""})
    assert fake.workspace.events[0].extra == {"act": "key-1"}
    assert body["events"][1]["organizer"] == {"id": invited.json()["organizer"]["id"]}
    everything = (await _list(api)).json()["events"]  # no window: the whole calendar
    assert [e["summary"] for e in everything] == ["早会", "周会", "评审", "午饭", "明天"]
    assert (await _list(api, user="union-u2")).json() == {"events": [], "nextToken": None}
    assert call_counts(fake.request_log)["calendar"] == 9  # 5 creates, a get, 3 lists
    assert (await api.post(EVENTS, json=_event(extra={"n": 1}))).status_code == 400


@slow
async def test_calendar_list_pages_with_opaque_tokens(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    for hour in range(9, 14):
        await api.post(EVENTS, json=_event(f"会{hour}", _at(hour), _at(hour, 30)))
    window = {"timeMin": _at(0), "timeMax": _at(23), "maxResults": 2}
    seen: list[str] = []
    tokens: list[str | None] = []
    token: str | None = None
    for _ in range(3):
        page = (await _list(api, **window, **({"nextToken": token} if token else {}))).json()
        seen += [e["summary"] for e in page["events"]]
        token = page["nextToken"]
        tokens.append(token)
    assert seen == [f"会{h}" for h in range(9, 14)]
    assert tokens[2] is None and all(tokens[:2]) and tokens[0] != tokens[1]
    assert len((await _list(api, timeMin=_at(0))).json()["events"]) == 5  # default 100
    # a token is good only for the query that gave it
    other = await _list(api, timeMin=_at(1), timeMax=_at(23), maxResults=2, nextToken=tokens[0])
    assert other.status_code == 400 and other.json()["code"] == "InvalidParameter.nextToken"
    bad = [
        {"maxResults": 101},
        {"maxResults": 0},
        {"maxResults": "x"},
        {"timeMin": "2026-01-02T09:00:00Z"},  # no milliseconds
        {"timeMin": _at(10), "timeMax": _at(9)},
        {"nextToken": "made-up"},
    ]
    for query in bad:
        assert (await _list(api, **query)).status_code == 400, query


@slow
async def test_throttled_read_backs_refuse_then_answer(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    await _todo(api, subject="读回", sourceId="s1")
    fake.arm_fault(
        {
            "todo_get": {"error": "throttled", "retry_after": 2, "times": 2},
            "calendar_list": {"qps_limit": True},
        }
    )
    first = await api.get(f"{TASKS}/sources/s1")
    assert first.status_code == 429 and first.headers["Retry-After"] == "2"
    assert (await api.get(f"{TASKS}/sources/s1")).status_code == 429
    assert (await api.get(f"{TASKS}/sources/s1")).status_code == 200
    listed = await _list(api)
    assert listed.status_code == 403
    assert listed.json()["code"] == "Forbidden.AccessDenied.QpsLimitForApi"
    assert (await _list(api)).status_code == 200


@slow
async def test_a_platform_that_keeps_every_create_makes_two(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    fake.arm_fault({"calendar_create": {"dedupe": False}, "todo_create": {"dedupe": False}})
    first = await api.post(EVENTS, json=_event(), headers={"x-client-token": "k1"})
    again = await api.post(EVENTS, json=_event(), headers={"x-client-token": "k1"})
    assert first.json()["id"] != again.json()["id"] and len(fake.workspace.events) == 2
    one = (await _todo(api, subject="订会议室", sourceId="act-1")).json()
    two = (await _todo(api, subject="订会议室", sourceId="act-1")).json()
    assert one["id"] != two["id"] and len(fake.workspace_view()["todos"]) == 2
    # a mode is never used up, and a failure armed with it strikes as usual
    fake.arm_fault({"todo_create": {"dedupe": False, "status": 500}})
    assert (await _todo(api, subject="订会议室", sourceId="act-1")).status_code == 500
    assert (await _todo(api, subject="订会议室", sourceId="act-1")).status_code == 200
    assert len(fake.workspace.todos) == 3
    fake.arm_fault({"calendar_create": {"dedupe": True}})  # back to the fake's default
    third = await api.post(EVENTS, json=_event(), headers={"x-client-token": "k1"})
    assert third.json()["id"] == first.json()["id"] and len(fake.workspace.events) == 2


@slow
async def test_applied_late_appears_only_after_its_time(
    fake: FakeDingTalk, api: httpx.AsyncClient
) -> None:
    clock = fake.clock
    assert isinstance(clock, VirtualClock)
    fake.arm_fault({"todo_create": {"error": "applied_late", "after_s": 20}})
    with pytest.raises(httpx.ReadTimeout):
        await api.post(
            TASKS,
            json={"subject": "迟到的待办", "sourceId": "s1"},
            timeout=httpx.Timeout(5.0, read=0.3),
        )
    assert (await api.get(f"{TASKS}/sources/s1")).status_code == 400  # right after: nothing
    clock.advance_to(START + 19.9)
    assert (await api.get(f"{TASKS}/sources/s1")).status_code == 400
    assert fake.workspace_view()["todos"] == []
    clock.advance_to(START + 20.0)
    found = await api.get(f"{TASKS}/sources/s1")  # settled on arrival: the fake's clock
    assert found.status_code == 200 and found.json()["subject"] == "迟到的待办"
    # a 5xx instead of the timeout; the judge's view settles by the clock, no request needed
    fake.arm_fault({"calendar_create": {"error": "applied_late", "after_s": 30, "status": 503}})
    refused = await api.post(
        EVENTS, json=_event(description="dta act k9"), headers={"x-client-token": "k9"}
    )
    assert refused.status_code == 503
    assert (await _list(api, timeMin=T9, timeMax=T10)).json()["events"] == []
    clock.advance_to(START + 50.0)
    assert [e["summary"] for e in fake.workspace_view()["events"]] == ["周会"]
    listed = (await _list(api, timeMin=T9, timeMax=T10)).json()["events"]
    assert [e["description"] for e in listed] == ["dta act k9"]


@pytest.mark.parametrize(
    "fault",
    [
        {"todo_get": {"error": "applied_then_timeout"}},  # a read has nothing to apply
        {"todo_get": {"error": "applied_late"}},
        {"calendar_list": {"delivered": True, "status": 500}},
        {"todo_list": {"delivered": True, "status": 500}},
        {"calendar_create": {"error": "template_unpublished"}},
        {"todo_create": {"error": "applied_late"}},  # after_s is needed
        {"todo_create": {"error": "applied_late", "after_s": -1}},
        {"todo_create": {"error": "applied_late", "after_s": 5, "status": 429}},  # 5xx only
        {"todo_create": {"after_s": 5, "status": 500}},  # after_s goes with applied_late
        {"todo_create": {"dedupe": False, "times": 2}},  # a mode takes no times
        {"todo_create": {"dedupe": "no"}},
        {"todo_update": {"dedupe": False}},  # only the creates dedupe
    ],
)
def test_bad_workspace_fault_specs_are_refused(fault: dict[str, Any]) -> None:
    from lab.fake import parse_fault_spec

    with pytest.raises(ValueError):
        parse_fault_spec(fault)


def _case(tmp_path: Path, fixtures: dict[str, Any], platform: dict[str, Any]) -> Path:
    case = {
        "schema": "dta.lab.case/1",
        "id": "ws-parse",
        "category": "workspace-and-artifacts",
        "title": "t",
        "fixtures": fixtures,
        "steps": [{"send": {"msg": "m1", "from": "u1", "text": "hi"}}],
        "expect": {"platform": platform},
    }
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case, ensure_ascii=False), encoding="utf-8")
    return path


def test_case_keys_for_the_workspace_parse_and_judge(tmp_path: Path) -> None:
    path = _case(
        tmp_path,
        {"todos": [{"subject": "写周报", "executors": ["u1", "u2"], "due": T9}]},
        {
            "todos": [{"contains": ["周报"], "executors": ["u2", "u1"], "done": False}],
            "todos_count": 1,
            "events": [{"contains": ["周会"], "attendees": []}],
            "events_count": 0,
        },
    )
    case = load_case(path)
    assert case.fixtures.todos[0].executors == ["u1", "u2"]
    view = {
        "todos": [{"subject": "写周报", "executors": ["u1", "u2"], "done": True}],
        "events": [],
    }
    found = {check.name for check in workspace_findings(case.expect, view)}
    assert found == {"platform.todos[0].done", "platform.events[0]"}


@pytest.mark.parametrize(
    ("fixtures", "platform"),
    [
        ({"todos": [{"subject": "x", "executors": ["u1"], "owner": "u1"}]}, {"count": 0}),
        ({"users": {"u1": {"name": "张三", "mobile": "1"}}}, {"count": 0}),
        (
            {"users": {"u1": {"name": "a", "union_id": "X"}, "u2": {"name": "b", "union_id": "X"}}},
            {"count": 0},
        ),
        ({}, {"todos": [{"subjects": ["x"]}]}),
        ({}, {"todos": []}),
        ({}, {"events": [{}]}),
    ],
)
def test_unknown_or_empty_workspace_keys_make_the_case_invalid(
    tmp_path: Path, fixtures: dict[str, Any], platform: dict[str, Any]
) -> None:
    from lab.eval.cases import CaseError

    with pytest.raises(CaseError):
        load_case(_case(tmp_path, fixtures, platform))
