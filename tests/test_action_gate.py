"""The action gate: an ordered table of checks, first refusal decides, checks recorded."""

import pytest

from agent.components import action_policy
from agent.contracts import (
    ActionKind,
    Receipt,
    ReceiptStatus,
    RefusalReason,
    SessionWebhook,
)
from agent.run.gate_facts import load_facts
from gates.action import (
    CHECKS,
    ActionFacts,
    ActionGate,
    Approval,
    Refusal,
    RunTally,
    idempotency_key,
    slot_keys,
    split_text,
)
from storage import Store
from tests.factories import ROBOT, T0, built, event, run_for

REPLY = {"kind": "reply", "text": "12"}
# The documented order (ARCHITECTURE §4.5), written out so a reordering of CHECKS shows here.
ORDER = [
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
    "attachments",
    "reminder",
    "at_all",
    "images",
    "claims",
    "promises",
    "figures",
    "raw_output",
]
# The act checks come last: they apply to acts only, which skip the message checks.
ACT_ORDER = ["tool", "authority", "people", "act_budget", "approval"]
# What an act goes through: the checks for every request and for every write, then its own.
ACT_PATH = [*ORDER[: ORDER.index("identity") + 1], *ACT_ORDER]
FIRST = Receipt(
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
EXPIRED = SessionWebhook(url="https://x/s", expires_at=T0 - 1)


def facts(**kw):
    base = {"now": T0, "thread_generation": 1, "writes_last_minute": 0, "writes_last_day": 0}
    base.update(kw)
    return ActionFacts(**base)


def gate(**kw):
    kw.setdefault("robot_code", ROBOT)
    return ActionGate(built(action_policy, **kw))


def decide(raw=REPLY, run=None, tally=None, f=None, **policy):
    return gate(**policy).decide(raw, run or run_for(event()), tally or RunTally(), f or facts())


def refused(result, reason):
    """A refusal for ``reason``, whose record ends with a check that can give it."""
    assert isinstance(result, Refusal), result
    assert result.reason is reason
    assert result.checked == ORDER[: len(result.checked)]
    return result


# One case per refusal code: (check that refuses, reason, what to decide on).
REFUSING = [
    ("schema", RefusalReason.SCHEMA_INVALID, {"raw": {"kind": "reply", "text": "x", "to": "c"}}),
    (
        "allowed_action",
        RefusalReason.ACTION_NOT_ALLOWED,
        {"run": run_for(event(), allowed=[ActionKind.ACK])},
    ),
    ("run_state", RefusalReason.RUN_SILENT, {"tally": RunTally(terminal=ActionKind.SILENCE)}),
    ("run_state", RefusalReason.RUN_TERMINAL, {"tally": RunTally(terminal=ActionKind.ASK)}),
    ("generation", RefusalReason.STALE_GENERATION, {"f": facts(thread_generation=2)}),
    (
        "run_budget",
        RefusalReason.RUN_BUDGET,
        {"raw": {"kind": "ack", "text": "收到"}, "tally": RunTally(acks=1)},
    ),
    ("idempotency", RefusalReason.DUPLICATE_INTENT, {"f": facts(taken_keys={"m1:terminal": None})}),
    ("identity", RefusalReason.IDENTITY_MISMATCH, {"run": run_for(event(robotCode="other"))}),
    ("write_budget", RefusalReason.WRITE_BUDGET, {"f": facts(writes_last_minute=20)}),
    ("target", RefusalReason.TARGET_UNAVAILABLE, {"run": run_for(event(), webhook=EXPIRED)}),
    ("content", RefusalReason.CONTENT_TOO_LARGE, {"raw": {"kind": "ack", "text": "x" * 4000}}),
    ("content", RefusalReason.SECRET_IN_CONTENT, {"raw": REPLY, "secrets": ("12",)}),
    (
        "attachments",
        RefusalReason.ATTACHMENT_UNSUPPORTED,
        {"raw": {**REPLY, "attachments": [{"name": "a.png", "data_base64": "aGVsbG8="}]}},
    ),
    (
        "reminder",
        RefusalReason.REMINDER_NOT_ALLOWED,
        {"raw": {**REPLY, "reminder": {"at": "2030-01-01T10:00:00+08:00", "text": "x"}}},
    ),
    ("at_all", RefusalReason.AT_ALL, {"raw": {"kind": "reply", "text": "@所有人 明天放假"}}),
    (
        "images",
        RefusalReason.FOREIGN_IMAGE,
        {"raw": {"kind": "reply", "markdown": "好 ![](https://tracker.example/p.gif)"}},
    ),
    ("claims", RefusalReason.UNBACKED_CLAIM, {"raw": {"kind": "reply", "text": "已经转告他了"}}),
    ("promises", RefusalReason.DEFERRED_PROMISE, {"raw": {"kind": "reply", "text": "稍后发你"}}),
    (
        "figures",
        RefusalReason.UNGROUNDED_FIGURE,
        {
            "raw": {"kind": "reply", "text": "国际差旅住宿每晚最多 300 美元。"},
            "f": facts(grounds=("国际差旅住宿标准：每晚不超过 180 美元。",), question="住宿标准？"),
            "run": run_for(event()).model_copy(update={"provider": "openai"}),
        },
    ),
    (
        "raw_output",
        RefusalReason.RAW_TOOL_OUTPUT,
        {
            "raw": {"kind": "reply", "text": '{"subject": "交周报", "due": "周五"}'},
            "f": facts(results=('[{"subject": "交周报", "due": "周五"}]',)),
        },
    ),
]


@pytest.mark.parametrize(
    ("check", "reason", "case"), REFUSING, ids=[reason.value for _, reason, _ in REFUSING]
)
def test_each_check_refuses_alone_and_records_the_checks_up_to_it(check, reason, case):
    result = decide(**case)
    assert isinstance(result, Refusal), result
    assert result.reason is reason
    assert result.checked == ORDER[: ORDER.index(check) + 1]


def test_the_table_covers_every_check_and_code_in_the_documented_order():
    from tests.test_acts_gate import ACT_REFUSING

    assert [c.name for c in CHECKS] == ORDER + ACT_ORDER
    assert {check for check, _, _ in REFUSING} == set(ORDER)
    assert {check for check, _, _ in ACT_REFUSING} == set(ACT_ORDER)
    # RefusalReason lists its codes in the gate's order (their values are the API, not
    # their place); the tables agree.
    reasons = [reason for _, reason, _ in REFUSING] + [r for _, r, _ in ACT_REFUSING]
    assert reasons == list(RefusalReason)


def test_each_kind_runs_the_checks_that_apply_to_it_in_table_order():
    from agent.contracts import ActionKind
    from gates.action import checks_for

    for kind in ActionKind:
        picked = checks_for(kind)
        assert picked == tuple(c for c in CHECKS if c.applies(kind))
        assert picked[0].name == "schema"  # the gate reads the kind only once it parsed
        assert checks_for(kind) is picked  # worked out once per kind


def test_reply_is_approved_and_targets_the_origin():
    run = run_for(event(user="u7"))
    result = decide(run=run)
    assert isinstance(result, Approval)
    (intent,) = result.intents
    assert intent.target == run.origin
    assert intent.idempotency_key == "m1:terminal"
    assert intent.content.text == "12"
    assert result.checked == ORDER
    assert intent.gate_checks == ORDER


def test_a_refusal_says_whether_the_refused_request_was_terminal():
    ack = {"kind": "ack", "text": "收到"}
    assert decide(ack, tally=RunTally(acks=1)).terminal is False
    assert decide(f=facts(thread_generation=2)).terminal is True
    # invalid, but it claimed to be the run's reply: the person still awaits an answer
    smuggled = decide({"kind": "reply", "text": "hi", "target": "cid-other"})
    assert (smuggled.kind, smuggled.terminal) == (ActionKind.REPLY, True)
    assert decide("not even an object").terminal is False


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
    assert refused(decide(raw), RefusalReason.SCHEMA_INVALID).checked == ["schema"]


def test_run_budget_one_ack():
    ack = {"kind": "ack", "text": "收到"}
    assert isinstance(decide(ack), Approval)
    refused(decide(ack, tally=RunTally(acks=1)), RefusalReason.RUN_BUDGET)


def test_duplicate_intent_returns_first_receipt():
    result = refused(
        decide(f=facts(taken_keys={"m1:terminal": FIRST})), RefusalReason.DUPLICATE_INTENT
    )
    assert result.first_receipt == FIRST


def test_a_reply_in_the_slot_of_the_runs_blank_card_goes_on_that_card():
    # a stop left the run's own card showing nothing: its next answer takes the card up,
    # counted once against the budget (the card was counted when it was made)
    blank = facts(
        taken_keys={"m1:terminal": None},
        blank_card_keys=frozenset({"m1:terminal"}),
        writes_last_minute=20,
    )
    for form in ("card", "text"):  # the host's own words (an honest failure) too
        approved = gate().decide(REPLY, run_for(event()), RunTally(), blank, form=form)
        assert isinstance(approved, Approval), form
        (intent,) = approved.intents
        assert intent.idempotency_key == "m1:terminal" and intent.content.msgtype == "card"
    ack = {"kind": "ack", "text": "收到"}  # only the reply takes it; an ack keeps its own slot
    taken = facts(taken_keys={"m1:ack": None}, blank_card_keys=frozenset({"m1:terminal"}))
    refused(decide(ack, f=taken), RefusalReason.DUPLICATE_INTENT)


def test_write_budget_minute_and_day():
    refused(decide(f=facts(writes_last_minute=20)), RefusalReason.WRITE_BUDGET)
    refused(decide(f=facts(writes_last_day=5), write_budget_per_day=5), RefusalReason.WRITE_BUDGET)
    assert isinstance(decide(f=facts(writes_last_minute=19)), Approval)


def test_target_unavailable_without_webhook_or_credentials():
    run = run_for(event(), webhook=EXPIRED)
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
    assert [(i.chunk, i.chunks) for i in result.intents] == [(1, 3), (2, 3), (3, 3)]
    assert "".join(i.content.text for i in result.intents).replace("\n", "") == long_text.replace(
        "\n", ""
    )
    refused(
        decide({"kind": "reply", "text": long_text}, max_reply_chars=1000, max_reply_chunks=4),
        RefusalReason.CONTENT_TOO_LARGE,
    )
    refused(decide({"kind": "ask", "text": "x" * 5000}), RefusalReason.CONTENT_TOO_LARGE)


def test_a_chunked_reply_costs_one_write_per_piece():
    long_text = "x" * 2500
    assert isinstance(decide({"kind": "reply", "text": long_text}, max_reply_chars=1000), Approval)
    result = decide(
        {"kind": "reply", "text": long_text}, f=facts(writes_last_minute=18), max_reply_chars=1000
    )
    refused(result, RefusalReason.WRITE_BUDGET)


def test_silence_needs_no_channel_and_skips_the_message_checks():
    run = run_for(event(robotCode="other"), webhook=None)
    result = decide({"kind": "silence", "reason": "nothing to add"}, run=run)
    assert isinstance(result, Approval)
    (intent,) = result.intents
    assert intent.content is None
    assert intent.idempotency_key == "m1:terminal"
    assert result.checked == intent.gate_checks == ORDER[: ORDER.index("idempotency") + 1]


def test_idempotency_keys_and_split():
    assert idempotency_key("m", ActionKind.ACK) == "m:ack"
    assert idempotency_key("m", ActionKind.ASK) == "m:terminal"
    assert slot_keys("m") == ["m:ack", "m:terminal", "m:note"]  # the host's follow-up line
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


PIXEL = "https://tracker.example/p.gif?u=u1&read=1767225600"


def decide_as(raw, form):
    return gate().decide(raw, run_for(event()), RunTally(), facts(), form=form)


def test_markdown_shows_images_by_dingtalk_media_id_only():
    pixel = {"kind": "reply", "markdown": f"报销单见下图 ![]({PIXEL})"}
    result = refused(decide(pixel), RefusalReason.FOREIGN_IMAGE)
    assert "tracker.example" in result.detail and "u1" not in result.detail  # no query
    assert result.checked[-1] == "images"
    media = {"kind": "reply", "markdown": "报销单见下图 ![报销单](@lADPDe7s2ySi18PNA6XNBXg)"}
    assert isinstance(decide(media), Approval)
    link = {"kind": "reply", "markdown": "[报销制度](https://hr.example/policy?id=7)"}
    assert isinstance(decide(link), Approval)
    title = {"kind": "ask", "markdown": "哪天？", "title": f"![]({PIXEL})"}
    refused(decide(title), RefusalReason.FOREIGN_IMAGE)


def test_text_is_judged_as_markdown_only_where_it_goes_as_markdown():
    text = {"kind": "reply", "text": f"图片语法是 ![]({PIXEL})"}
    assert isinstance(decide_as(text, "text"), Approval)  # a text message shows it as written
    for form in ("markdown", "card"):
        assert decide_as(text, form).reason is RefusalReason.FOREIGN_IMAGE
    # an ask or an ack goes as text whatever the reply form, unless it is markdown itself
    ask = {"kind": "ask", "text": f"是这张吗 ![]({PIXEL})"}
    assert isinstance(decide_as(ask, "markdown"), Approval)
    ack = {"kind": "ack", "markdown": f"收到 ![]({PIXEL})"}
    assert decide_as(ack, "text").reason is RefusalReason.FOREIGN_IMAGE


def test_each_chunk_of_a_long_markdown_reply_is_judged_as_it_is_shown():
    # the fence opens in the first chunk; the second, shown alone, shows the image
    body = "```\n" + "代码\n" * 60 + f"![]({PIXEL})\n```"
    whole = {"kind": "reply", "markdown": body}
    refused(decide(whole, max_reply_chars=100), RefusalReason.FOREIGN_IMAGE)
    assert isinstance(decide(whole), Approval)  # one message: the image is code


def test_load_facts_reads_what_an_approved_intent_left_in_the_store(tmp_path):
    store = Store(tmp_path / "dta.db")
    try:
        run = run_for(event())
        empty = load_facts(store, run, T0)
        assert (empty.now, empty.writes_last_minute, empty.writes_last_day) == (T0, 0, 0)
        assert empty.taken_keys == {}
        (intent,) = decide(run=run, f=empty).intents
        assert store.actions.add_intent(intent)
        after = load_facts(store, run, T0 + 1)
        assert (after.writes_last_minute, after.writes_last_day) == (1, 1)
        assert list(after.taken_keys) == ["m1:terminal"]
        refused(decide(run=run, f=after), RefusalReason.DUPLICATE_INTENT)
        assert load_facts(store, run, T0 + 61).writes_last_minute == 0
    finally:
        store.close()


def test_the_days_writes_count_only_the_last_day(store):
    """The day's total, whichever way the store finds it, leaves out older writes."""
    for n, at in enumerate((T0 - 3 * 86_400, T0 - 2 * 86_400, T0 - 100, T0 - 50, T0 - 10)):
        run = run_for(event(msg_id=f"old-{n}"))
        (intent,) = decide(run=run, f=load_facts(store, run, at)).intents
        assert store.actions.add_intent(intent.model_copy(update={"created_at": at}))
    run = run_for(event(msg_id="now"))
    facts_now = load_facts(store, run, T0)
    assert (facts_now.writes_last_day, facts_now.writes_last_minute) == (3, 2)
    assert load_facts(store, run, T0 + 5 * 86_400).writes_last_day == 0


def test_an_act_read_back_later_keeps_a_promise_and_backs_no_claim():
    from gates.backing import ASKER, Backing

    act = Backing("act", "uncertain", frozenset({"todo"}), frozenset({ASKER}), ("交房租",))
    later = facts(backing=(act, Backing("follow_up")))
    promise = {"kind": "reply", "text": "待办已提交，结果还没确认，稍后告诉你。"}
    assert isinstance(decide(promise, f=later), Approval)
    bare = {"kind": "reply", "text": "结果还没确认，稍后告诉你。"}
    refused(decide(bare), RefusalReason.DEFERRED_PROMISE)  # nothing to keep it
    refused(decide(promise), RefusalReason.UNBACKED_CLAIM)  # nothing was submitted either
    for claim in ("已经通知张三了。", "待办已经帮你创建好了。"):
        refused(decide({"kind": "reply", "text": claim}, f=later), RefusalReason.UNBACKED_CLAIM)


TRAVEL = "国际差旅住宿标准：每晚不超过 180 美元，一次出差最多报销 3 晚。"


def _figured(text, grounds=(TRAVEL,), question="出国住宿一晚能报多少？", provider="openai"):
    run = run_for(event()).model_copy(update={"provider": provider})
    f = facts(grounds=grounds, question=question)
    return gate().decide({"kind": "reply", "text": text}, run, RunTally(), f)


def test_an_answer_figure_must_come_from_its_sources_the_question_or_a_shown_computation():
    wrong = refused(_figured("每晚最多 300 美元。"), RefusalReason.UNGROUNDED_FIGURE)
    assert "300 美元" in wrong.detail and "180 美元" in wrong.detail  # both sides named
    assert wrong.checked[-1] == "figures"
    assert isinstance(_figured("每晚不超过 180 美元，最多 3 晚。"), Approval)
    two = "住两晚能报多少？"
    assert isinstance(_figured("两晚最多 180 美元 × 2 = 360 美元。", question=two), Approval)
    refused(
        _figured("两晚最多 180 美元 × 2 = 380 美元。", question=two),
        RefusalReason.UNGROUNDED_FIGURE,
    )
    # a count nobody gave is a figure too (the question asked of one night)
    refused(_figured("两晚最多 180 美元 × 2 = 360 美元。"), RefusalReason.UNGROUNDED_FIGURE)
    # the question's own figures pass; a tool result grounds like knowledge
    assert isinstance(_figured("住 4 晚的话，第 4 晚不能报。", question="住 4 晚呢？"), Approval)
    tool = ('{"title": "季度报告", "due": "2026-12-05"}',)
    assert isinstance(_figured("季度报告 2026-12-05 截止。", grounds=tool), Approval)
    refused(_figured("季度报告 2026-12-08 截止。", grounds=tool), RefusalReason.UNGROUNDED_FIGURE)


def test_figures_are_not_checked_without_sources_nor_for_the_rules_providers_own_arithmetic():
    assert isinstance(_figured("一般要 3 个工作日。", grounds=()), Approval)
    assert isinstance(_figured("每晚最多 300 美元。", provider="rules"), Approval)


def test_a_reply_says_tool_results_in_words_never_their_fields_or_staff_ids():
    results = ('[{"subject": "交周报", "done": false, "executorIds": ["manager4521"]}]',)
    f = facts(results=results, ids=("manager4521", "u1"))
    pasted = {"kind": "reply", "text": '张三的待办：{"subject": "交周报", "executorIds": []}'}
    refused(decide(pasted, f=f), RefusalReason.RAW_TOOL_OUTPUT)
    staff = {"kind": "reply", "text": "交周报的执行人是 manager4521。"}
    assert "manager4521" in refused(decide(staff, f=f), RefusalReason.RAW_TOOL_OUTPUT).detail
    prose = {"kind": "reply", "text": "张三有一条待办「交周报」，还没完成。"}
    assert isinstance(decide(prose, f=f), Approval)
    mention = {"kind": "reply", "text": "@manager4521 你的周报还没交。"}
    assert isinstance(decide(mention, f=f), Approval)  # how DingTalk @-s someone


def test_the_ai_label_goes_once_on_a_models_words_and_never_on_rules_or_the_hosts():
    from gates.frames import final_check

    model_run = run_for(event()).model_copy(update={"provider": "openai"})
    label = {"ai_label": "end", "ai_label_text": "内容由 AI 生成"}

    def texts(raw, run=model_run, **extra):
        result = gate(**label, **extra).decide(raw, run, RunTally(), facts())
        assert isinstance(result, Approval), result
        return [i.content.text for i in result.intents]

    assert texts({"kind": "reply", "text": "好的"}) == ["好的\n\n内容由 AI 生成"]
    said_it = {"kind": "reply", "text": "好的\n\n内容由 AI 生成"}  # the model wrote it too
    assert texts(said_it) == ["好的\n\n内容由 AI 生成"]
    assert texts({"kind": "reply", "text": "7 + 5 = 12"}, run_for(event())) == ["7 + 5 = 12"]
    host = gate(**label).decide(
        {"kind": "reply", "text": "好的"}, model_run, RunTally(), facts(), from_provider=False
    )
    assert [i.content.text for i in host.intents] == ["好的"]
    # a streamed card's end: once, also when the model's words already end with it
    ended = final_check(gate(**label), said_it, model_run, T0)
    assert ended.label_footer == ""
    fresh = final_check(gate(**label), {"kind": "reply", "text": "好的"}, model_run, T0)
    assert fresh.label_footer == "\n\n内容由 AI 生成"
