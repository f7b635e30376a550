"""The rules provider in context: ask for what is missing, resume, use quotes, greet."""

from agent.contracts import (
    ActionRequest,
    AgentDefinition,
    Identity,
    QuotedMessage,
    TaskCheckpoint,
    TaskStatus,
)
from skills.providers import followup
from skills.providers.rules import RulesProvider
from tests.test_rules_provider import make_invocation

PROVIDER = RulesProvider(AgentDefinition(name="小钉"), None)


def answer(inv):
    request = PROVIDER.answer_invocation(inv)
    ActionRequest.model_validate(request)
    return request


def waiting_task() -> TaskCheckpoint:
    return TaskCheckpoint(
        task_id="t",
        scope_id="s",
        status=TaskStatus.WORKING,
        revision=2,
        goal=followup.CALCULATION_GOAL,
        done_when=[followup.CALCULATION_DONE],
        updated_by_run="r",
        created_at=0,
        updated_at=0,
    )


def test_bare_request_asks_one_short_question_and_opens_a_task():
    request = answer(make_invocation("帮我算一下"))
    assert request["kind"] == "ask" and "算式" in request["text"]
    assert request["task"]["goal"] == followup.CALCULATION_GOAL


def test_continuation_is_read_as_the_expression_and_completes():
    inv = make_invocation("7+5").model_copy(update={"continuation": waiting_task()})
    request = answer(inv)
    assert request == {"kind": "reply", "text": "7 + 5 = 12", "task": {"status": "completed"}}


def test_continuation_without_expression_asks_again():
    inv = make_invocation("就是那个").model_copy(update={"continuation": waiting_task()})
    assert answer(inv)["kind"] == "ask"


def test_quote_supplies_the_expression():
    quote = QuotedMessage(source="store:event", text="3.5 × 4 是多少")
    inv = make_invocation("帮忙算一下这个").model_copy(update={"quote": quote})
    assert answer(inv)["text"] == "你引用的那条：3.5 × 4 = 14"


def test_missing_quote_is_admitted_not_guessed():
    quote = QuotedMessage(source="callback", missing="arrived empty", from_robot=True)
    inv = make_invocation("这个是什么意思").model_copy(update={"quote": quote})
    request = answer(inv)
    assert request["kind"] == "ask" and "看不到" in request["text"]


def test_unrelated_message_ignores_the_quote():
    quote = QuotedMessage(source="callback", text="1+1")
    inv = make_invocation("你是谁").model_copy(update={"quote": quote})
    assert "我是小钉" in answer(inv)["text"]


def test_introduction_greets_by_directory_name():
    identity = Identity(source="directory", user_id="u1", name="张三")
    inv = make_invocation("你是谁").model_copy(update={"identity": identity})
    assert answer(inv)["text"].startswith("你好，张三！我是小钉")


def test_forward_request_is_not_mistaken_for_a_calculation():
    request = answer(make_invocation("帮我算一下然后转发到销售群"))
    assert request["kind"] == "reply" and "只能在这里回复你" in request["text"]
