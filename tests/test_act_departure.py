"""A workspace write holds its place in the pool before its attempt is recorded, and a stop
that cuts it before its bytes left forgets it: the act stays owed, never "may have been
done" (issue 38.2, the approvals probe's SIGTERM). Real store, real transport and pool,
respx standing in for DingTalk."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx

from agent.acts.executor import ActExecutor, token_of
from agent.clock import SystemClock
from agent.components import transport_config
from agent.contracts import ReceiptStatus
from agent.crashpoints import CrashPoints
from agent.dingtalk.transport import DingTalkTransport
from agent.dingtalk.workspace import WorkspaceClient
from agent.run.broker import Broker
from agent.tools.builtin import BUILTIN
from tests.factories import act_intent, built, event, run_for

API = "https://api.test"
OAPI = "https://oapi.test"
TODOS = f"{API}/v1.0/todo/users/un-u1/tasks"
ARGS = {"subject": "续费域名", "executors": ["u1"]}


@pytest.fixture
async def transport():
    cfg = built(
        transport_config,
        directory_base_url=OAPI,
        openapi_base_url=API,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        send_retries=2,
        read_timeout_s=5,
        max_connections=1,
    )
    t = DingTalkTransport(cfg, SystemClock())
    yield t
    await t.aclose()


def _intent(run):
    return act_intent(run, BUILTIN["dingtalk.todo.create"], ARGS)


def _dingtalk() -> respx.Route:
    """Token and directory answered; the to-do route is the test's to set."""
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "tok-1", "expireIn": 7200})
    )
    respx.post(f"{OAPI}/topapi/v2/user/get").mock(
        return_value=httpx.Response(
            200, json={"errcode": 0, "result": {"userid": "u1", "unionid": "un-u1"}}
        )
    )
    return respx.post(TODOS)


def _made(source: str) -> None:
    """The to-do created, and found by its sourceId."""
    task = {"id": "task-1", "subject": ARGS["subject"], "sourceId": source, "done": False}
    respx.post(TODOS).mock(return_value=httpx.Response(200, json=task))
    respx.get(f"{API}/v1.0/todo/users/un-u1/tasks/sources/{source}").mock(
        return_value=httpx.Response(200, json=task)
    )


def _executor(store, transport) -> ActExecutor:
    crash = CrashPoints()
    broker = Broker(store, transport, SystemClock(), crash)
    return ActExecutor(store, WorkspaceClient(transport), broker, crash)


async def _stopped_after(task: asyncio.Task, seconds: float) -> None:
    await asyncio.sleep(seconds)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@respx.mock
async def test_a_write_stopped_in_a_throttles_back_off_is_forgotten_and_made_once_later(
    store, transport
):
    run = run_for(event(user="u1"))
    intent = _intent(run)
    throttled = _dingtalk().mock(
        return_value=httpx.Response(429, headers={"Retry-After": "30"}, json={})
    )
    executor = _executor(store, transport)
    await _stopped_after(asyncio.ensure_future(executor.execute(run, intent, None)), 0.3)
    assert throttled.call_count == 1  # DingTalk said no; the stop came in the back-off
    assert store.actions.intent_by_key(intent.idempotency_key) is None  # owed, not "maybe done"
    assert store.actions.interrupted_attempts() == []
    _made(token_of(intent))
    receipt = await executor.execute(run, intent, None)
    assert receipt.status is ReceiptStatus.VERIFIED


@respx.mock
async def test_a_write_stopped_on_the_wire_stays_on_record_as_may_have_arrived(store, transport):
    run = run_for(event(user="u1"))
    intent = _intent(run)

    async def never_answers(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json={})

    _dingtalk().mock(side_effect=never_answers)
    executor = _executor(store, transport)
    await _stopped_after(asyncio.ensure_future(executor.execute(run, intent, None)), 0.3)
    assert store.actions.intent_by_key(intent.idempotency_key) is not None
    ((_, kept),) = store.actions.interrupted_attempts()  # read back at the next start
    assert kept.intent_id == intent.intent_id


@respx.mock
async def test_a_write_waits_for_its_place_before_its_attempt_is_recorded(store, transport):
    run = run_for(event(user="u1"))
    intent = _intent(run)
    _dingtalk()
    _made(token_of(intent))
    executor = _executor(store, transport)
    await executor.workspace.prepare(["u1"])  # the unionId and token already had
    place = await transport.reserve_place()  # the pool's only place, held by a send
    task = asyncio.ensure_future(executor.execute(run, intent, None))
    await asyncio.sleep(0.3)
    assert not task.done() and store.actions.interrupted_attempts() == []  # waiting sends nothing
    place.release()
    receipt = await asyncio.wait_for(task, 5)
    assert receipt.status is ReceiptStatus.VERIFIED


@respx.mock
async def test_the_write_and_its_read_back_go_on_the_place_it_holds(store, transport):
    # one place in the pool: were the requests to wait for another, this would never end
    run = run_for(event(user="u1"))
    intent = _intent(run)
    _dingtalk()
    _made(token_of(intent))
    receipt = await asyncio.wait_for(_executor(store, transport).execute(run, intent, None), 5)
    assert receipt.status is ReceiptStatus.VERIFIED
