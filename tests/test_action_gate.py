import pytest

from agent.contracts import (
    ActionKind,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    SessionWebhook,
)
from gates.action import (
    ActionFacts,
    ActionGate,
    ActionPolicy,
    Approval,
    Refusal,
    RunTally,
    idempotency_key,
    split_text,
)
from tests.factories import ROBOT, T0, event, run_for

REPLY = {"kind": "reply", "text": "12"}


def facts(**kw):
    base = {"now": T0, "thread_generation": 1, "writes_last_minute": 0, "writes_last_day": 0}
    base.update(kw)
    return ActionFacts(**base)


def gate(**kw):
    kw.setdefault("robot_code", ROBOT)
    return ActionGate(ActionPolicy(**kw))


def decide(raw=REPLY, run=None, tally=None, f=None, **policy):
    return gate(**policy).decide(raw, run or run_for(event()), tally or RunTally(), f or facts())


def refused(result, reason):
    assert isinstance(result, Refusal), result
    assert result.reason is reason
    assert result.checks[-1] == reason.value
    return result


def test_reply_is_approved_and_targets_the_origin():
    run = run_for(event(user="u7"))
    result = decide(run=run)
    assert isinstance(result, Approval)
    (intent,) = result.intents
    assert intent.target == run.origin
    assert intent.idempotency_key == "m1:terminal"
    assert intent.content.text == "12"
    assert result.checks == [
        "schema",
        "allowed_action",
        "run_state",
        "generation",
        "run_budget",
        "idempotency",
        "identity",
        "write_budget",
        "target",
        "content",
    ]


@pytest.mark.parametrize(
    "raw",
    [
        {"kind": "reply", "text": "hi", "target": "cid-other"},
        {"kind": "reply", "text": "hi", "user": "u2"},
        {"kind": "reply", "text": "hi", "robot": "r2"},
        {"kind": "reply"},
        {"kind": "shout", "text": "hi"},
        {"kind": "silence"},
        "not even an object",
    ],
)
def test_schema_refuses_targets_and_garbage(raw):
    refused(decide(raw), RefusalReason.SCHEMA_INVALID)


def test_action_not_allowed():
    run = run_for(event(), allowed=[ActionKind.REPLY])
    refused(decide({"kind": "ack", "text": "收到"}, run=run), RefusalReason.ACTION_NOT_ALLOWED)


def test_run_silent_and_terminal():
    refused(decide(tally=RunTally(terminal=ActionKind.SILENCE)), RefusalReason.RUN_SILENT)
    refused(decide(tally=RunTally(terminal=ActionKind.REPLY)), RefusalReason.RUN_TERMINAL)


def test_stale_generation():
    refused(decide(f=facts(thread_generation=2)), RefusalReason.STALE_GENERATION)


def test_run_budget_one_ack():
    ack = {"kind": "ack", "text": "收到"}
    assert isinstance(decide(ack), Approval)
    refused(decide(ack, tally=RunTally(acks=1)), RefusalReason.RUN_BUDGET)


def test_duplicate_intent_returns_first_receipt():
    first = Receipt(
        receipt_id="r1",
        run_id="run_1",
        event_id="m1",
        kind=ActionKind.REPLY,
        status=ReceiptStatus.ACCEPTED,
        gate_version="g",
        skill_snapshot="s",
        created_at=T0,
        updated_at=T0,
    )
    result = refused(
        decide(f=facts(taken_keys={"m1:terminal": first})), RefusalReason.DUPLICATE_INTENT
    )
    assert result.first_receipt == first


def test_identity_mismatch():
    run = run_for(event(robotCode="someone-else"))
    refused(decide(run=run), RefusalReason.IDENTITY_MISMATCH)


def test_write_budget_minute_and_day():
    refused(decide(f=facts(writes_last_minute=20)), RefusalReason.WRITE_BUDGET)
    refused(decide(f=facts(writes_last_day=5), write_budget_per_day=5), RefusalReason.WRITE_BUDGET)
    assert isinstance(decide(f=facts(writes_last_minute=19)), Approval)


def test_target_unavailable_without_webhook_or_credentials():
    expired = SessionWebhook(url="https://x/s", expires_at=T0 - 1)
    run = run_for(event(), webhook=expired)
    refused(decide(run=run), RefusalReason.TARGET_UNAVAILABLE)
    assert isinstance(decide(run=run, has_openapi_credentials=True), Approval)
    # a webhook inside the safety margin counts as expired
    nearly = run_for(event(), webhook=SessionWebhook(url="https://x/s", expires_at=T0 + 10))
    refused(decide(run=nearly), RefusalReason.TARGET_UNAVAILABLE)


def test_long_reply_is_chunked_and_too_long_is_refused():
    long_text = "\n".join(["一行文字" * 50] * 40)  # ~8,000 characters
    result = decide({"kind": "reply", "text": long_text}, max_reply_chars=3800)
    assert isinstance(result, Approval)
    assert len(result.intents) == 3
    assert [i.idempotency_key for i in result.intents] == [
        "m1:terminal",
        "m1:terminal#2",
        "m1:terminal#3",
    ]
    assert "".join(i.content.text for i in result.intents).replace("\n", "") == long_text.replace(
        "\n", ""
    )
    refused(
        decide({"kind": "reply", "text": long_text}, max_reply_chars=1000, max_reply_chunks=4),
        RefusalReason.CONTENT_TOO_LARGE,
    )
    refused(decide({"kind": "ask", "text": "x" * 5000}), RefusalReason.CONTENT_TOO_LARGE)


def test_silence_needs_no_channel():
    run = run_for(event(), webhook=None)
    result = decide({"kind": "silence", "reason": "nothing to add"}, run=run)
    assert isinstance(result, Approval)
    assert result.intents[0].content is None


def test_idempotency_keys_and_split():
    assert idempotency_key("m", ActionKind.ACK) == "m:ack"
    assert idempotency_key("m", ActionKind.ASK) == "m:terminal"
    assert split_text("abc", 10) == ["abc"]
    assert split_text("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]


def test_secrets_and_webhook_urls_are_never_said():
    leak = {"kind": "reply", "text": "the secret is s3cr3t-value, enjoy"}
    refused(decide(leak, secrets=("s3cr3t-value",)), RefusalReason.SECRET_IN_CONTENT)
    hook = {
        "kind": "reply",
        "markdown": "post here: https://oapi.dingtalk.com/robot/sendBySession?session=abc",
    }
    refused(decide(hook), RefusalReason.SECRET_IN_CONTENT)
    assert isinstance(
        decide({"kind": "reply", "text": "nothing secret"}, secrets=("x" * 8,)), Approval
    )


def test_the_title_is_checked_too():
    secret_title = {"kind": "reply", "markdown": "see the title", "title": "key s3cr3t-value"}
    refused(decide(secret_title, secrets=("s3cr3t-value",)), RefusalReason.SECRET_IN_CONTENT)
    encoded = {"kind": "reply", "text": "https://x/robot/sendBySession%3Fsession%3Dabc"}
    refused(decide(encoded), RefusalReason.SECRET_IN_CONTENT)
    long_title = {"kind": "reply", "markdown": "body", "title": "t" * 65}
    refused(decide(long_title), RefusalReason.CONTENT_TOO_LARGE)
