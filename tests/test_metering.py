"""Model budgets (agent/run/metering.py) over the store's model_usage, on both backends."""

from __future__ import annotations

from agent.clock import VirtualClock
from agent.components import model_limits
from agent.config import Settings
from agent.daemon.metrics import Metrics, RobotView
from agent.run.metering import ModelMeter, limited
from tests.factories import T0, event, run_for


def _meter(store, **settings) -> ModelMeter:
    return ModelMeter(store, VirtualClock(T0), model_limits(Settings(**settings)))


def _spend(store, meter, user: str, msg: str, prompt: int, completion: int) -> None:
    ev = event(msg_id=msg, user=user)
    run = run_for(ev)
    store.events.add_event(ev, "{}")
    store.work.open_run(run)
    meter.record(
        run, ev, "qwen-plus", {"prompt_tokens": prompt, "completion_tokens": completion}, None
    )


def test_a_limit_is_reached_by_the_call_that_crosses_it_and_checked_before_the_next(store):
    meter = _meter(
        store,
        model_tokens_per_person_per_day=1000,
        model_prices={"qwen-plus": {"input": 0.002, "output": 0.006}},
    )
    assert meter.over_limit(event(user="u1")) is None
    _spend(store, meter, "u1", "m1", 900, 300)  # crosses 1,000: delivered, then over
    assert meter.over_limit(event(user="u1")) == "the person's tokens today: 1200 of 1000"
    assert meter.over_limit(event(user="u2", msg_id="m9")) is None  # someone else is not
    ((model, degraded, runs, tokens, cost),) = store.usage.model_usage_totals()
    assert (model, degraded, runs, tokens) == ("qwen-plus", None, 1, 1200)
    assert abs(cost - (900 * 0.002 + 300 * 0.006) / 1000) < 1e-9
    text = Metrics([RobotView("r1", store)]).render().decode()
    assert 'dta_model_tokens{degraded="",model="qwen-plus",robot="r1"} 1200.0' in text


def test_no_limits_read_nothing(store):
    assert _meter(store).over_limit(event()) is None


def test_the_fallbacks_words_say_it_is_limited():
    (said,) = limited([{"kind": "reply", "text": "报销需要发票"}], "model_budget")
    assert said["text"].startswith("（助手今天的用量已到上限") and said["text"].endswith(
        "报销需要发票"
    )
