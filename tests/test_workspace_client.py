"""WorkspaceClient against DingTalk's answers, with respx standing in for the network: the
request each method makes (path, token header, body, id conversion) and the error kinds."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.components import transport_config
from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace import WorkspaceClient, WorkspaceError, iso_ms
from tests.factories import T0, built

API = "https://api.test"
OAPI = "https://oapi.test"
START = datetime(2026, 3, 25, 2, 0, tzinfo=UTC)
END = START + timedelta(minutes=30)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


@pytest.fixture
async def transport(clock: VirtualClock):
    cfg = built(
        transport_config,
        directory_base_url=OAPI,
        openapi_base_url=API,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        send_retries=2,
        read_timeout_s=1,
    )
    t = DingTalkTransport(cfg, clock)
    yield t
    await t.aclose()


@pytest.fixture
def client(transport: DingTalkTransport) -> WorkspaceClient:
    return WorkspaceClient(transport)


def body_of(route: respx.Route, index: int = -1) -> dict:
    return json.loads(route.calls[index].request.content)


def mock_token() -> respx.Route:
    return respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "tok-1", "expireIn": 7200})
    )


def mock_users(people: dict[str, str]) -> respx.Route:
    """``/topapi/v2/user/get`` for staff id → unionId (name ``N-<id>``); others 60121."""

    def answer(request: httpx.Request) -> httpx.Response:
        user_id = json.loads(request.content)["userid"]
        if user_id not in people:
            return httpx.Response(200, json={"errcode": 60121, "errmsg": "找不到该用户"})
        result = {"userid": user_id, "unionid": people[user_id], "name": f"N-{user_id}"}
        return httpx.Response(200, json={"errcode": 0, "result": {**result, "title": "eng"}})

    return respx.post(f"{OAPI}/topapi/v2/user/get").mock(side_effect=answer)


def mock_unions(people: dict[str, str]) -> respx.Route:
    """``/topapi/user/getbyunionid`` for unionId → staff id; others 60122."""

    def answer(request: httpx.Request) -> httpx.Response:
        union_id = json.loads(request.content)["unionid"]
        if union_id not in people:
            return httpx.Response(200, json={"errcode": 60122, "errmsg": "no such unionid"})
        result = {"userid": people[union_id], "contact_type": 0}
        return httpx.Response(200, json={"errcode": 0, "result": result})

    return respx.post(f"{OAPI}/topapi/user/getbyunionid").mock(side_effect=answer)


PEOPLE = {"u1": "U1", "u2": "U2"}


# ---------------------------------------------------------------------- ids


@respx.mock
async def test_union_id_asks_oapi_with_query_token_and_caches(client: WorkspaceClient):
    mock_token()
    route = mock_users(PEOPLE)
    assert await client.union_id("u1") == "U1"
    assert await client.union_id("u1") == "U1"
    assert route.call_count == 1
    request = route.calls.last.request
    assert request.url.params["access_token"] == "tok-1"
    assert "x-acs-dingtalk-access-token" not in request.headers
    assert body_of(route) == {"userid": "u1", "language": "zh_CN"}


@respx.mock
async def test_two_calls_for_one_person_cost_one_lookup(client: WorkspaceClient):
    mock_token()
    users = mock_users(PEOPLE)
    todos = respx.post(f"{API}/v1.0/todo/users/U1/tasks/list").mock(
        return_value=httpx.Response(200, json={"todoCards": []})
    )
    await asyncio.gather(client.list_todos("u1"), client.list_todos("u1"))
    await client.list_todos("u1")
    assert users.call_count == 1
    assert todos.call_count == 3


@respx.mock
async def test_user_id_from_union_id(client: WorkspaceClient):
    mock_token()
    route = mock_unions({"U9": "u9"})
    assert await client.user_id("U9") == "u9"
    assert body_of(route) == {"unionid": "U9"}
    with pytest.raises(WorkspaceError) as caught:
        await client.user_id("nobody")
    assert caught.value.kind == "not_found" and caught.value.code == "60122"


@respx.mock
async def test_unknown_staff_id_is_not_found(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    with pytest.raises(WorkspaceError) as caught:
        await client.union_id("ghost")
    assert caught.value.kind == "not_found"
    assert caught.value.status == 200 and caught.value.code == "60121"


# ---------------------------------------------------------------------- directory


@respx.mock
async def test_search_users_then_details(client: WorkspaceClient):
    mock_token()
    users = mock_users(PEOPLE)
    search = respx.post(f"{API}/v1.0/contact/users/search").mock(
        return_value=httpx.Response(200, json={"hasMore": False, "list": ["u1", "u2"]})
    )
    people = await client.search_users("张三", size=50)
    assert [(p.user_id, p.name, p.title) for p in people] == [
        ("u1", "N-u1", "eng"),
        ("u2", "N-u2", "eng"),
    ]
    assert body_of(search) == {"queryWord": "张三", "offset": 0, "size": 20}
    assert search.calls.last.request.headers["x-acs-dingtalk-access-token"] == "tok-1"
    # The details taught the unionIds: converting them asks nothing more.
    assert await client.union_id("u2") == "U2"
    assert users.call_count == 2


# ---------------------------------------------------------------------- calendar


def test_iso_ms_is_utc_with_milliseconds():
    shanghai = timezone(timedelta(hours=8))
    assert iso_ms(datetime(2026, 3, 25, 10, 0, 0, 123456, tzinfo=shanghai)) == (
        "2026-03-25T02:00:00.123Z"
    )
    with pytest.raises(WorkspaceError) as caught:
        iso_ms(datetime(2026, 3, 25))
    assert caught.value.kind == "invalid"


@respx.mock
async def test_free_busy_converts_ids_both_ways(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    item = {
        "start": {"dateTime": "2026-03-25T10:00:00+08:00", "timeZone": "Asia/Shanghai"},
        "end": {"dateTime": "2026-03-25T11:00:00+08:00", "timeZone": "Asia/Shanghai"},
        "status": "BUSY",
    }
    free = {**item, "status": "FREE"}
    route = respx.post(f"{API}/v1.0/calendar/users/U1/querySchedule").mock(
        return_value=httpx.Response(
            200, json={"scheduleInformation": [{"userId": "U2", "scheduleItems": [item, free]}]}
        )
    )
    answer = await client.free_busy(["u1", "u2"], START, END)
    assert body_of(route) == {
        "startTime": "2026-03-25T02:00:00.000Z",
        "endTime": "2026-03-25T02:30:00.000Z",
        "userIds": ["U1", "U2"],
    }
    assert [(b.start, b.status) for b in answer["u2"].busy] == [(START, "BUSY")]
    assert answer["u1"].busy == () and answer["u1"].error  # asked for, not answered


@respx.mock
async def test_create_event_shape(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    mock_unions({"U1": "u1", "U2": "u2"})
    event = {
        "id": "ev-1",
        "summary": "sync",
        "start": {"dateTime": "2026-03-25T02:00:00Z", "timeZone": "UTC"},
        "end": {"dateTime": "2026-03-25T02:30:00Z", "timeZone": "UTC"},
        "organizer": {"id": "U1"},
        "attendees": [{"id": "U2", "responseStatus": "needsAction"}, {"id": "EXT"}],
        "location": {"displayName": "3F"},
    }
    route = respx.post(f"{API}/v1.0/calendar/users/U1/calendars/primary/events").mock(
        return_value=httpx.Response(200, json=event)
    )
    created = await client.create_event(
        "u1", "sync", START, END, ["u2"], client_token="ct-1", location="3F"
    )
    request = route.calls.last.request
    assert request.headers["x-client-token"] == "ct-1"
    assert request.headers["x-acs-dingtalk-access-token"] == "tok-1"
    assert body_of(route) == {
        "summary": "sync",
        "start": {"dateTime": "2026-03-25T02:00:00.000Z", "timeZone": "UTC"},
        "end": {"dateTime": "2026-03-25T02:30:00.000Z", "timeZone": "UTC"},
        "attendees": [{"id": "U2", "isOptional": False}],
        "location": {"displayName": "3F"},
    }
    assert created.event_id == "ev-1" and created.start == START
    assert created.organizer == "u1"
    assert created.attendees == ("u2",)  # an external attendee is left out, not guessed
    assert created.location == "3F"


@respx.mock
async def test_get_event_path(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    route = respx.get(f"{API}/v1.0/calendar/users/U1/calendars/primary/events/ev%2F1").mock(
        return_value=httpx.Response(200, json={"id": "ev/1", "summary": "s"})
    )
    event = await client.get_event("u1", "ev/1")  # an id is one path segment, quoted
    assert event.event_id == "ev/1" and route.call_count == 1


# ---------------------------------------------------------------------- to-do


@respx.mock
async def test_list_todos_follows_next_token(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    mock_unions({"U1": "u1"})
    card = {"taskId": "t1", "subject": "a", "isDone": False, "creatorId": "U1", "dueTime": 0}
    route = respx.post(f"{API}/v1.0/todo/users/U1/tasks/list").mock(
        side_effect=[
            httpx.Response(200, json={"todoCards": [card], "nextToken": "n2"}),
            httpx.Response(200, json={"todoCards": [{**card, "taskId": "t2"}]}),
        ]
    )
    todos = await client.list_todos("u1")
    assert [t.task_id for t in todos] == ["t1", "t2"]
    assert todos[0].creator == "u1" and todos[0].due is None and not todos[0].done
    assert body_of(route, 0) == {"isDone": False}
    assert body_of(route, 1) == {"isDone": False, "nextToken": "n2"}


@respx.mock
async def test_create_todo_shape(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    mock_unions({"U1": "u1", "U2": "u2"})
    due = datetime(2026, 3, 26, tzinfo=UTC)
    answer = {
        "id": "t1",
        "subject": "write",
        "creatorId": "U1",
        "executorIds": ["U2"],
        "dueTime": int(due.timestamp() * 1000),
        "sourceId": "src-1",
        "done": False,
    }
    route = respx.post(f"{API}/v1.0/todo/users/U1/tasks").mock(
        return_value=httpx.Response(200, json=answer)
    )
    todo = await client.create_todo("u1", "write", ["u2"], source_id="src-1", due=due)
    request = route.calls.last.request
    assert request.url.params["operatorId"] == "U1"
    assert body_of(route) == {
        "subject": "write",
        "executorIds": ["U2"],
        "creatorId": "U1",
        "sourceId": "src-1",
        "dueTime": int(due.timestamp() * 1000),
    }
    assert todo.task_id == "t1" and todo.executors == ("u2",) and todo.due == due
    assert todo.source_id == "src-1"


@respx.mock
async def test_get_todo_and_by_source(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    answer = {"id": "t1", "subject": "s", "done": True, "sourceId": "src-1"}
    one = respx.get(f"{API}/v1.0/todo/users/U1/tasks/t1").mock(
        return_value=httpx.Response(200, json=answer)
    )
    by_source = respx.get(f"{API}/v1.0/todo/users/U1/tasks/sources/src-1").mock(
        return_value=httpx.Response(200, json=answer)
    )
    assert (await client.get_todo("u1", "t1")).done
    assert (await client.todo_by_source("u1", "src-1")).task_id == "t1"
    assert one.call_count == 1 and by_source.call_count == 1


@respx.mock
async def test_complete_todo_shape(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    route = respx.put(f"{API}/v1.0/todo/users/U1/tasks/t1").mock(
        return_value=httpx.Response(200, json={"result": True})
    )
    await client.complete_todo("u1", "t1")
    assert route.calls.last.request.url.params["operatorId"] == "U1"
    assert body_of(route) == {"done": True}


# ---------------------------------------------------------------------- error kinds


async def failing_get(client: WorkspaceClient, **mock: object) -> WorkspaceError:
    mock_token()
    mock_users(PEOPLE)
    respx.get(f"{API}/v1.0/todo/users/U1/tasks/t1").mock(**mock)
    with pytest.raises(WorkspaceError) as caught:
        await client.get_todo("u1", "t1")
    return caught.value


@respx.mock
async def test_400_task_not_exist_is_not_found(client: WorkspaceClient):
    answer = httpx.Response(400, json={"code": "invalidParameter", "message": "task not exist"})
    error = await failing_get(client, return_value=answer)
    assert (error.kind, error.status, error.code) == ("not_found", 400, "invalidParameter")


@respx.mock
async def test_404_is_not_found(client: WorkspaceClient):
    error = await failing_get(client, return_value=httpx.Response(404, json={}))
    assert error.kind == "not_found"


@respx.mock
async def test_400_otherwise_is_invalid(client: WorkspaceClient):
    answer = httpx.Response(400, json={"code": "InvalidParameter.ParsedISO8601TimestampError"})
    error = await failing_get(client, return_value=answer)
    assert error.kind == "invalid" and error.code.startswith("InvalidParameter")


@respx.mock
async def test_403_access_denied_is_forbidden_and_not_retried(client: WorkspaceClient):
    answer = httpx.Response(
        403, json={"code": "Forbidden.AccessDenied.AccessTokenPermissionDenied"}
    )
    error = await failing_get(client, return_value=answer)
    assert error.kind == "forbidden" and error.status == 403
    assert respx.routes[-1].call_count == 1


@respx.mock
async def test_429_is_retried_then_throttled(client: WorkspaceClient):
    answer = httpx.Response(429, headers={"Retry-After": "1"})
    error = await failing_get(client, return_value=answer)
    assert error.kind == "throttled" and error.status == 429
    assert respx.routes[-1].call_count == 3  # the first try and send_retries more


@respx.mock
async def test_qps_limit_then_success(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    route = respx.get(f"{API}/v1.0/todo/users/U1/tasks/t1").mock(
        side_effect=[
            httpx.Response(403, json={"code": "Forbidden.AccessDenied.QpsLimitForApi"}),
            httpx.Response(200, json={"id": "t1"}),
        ]
    )
    assert (await client.get_todo("u1", "t1")).task_id == "t1"
    assert route.call_count == 2


@respx.mock
async def test_connect_error_is_unavailable_after_retries(client: WorkspaceClient):
    error = await failing_get(client, side_effect=httpx.ConnectError("refused"))
    assert error.kind == "unavailable" and not error.maybe_applied
    assert respx.routes[-1].call_count == 3


@respx.mock
async def test_read_timeout_on_create_is_timeout_after_send_and_not_resent(
    client: WorkspaceClient,
):
    mock_token()
    mock_users(PEOPLE)
    route = respx.post(f"{API}/v1.0/todo/users/U1/tasks").mock(
        side_effect=httpx.ReadTimeout("slow")
    )
    with pytest.raises(WorkspaceError) as caught:
        await client.create_todo("u1", "write", [], source_id="src-1")
    assert caught.value.kind == "timeout_after_send" and caught.value.maybe_applied
    assert route.call_count == 1


@respx.mock
async def test_5xx_on_create_event_is_timeout_after_send(client: WorkspaceClient):
    mock_token()
    mock_users(PEOPLE)
    route = respx.post(f"{API}/v1.0/calendar/users/U1/calendars/primary/events").mock(
        return_value=httpx.Response(502, text="bad gateway")
    )
    with pytest.raises(WorkspaceError) as caught:
        await client.create_event("u1", "s", START, END, [], client_token="ct")
    assert caught.value.kind == "timeout_after_send" and caught.value.status == 502
    assert route.call_count == 1


@respx.mock
async def test_stale_token_is_fetched_again(client: WorkspaceClient):
    token = respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        side_effect=[
            httpx.Response(200, json={"accessToken": "old", "expireIn": 7200}),
            httpx.Response(200, json={"accessToken": "new", "expireIn": 7200}),
        ]
    )
    users = mock_users(PEOPLE)
    route = respx.get(f"{API}/v1.0/todo/users/U1/tasks/t1").mock(
        side_effect=[httpx.Response(401, json={}), httpx.Response(200, json={"id": "t1"})]
    )
    await client.get_todo("u1", "t1")
    assert token.call_count == 2 and users.call_count == 1
    assert route.calls.last.request.headers["x-acs-dingtalk-access-token"] == "new"


@respx.mock
async def test_token_endpoint_down_is_unavailable(client: WorkspaceClient):
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(WorkspaceError) as caught:
        await client.union_id("u1")
    assert caught.value.kind == "unavailable"  # nothing of ours was sent


@respx.mock
async def test_oapi_token_errcode_fetches_a_new_token(client: WorkspaceClient):
    token = respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        side_effect=[
            httpx.Response(200, json={"accessToken": "old", "expireIn": 7200}),
            httpx.Response(200, json={"accessToken": "new", "expireIn": 7200}),
        ]
    )
    result = {"userid": "u1", "unionid": "U1"}
    route = respx.post(f"{OAPI}/topapi/v2/user/get").mock(
        side_effect=[
            httpx.Response(200, json={"errcode": 40014, "errmsg": "invalid access_token"}),
            httpx.Response(200, json={"errcode": 0, "result": result}),
        ]
    )
    assert await client.union_id("u1") == "U1"
    assert token.call_count == 2
    assert route.calls.last.request.url.params["access_token"] == "new"
