"""Task lifecycle: open on ask, resume, stop, complete only with a receipt, CAS revisions."""

import pytest

from agent.clock import VirtualClock
from agent.contracts import (
    ActionKind,
    ActionRequest,
    Receipt,
    ReceiptStatus,
    TaskStatus,
)
from agent.run.tasks import TaskKeeper, is_stop
from tests.factories import T0, event, run_for


def receipt(status=ReceiptStatus.ACCEPTED, kind=ActionKind.REPLY, rid="rcp_1"):
    return Receipt(
        receipt_id=rid,
        run_id="run_1",
        event_id="m1",
        kind=kind,
        status=status,
        gate_version="g",
        skill_snapshot="s",
        created_at=T0,
        updated_at=T0,
    )


ASK = ActionRequest.model_validate(
    {
        "kind": "ask",
        "text": "要算什么？",
        "task": {"goal": "计算", "waiting_for": "算式", "done_when": ["结果已回复"]},
    }
)
REPLY = ActionRequest.model_validate({"kind": "reply", "text": "12"})


def keeper(store):
    return TaskKeeper(store, VirtualClock(T0))


def run(msg="m1", run_id="run_1"):
    return run_for(event(msg_id=msg)).model_copy(update={"run_id": run_id})


@pytest.mark.parametrize("text", ["算了", "停", "取消", "停止吧", "stop", "Cancel!", "never mind"])
def test_stop_words(text):
    assert is_stop(text)


@pytest.mark.parametrize("text", ["停车场在哪", "取消订单怎么操作", "stop the build at 5pm"])
def test_not_stop_words(text):
    assert not is_stop(text)


def test_single_question_and_answer_leave_no_task(store):
    k = keeper(store)
    start = k.begin(run(), "7+5")
    assert start.continuation is None and not start.stop
    assert k.settle(run(), None, REPLY, receipt()) is None
    assert store.context.tasks() == []


def test_ask_opens_waiting_then_answer_resumes_and_completes(store):
    k = keeper(store)
    opened = k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    assert (opened.status, opened.waiting_for, opened.revision) == (TaskStatus.WAITING, "算式", 1)
    second = run("m2", "run_2")
    start = k.begin(second, "7+5")
    assert start.continuation.status is TaskStatus.WORKING and start.continuation.revision == 2
    done = k.settle(second, start.continuation, REPLY, receipt(rid="rcp_9"))
    assert done.status is TaskStatus.COMPLETED
    assert done.evidence == {"结果已回复": "rcp_9"} and done.revision == 3


def test_completion_needs_a_delivered_receipt(store):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    second = run("m2", "run_2")
    start = k.begin(second, "7+5")
    failed = k.settle(second, start.continuation, REPLY, receipt(ReceiptStatus.UNCERTAIN))
    assert failed.status is TaskStatus.FAILED and failed.evidence == {}


def test_model_saying_completed_is_not_enough(store):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    second = run("m2", "run_2")
    start = k.begin(second, "done")
    claim = ActionRequest.model_validate(
        {"kind": "reply", "text": "已完成", "task": {"status": "completed"}}
    )
    refused = k.settle(second, start.continuation, claim, receipt(ReceiptStatus.REFUSED))
    assert refused.status is TaskStatus.FAILED


def test_stop_cancels_the_waiting_task(store):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    start = k.begin(run("m2", "run_2"), "算了")
    assert start.stop and start.cancelled.status is TaskStatus.CANCELLED
    assert store.context.active_task(run().thread_key) is None


def test_stop_without_a_task_is_still_a_stop(store):
    start = keeper(store).begin(run(), "停")
    assert start.stop and start.cancelled is None


def test_revision_compare_and_set_rejects_a_stale_writer(store):
    k = keeper(store)
    opened = k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    ahead = opened.model_copy(update={"revision": 2, "status": TaskStatus.WORKING})
    assert store.context.save_task(ahead)
    stale = opened.model_copy(update={"revision": 2, "status": TaskStatus.CANCELLED})
    assert not store.context.save_task(stale)
    assert store.context.active_task(run().thread_key).status is TaskStatus.WORKING
    # moving from the old revision through the keeper fails the same way
    assert k._move(opened, run(), status=TaskStatus.CANCELLED) is None


def test_other_threads_do_not_see_the_task(store):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    other = run_for(event(msg_id="x", user="u2")).model_copy(update={"run_id": "run_x"})
    assert k.begin(other, "7+5").continuation is None


@pytest.mark.parametrize(
    "text",
    [
        "明天上午10点提醒我交报销",
        "报销需要哪些材料？",
        "这个能用吗",
        "帮我查一下明天的会",
        "remind me at 5pm",
    ],
)
def test_a_request_of_its_own_leaves_the_waiting_task_waiting(store, text):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    start = k.begin(run("m2", "run_2"), text)
    assert start.continuation is None and not start.stop
    assert store.context.active_task(run().thread_key).status is TaskStatus.WAITING


@pytest.mark.parametrize(("text", "supplies"), [("7+5", False), ("就是这个", False), ("", True)])
def test_what_was_asked_for_resumes_the_task(store, text, supplies):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    start = k.begin(run("m2", "run_2"), text, supplies=supplies)
    assert start.continuation is not None and start.continuation.status is TaskStatus.WORKING


def test_a_question_that_quotes_the_ask_or_brings_a_file_resumes_it(store):
    k = keeper(store)
    k.settle(run(), None, ASK, receipt(kind=ActionKind.ASK))
    start = k.begin(run("m2", "run_2"), "是这个吗？", supplies=True)
    assert start.continuation is not None
