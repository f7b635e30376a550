"""The wired runtime: receipts, zero-egress silence, crash recovery, webhook fallback."""

import json

import httpx
import pytest
import respx

from agent.clock import VirtualClock
from agent.config import Settings
from agent.contracts import ActionKind, ReceiptStatus, RunState
from agent.crashpoints import Crash, CrashPoints
from agent.dingtalk.ingest import Ingestor
from agent.run.pipeline import HONEST_FAILURE
from agent.runtime import Runtime
from gates.action import idempotency_key
from tests.factories import T0, callback, frame

API = "https://api.test"
HOOK = "https://oapi.example/robot/sendBySession"


@pytest.fixture
def settings(store_settings):
    return Settings(
        **store_settings,
        openapi_base_url=API,
        client_id="app",
        client_secret="sekret",
        robot_code="robot-1",
        identity_lookup=False,  # directory lookups have their own tests
        webhook_origins=["https://oapi.example"],
    )


@pytest.fixture
def clock():
    return VirtualClock(T0)


def webhook_ok():
    return respx.post(url__startswith=HOOK).mock(
        return_value=httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})
    )


async def boot(settings, clock, crash=None, provider=None):
    if settings.store_url:
        # Replicas share PostgreSQL: a dead process's runs are taken over only once their
        # lease has expired, so a "restart" here comes a lease later.
        clock.advance_to(clock.now() + settings.run_lease_s + 1)
    runtime = Runtime(settings, clock=clock, crash=crash, provider=provider)
    await runtime.start()
    return runtime


async def die_right_after_ingest(settings, clock):
    """The daemon stores a message and dies before running it; only the file remains."""
    crash = CrashPoints()
    crash.arm("after_ingest")
    runtime = await boot(settings, clock, crash)
    with pytest.raises(Crash):
        runtime.ingest(frame(callback(text="2 + 2 等于几")))
    runtime.store.close()


@respx.mock
async def test_silent_event_has_silent_receipt_and_no_outbound_call(settings, clock):
    route = respx.route().mock(return_value=httpx.Response(200, json={"errcode": 0}))
    runtime = await boot(settings, clock)
    runtime.ingest(frame(callback(group="cid-g", text="7+5 等于多少")))
    await runtime.drain()
    (receipt,) = runtime.store.actions.receipts()
    assert (receipt.kind, receipt.status, receipt.reason) == (
        ActionKind.SILENCE,
        ReceiptStatus.SILENT,
        "group_not_mentioned",
    )
    assert route.call_count == 0
    assert runtime.store.events.get_run("m1").state is RunState.SILENT
    await runtime.aclose()


@respx.mock
async def test_dm_reply_receipt_carries_snapshot_gate_and_evidence(settings, clock):
    route = webhook_ok()
    runtime = await boot(settings, clock)
    runtime.ingest(frame(callback(text="7 + 5 等于多少")))
    await runtime.drain()
    assert route.call_count == 1
    assert "12" in route.calls.last.request.content.decode()
    (receipt,) = runtime.store.actions.receipts()
    assert receipt.status is ReceiptStatus.ACCEPTED
    run = runtime.store.events.get_run("m1")
    assert receipt.skill_snapshot == run.skill_snapshot.digest
    assert "basic-behavior" in [s.name for s in run.skill_snapshot.skills]
    assert receipt.gate_version.startswith("action-gate/")
    assert receipt.evidence.http_status == 200 and receipt.evidence.errcode == 0
    assert run.state is RunState.DONE
    await runtime.aclose()


@pytest.mark.parametrize(("point", "calls"), [("after_attempt_started", 0), ("after_send", 1)])
@respx.mock
async def test_crash_mid_delivery_leaves_uncertain_receipt_and_never_resends(
    settings, clock, point, calls
):
    route = webhook_ok()
    crash = CrashPoints()
    crash.arm(point)
    runtime = await boot(settings, clock, crash)
    runtime.ingest(frame(callback(text="7 + 5 等于多少")))
    with pytest.raises(Crash):
        await runtime.drain()
    runtime.store.close()  # the process is gone; only the file remains

    restarted = await boot(settings, clock)
    await restarted.drain()
    restarted.ingest(frame(callback(text="7 + 5 等于多少"), "f-again"))  # DingTalk redelivers
    await restarted.drain()
    assert route.call_count == calls
    statuses = [(r.kind, r.status, r.reason) for r in restarted.store.actions.receipts()]
    # settled from the records: the provider is not asked again, nothing is resent
    assert statuses == [(ActionKind.REPLY, ReceiptStatus.UNCERTAIN, None)]
    assert restarted.store.work.runs_per_event() == {"m1": 1}
    run = restarted.store.events.get_run("m1")
    assert (
        run.state is RunState.FAILED and run.failure == "reply uncertain when the runtime stopped"
    )
    await restarted.aclose()


@respx.mock
async def test_crash_after_ingest_is_processed_on_restart(settings, clock):
    route = webhook_ok()
    await die_right_after_ingest(settings, clock)
    restarted = await boot(settings, clock)
    await restarted.drain()
    assert route.call_count == 1
    assert restarted.store.actions.receipts()[0].status is ReceiptStatus.ACCEPTED
    await restarted.aclose()


@respx.mock
async def test_event_stored_by_another_process_is_picked_up_at_start(settings, clock):
    route = webhook_ok()
    runtime = Runtime(settings, clock=clock)
    Ingestor(runtime.store).ingest(frame(callback(text="2 + 2 等于几")), T0)
    assert await runtime.start() == 1
    await runtime.drain()
    assert route.call_count == 1
    await runtime.aclose()


@respx.mock
async def test_intent_cut_before_its_attempt_is_sent_after_restart(settings, clock):
    """An intent with no attempt provably never left: it is dropped and the run redone."""
    route = webhook_ok()
    runtime = await boot(settings, clock)
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    await runtime.drain()
    store = runtime.store
    # Rewind to "intent stored, nothing else": remove attempt + receipt, reopen the run.
    intent = store.actions.intents("m1")[0]
    store.conn.execute("DELETE FROM attempts WHERE intent_id = ?", (intent.intent_id,))
    store.conn.execute("DELETE FROM receipts WHERE event_id = 'm1'")
    store.events.save_run(store.events.get_run("m1").model_copy(update={"state": RunState.WORKING}))
    store.close()
    route.reset()

    restarted = await boot(settings, clock)
    await restarted.drain()
    assert route.call_count == 1
    assert [r.status for r in restarted.store.actions.receipts()] == [ReceiptStatus.ACCEPTED]
    assert restarted.store.actions.intents("m1")[0].idempotency_key == idempotency_key(
        "m1", ActionKind.REPLY
    )
    await restarted.aclose()


@respx.mock
async def test_session_gone_falls_back_to_openapi(settings, clock):
    respx.post(url__startswith=HOOK).mock(
        return_value=httpx.Response(200, json={"errcode": 300001, "errmsg": "session 不存在"})
    )
    respx.post(f"{API}/v1.0/oauth2/accessToken").mock(
        return_value=httpx.Response(200, json={"accessToken": "t", "expireIn": 7200})
    )
    oto = respx.post(f"{API}/v1.0/robot/oToMessages/batchSend").mock(
        return_value=httpx.Response(200, json={"processQueryKey": "pqk-9"})
    )
    runtime = await boot(settings, clock)
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    await runtime.drain()
    assert oto.call_count == 1
    (receipt,) = runtime.store.actions.receipts()
    assert receipt.status is ReceiptStatus.ACCEPTED
    assert [c.value for c in receipt.evidence.channels_tried] == ["session_webhook", "openapi_oto"]
    ours = runtime.store.context.outbound(process_query_key="pqk-9")
    assert ours["intent_id"] == receipt.intent_id
    await runtime.aclose()


class ExplodingProvider:
    name = "exploding"

    async def respond(self, invocation, skills):
        raise RuntimeError("model fell over")


@respx.mock
async def test_provider_failure_gets_an_honest_short_reply(settings, clock):
    route = webhook_ok()
    runtime = await boot(settings, clock, provider=ExplodingProvider())
    runtime.ingest(frame(callback(text="hi")))
    await runtime.drain()
    (receipt,) = runtime.store.actions.receipts()
    assert (receipt.kind, receipt.status) == (ActionKind.REPLY, ReceiptStatus.ACCEPTED)
    assert HONEST_FAILURE in route.calls.last.request.content.decode()
    assert "model fell over" not in route.calls.last.request.content.decode()
    run = runtime.store.events.get_run("m1")
    assert run.state is RunState.FAILED and run.failure == "provider_error: RuntimeError"
    await runtime.aclose()


@respx.mock
async def test_provider_failure_is_silent_where_replying_is_not_allowed(settings, clock, tmp_path):
    route = respx.route().mock(return_value=httpx.Response(200, json={"errcode": 0}))
    skill = tmp_path / "skills" / "no-reply"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: no-reply\ndescription: x\nversion: '1'\nallowed_actions: [silence]\n---\n"
    )
    runtime = await boot(
        settings.with_overrides({"skill_paths": [tmp_path / "skills"]}),
        clock,
        provider=ExplodingProvider(),
    )
    runtime.ingest(frame(callback(text="hi")))
    await runtime.drain()
    (receipt,) = runtime.store.actions.receipts()
    assert (receipt.status, receipt.reason) == (ReceiptStatus.SILENT, "provider_failed")
    assert route.call_count == 0
    await runtime.aclose()


@respx.mock
async def test_an_unexpected_error_ends_the_run_with_a_receipt(settings, clock, monkeypatch):
    route = webhook_ok()
    runtime = await boot(settings, clock)

    async def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(runtime.pipeline.invocations, "build", broken)
    runtime.ingest(frame(callback(text="1+1")))
    await runtime.drain()
    run = runtime.store.events.get_run("m1")
    assert run.state is RunState.FAILED and run.failure == "internal_error: OSError"
    (receipt,) = runtime.store.actions.receipts()
    assert (receipt.status, receipt.reason) == (ReceiptStatus.SILENT, "internal_error")
    assert route.call_count == 0
    await runtime.aclose()


@respx.mock
async def test_a_transport_bug_leaves_an_uncertain_receipt_not_a_stuck_attempt(
    settings, clock, monkeypatch
):
    webhook_ok()
    runtime = await boot(settings, clock)

    async def explode(request):
        raise KeyError("bug")

    monkeypatch.setattr(runtime.transport, "deliver", explode)
    runtime.ingest(frame(callback(text="1+1")))
    await runtime.drain()
    (receipt,) = runtime.store.actions.receipts()
    assert receipt.status is ReceiptStatus.UNCERTAIN and receipt.evidence.error == "KeyError"
    assert runtime.store.actions.interrupted_attempts() == []
    await runtime.aclose()


@respx.mock
async def test_crash_after_a_piece_of_a_long_reply_sends_the_rest_once_and_says_so(
    settings, clock
):
    """The first piece's send is cut (uncertain, never resent); the two owed pieces go once
    on restart, then one line says a piece may be missing."""
    route = webhook_ok()
    crash = CrashPoints()

    class Long:
        name = "long"

        async def respond(self, invocation, skills):
            from skills.providers.base import ProviderReply

            crash.arm("after_send")  # dies right after the first piece went out
            return ProviderReply([{"kind": "reply", "text": "\n".join(["行" * 90] * 90)}])

    runtime = await boot(settings, clock, crash, provider=Long())
    runtime.ingest(frame(callback(text="long please")))
    with pytest.raises(Crash):
        await runtime.drain()
    runtime.store.close()
    restarted = await boot(settings, clock, provider=Long())
    await restarted.drain()
    run = restarted.store.events.get_run("m1")
    assert route.call_count == 4
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert [b["text"]["content"].count("行") > 0 for b in bodies[:3]] == [True] * 3
    assert "part of it may be missing" in bodies[3]["text"]["content"]  # asked in English
    receipts = restarted.store.actions.receipts("m1")
    statuses = [r.status.value for r in receipts if r.kind.value == "reply"]
    assert statuses.count("uncertain") == 1 and statuses.count("accepted") == 3
    assert run.state is RunState.FAILED and "uncertain" in run.failure
    assert restarted.store.pieces.owed_pieces("m1") == []
    await restarted.aclose()


@respx.mock
async def test_crash_between_pieces_sends_each_remaining_piece_once(settings, clock):
    """Killed after the first piece's receipt, before the second was tried: the stored
    pieces are owed and the re-driven run sends them, so the answer arrives whole, once."""
    route = webhook_ok()
    crash = CrashPoints()

    class Long:
        name = "long"

        async def respond(self, invocation, skills):
            from skills.providers.base import ProviderReply

            crash.arm("between_pieces")
            return ProviderReply([{"kind": "reply", "text": "\n".join(["行" * 90] * 90)}])

    runtime = await boot(settings, clock, crash, provider=Long())
    runtime.ingest(frame(callback(text="写一份长的")))
    with pytest.raises(Crash):
        await runtime.drain()
    assert route.call_count == 1
    runtime.store.close()
    restarted = await boot(settings, clock, provider=Long())
    await restarted.drain()
    texts = [json.loads(call.request.content)["text"]["content"] for call in route.calls]
    assert len(texts) == 3 and "".join(texts).count("行") == 90 * 90
    run = restarted.store.events.get_run("m1")
    assert run.state is RunState.DONE
    assert restarted.store.pieces.owed_pieces("m1") == []
    await restarted.aclose()


@respx.mock
async def test_a_message_that_arrived_fresh_is_answered_after_a_long_outage(settings, clock):
    route = webhook_ok()
    await die_right_after_ingest(settings, clock)
    clock.advance_to(T0 + 3600)  # the daemon was down for an hour
    restarted = await boot(settings, clock)
    await restarted.drain()
    assert route.call_count == 1
    assert restarted.store.events.get_decision("m1").reason.value == "dm"
    await restarted.aclose()


@respx.mock
async def test_pausing_stops_work_resumed_after_a_restart(settings, clock):
    route = webhook_ok()

    class Dies:
        name = "dies"

        async def respond(self, invocation, skills):
            raise Crash("provider")  # the daemon dies while the model thinks

    runtime = await boot(settings, clock, provider=Dies())
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    with pytest.raises(Crash):
        await runtime.drain()
    runtime.store.close()
    paused = await boot(settings.with_overrides({"paused": True}), clock)
    await paused.drain()
    assert route.call_count == 0
    receipts = paused.store.actions.receipts("m1")
    assert [(r.status, r.reason) for r in receipts] == [(ReceiptStatus.SILENT, "paused")]
    assert paused.store.events.get_decision("m1").reason.value == "dm"  # the first verdict stands
    await paused.aclose()


class Asks:
    """Asks a question first; answers once the person has replied to it."""

    name = "asks"

    async def respond(self, invocation, skills):
        from skills.providers.base import ProviderReply

        if invocation.continuation is None:
            patch = {"goal": "book a room", "done_when": ["room booked"]}
            return ProviderReply([{"kind": "ask", "text": "哪一天？", "task": patch}])
        return ProviderReply([{"kind": "reply", "text": "好的，周五。"}])


@pytest.mark.parametrize("step", ["ask", "answer"])
@respx.mock
async def test_a_crash_before_the_task_moves_is_finished_by_recovery(
    settings, clock, monkeypatch, step
):
    """The receipt is saved but the process dies before the task moves: the run is still
    ``working``, and recovery moves the task as the run would have, sending nothing more."""
    route = webhook_ok()
    runtime = await boot(settings, clock, provider=Asks())
    runtime.ingest(frame(callback(text="帮我订会议室")))
    if step == "answer":
        await runtime.drain()
        clock.advance_to(T0 + 5)
        runtime.ingest(frame(callback(text="周五", msg_id="m2", created_at=T0 + 5), "f-2"))

    def dies(*args, **kwargs):
        raise Crash("before the task moved")

    monkeypatch.setattr(runtime.pipeline.tasks, "settle", dies)
    with pytest.raises(Crash):
        await runtime.drain()
    runtime.store.close()
    monkeypatch.undo()
    sent = route.call_count

    restarted = await boot(settings, clock, provider=Asks())
    await restarted.drain()
    assert route.call_count == sent  # nothing is said twice
    store = restarted.store
    if step == "ask":
        task = store.context.active_task(store.events.get_run("m1").thread_key)
        assert (task.status.value, task.waiting_for, task.goal) == (
            "waiting",
            "哪一天？",
            "book a room",
        )
        assert store.events.get_run("m1").state is RunState.WAITING
    else:
        run = store.events.get_run("m2")
        assert run.state is RunState.DONE and store.context.active_task(run.thread_key) is None
        (task,) = store.context.tasks()
        assert task.status.value == "completed" and list(task.evidence) == ["room booked"]
    await restarted.aclose()


@respx.mock
async def test_a_receipt_waits_out_a_store_locked_by_another_process(settings, clock, tmp_path):
    """Right after a send, another process holds the write lock for longer than SQLite's
    own busy timeout: the receipt is written once the lock is gone, not lost. (SQLite's
    file lock; on PostgreSQL, tables locked past the lock timeout are test_store_queue's.)"""
    settings = settings.with_overrides({"store_url": None, "store_path": tmp_path / "own.db"})
    import asyncio
    import sqlite3

    other = sqlite3.connect(settings.store_path, isolation_level=None)

    def sent_then_locked(request):
        other.execute("BEGIN IMMEDIATE")  # e.g. `dta store prune` starts right now
        asyncio.get_running_loop().call_later(0.3, other.execute, "ROLLBACK")
        return httpx.Response(200, json={"errcode": 0, "errmsg": "ok"})

    route = respx.post(url__startswith=HOOK).mock(side_effect=sent_then_locked)
    runtime = await boot(settings, clock)
    runtime.store.conn.execute("PRAGMA busy_timeout = 20")  # far shorter than the lock
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    await runtime.drain()
    assert route.call_count == 1
    assert [r.status for r in runtime.store.actions.receipts()] == [ReceiptStatus.ACCEPTED]
    assert runtime.store.events.get_run("m1").state is RunState.DONE
    other.close()
    await runtime.aclose()


@respx.mock
async def test_stopped_during_a_rate_limit_back_off_the_reply_is_sent_after_restart(
    settings, clock
):
    """DingTalk said 429 and the daemon stops while waiting to retry: nothing reached the
    person, so the restarted daemon sends the reply instead of calling it ``uncertain``."""
    import asyncio

    class Waits(VirtualClock):
        async def sleep(self, seconds):
            await asyncio.Event().wait()  # the back-off outlives the daemon

    limited = httpx.Response(429, headers={"Retry-After": "30"}, json={"errcode": 130101})
    route = respx.post(url__startswith=HOOK).mock(return_value=limited)
    runtime = await boot(settings, Waits(T0))
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    while route.call_count == 0:
        await asyncio.sleep(0.01)
    await runtime.aclose()  # SIGTERM: in-flight runs are cancelled

    route.mock(return_value=httpx.Response(200, json={"errcode": 0, "errmsg": "ok"}))
    restarted = await boot(settings, clock)
    await restarted.drain()
    assert route.call_count == 2
    assert [r.status for r in restarted.store.actions.receipts()] == [ReceiptStatus.ACCEPTED]
    assert restarted.store.events.get_run("m1").state is RunState.DONE
    await restarted.aclose()


@respx.mock
async def test_stopped_while_the_post_is_in_flight_stays_uncertain(settings, clock):
    """The converse: a POST cut off mid-flight may have arrived, so it is never resent."""
    import asyncio

    started = asyncio.Event()
    posts = []

    async def hangs(request):
        posts.append(request)
        started.set()
        await asyncio.Event().wait()

    respx.post(url__startswith=HOOK).mock(side_effect=hangs)
    runtime = await boot(settings, clock)
    runtime.ingest(frame(callback(text="2 + 2 等于几")))
    await started.wait()
    await runtime.aclose()

    restarted = await boot(settings, clock)
    await restarted.drain()
    assert len(posts) == 1
    assert [r.status for r in restarted.store.actions.receipts()] == [ReceiptStatus.UNCERTAIN]
    await restarted.aclose()
