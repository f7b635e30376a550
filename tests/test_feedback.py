"""👍 / 👎 on answers: the store's ratings (both engines), the click that makes one, and
what reads them — ``dta trace``, ``/metrics``, ``dta feedback export | case``, the console's
feedback page — over the store a lab case left."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.acts.clicks import ClickDesk
from agent.acts.feedback import NOT_YOURS, THANKS
from agent.cards.api import CardAPI
from agent.cli.console.server import start_console
from agent.cli.feedback import draft_case, export
from agent.cli.main import main
from agent.cli.trace import trace_message
from agent.cli.trace_text import render
from agent.config import ConfigError, Settings
from agent.config.settings import validate_settings
from agent.contracts import CardClick, ConversationType, Origin
from agent.daemon.metrics import Metrics, RobotView
from lab.eval.cases import Case, load_case
from lab.eval.runner import CaseRun
from storage import Store
from storage.feedback import Press

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "lab/cases/conversation-contract/feedback"
T0 = 1_767_225_600.0
LATER = T0 + 400 * 86400  # after anything a lab case's virtual clock pressed


def press(user: str, rating: str, frame: str, at: float, reason: str | None = None) -> Press:
    return Press(
        "m1", user, rating, frame, at, run_id="run-m1", reason=reason, conversation_id="g1"
    )


# ------------------------------------------------------------------ the store, both engines


def test_one_rating_per_person_and_answer_the_latest_press_wins(store: Store) -> None:
    assert store.feedback.rate(press("u1", "up", "f1", T0))
    assert store.feedback.rate(press("u1", "down", "f2", T0 + 5, "不对"))
    assert store.feedback.rate(press("u2", "up", "f3", T0 + 6))
    held = [(r.user_id, r.rating, r.reason) for r in store.feedback.of_event("m1")]
    assert held == [("u1", "down", "不对"), ("u2", "up", None)]
    assert store.feedback.counts() == [("down", 1), ("up", 1)]


def test_a_redelivered_callback_changes_nothing(store: Store) -> None:
    assert store.feedback.rate(press("u1", "up", "f1", T0))
    assert store.feedback.rate(press("u1", "down", "f2", T0 + 5))
    assert not store.feedback.rate(press("u1", "up", "f1", T0 + 60))  # f1 again, late
    assert [r.rating for r in store.feedback.of_event("m1")] == ["down"]


def test_an_older_press_handled_late_never_overwrites_a_newer_one(store: Store) -> None:
    assert store.feedback.rate(press("u1", "down", "f2", T0 + 5))
    assert store.feedback.rate(press("u1", "up", "f1", T0))  # another replica, later
    assert [r.rating for r in store.feedback.of_event("m1")] == ["down"]


def test_ratings_since_a_time_in_press_order(store: Store) -> None:
    store.feedback.rate(press("u1", "up", "f1", T0))
    store.feedback.rate(press("u2", "down", "f2", T0 + 100))
    assert [r.user_id for r in store.feedback.since()] == ["u1", "u2"]
    assert [r.user_id for r in store.feedback.since(T0 + 50)] == ["u2"]


# ------------------------------------------------------------------ a lab case's store


def _played(name: str, workdir: Path) -> Path:
    result = asyncio.run(CaseRun(load_case(CASES / name), workdir).run())
    assert result.passed, (result.error, [str(p) for p in result.problems])
    return workdir / "dta.db"


@pytest.fixture(scope="module")
def group_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """u1 👍 and u2 👎 (with a reason, pressed twice) on the answer to m1 in group g1."""
    return _played("two-people-in-a-group-each-count.json", tmp_path_factory.mktemp("fb-group"))


@pytest.fixture(scope="module")
def dm_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """u1's 👍 on the answer to m1 in a one-to-one chat."""
    return _played("thumbs-up-is-kept-with-the-answer.json", tmp_path_factory.mktemp("fb-dm"))


def _click(user: str, action: str, track: str, frame: str, reason: str | None = None) -> CardClick:
    return CardClick(
        frame_id=frame,
        out_track_id=track,
        user_id=user,
        action=action,
        received_at=LATER,
        reason=reason,
    )


def test_a_press_is_answered_privately_and_kept_once(dm_store: Path, tmp_path: Path) -> None:
    copy = tmp_path / "dta.db"
    copy.write_bytes(dm_store.read_bytes())
    with Store(copy) as store:
        track = store.cards.all()[0].out_track_id
        desk = ClickDesk(store, None)
        answer = desk.receive(_click("u1", "down", track, "fx", "太简略"))
        assert answer.event is None, "a rating runs nothing"
        private = answer.response["userPrivateData"]["cardParamMap"]
        assert private == {"rated_said": THANKS, "rated": "down"}
        assert "cardData" not in answer.response, "the card everyone sees stays as it is"
        desk.receive(_click("u1", "up", track, "fx"))  # fx redelivered: nothing changes
        rated = store.feedback.of_event("m1")
        assert [(r.rating, r.reason, r.run_id) for r in rated] == [
            ("down", "太简略", store.events.get_run("m1").run_id)
        ]
        stranger = desk.receive(_click("u9", "up", track, "fy"))  # a forwarded DM card
        assert stranger.response["userPrivateData"]["cardParamMap"] == {"rated_said": NOT_YOURS}
        assert desk.receive(_click("u1", "up", "no-such-card", "fz")).response == "OK"
        assert len(store.feedback.since()) == 1
        assert store.approvals.click("fy")["outcome"] == "not_in_conversation"
        assert store.approvals.click("fz")["outcome"] == "unknown"


def test_trace_shows_who_rated_how_why_and_when(group_store: Path) -> None:
    with Store(group_store) as store:
        trace = trace_message(store, "m1", "Asia/Shanghai")
    assert [(f["by"], f["rating"], f["reason"]) for f in trace.feedback] == [
        ("u1", "up", None),
        ("u2", "down", "没写计算过程"),
    ]
    lines = "\n".join(render(trace))
    assert "  feedback 👍 up by u1 at 2026-" in lines and "+08:00" in lines
    assert "feedback 👎 down by u2 at " in lines and ": 没写计算过程" in lines
    assert trace.to_dict()["feedback"][1]["sign"] == "👎"


def test_metrics_count_feedback_by_rating(group_store: Path) -> None:
    with Store(group_store) as store:
        text = Metrics([RobotView("r1", store=store)]).render().decode()
    assert 'dta_feedback{rating="down",robot="r1"} 1.0' in text
    assert 'dta_feedback{rating="up",robot="r1"} 1.0' in text


def test_export_writes_the_question_the_sources_and_the_answer(
    group_store: Path, tmp_path: Path
) -> None:
    out = tmp_path / "feedback.jsonl"
    assert main(["feedback", "export", "--store", str(group_store), "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(x["by"], x["rating"]) for x in lines] == [("u1", "up"), ("u2", "down")]
    down = lines[1]
    assert down["schema"] == "dta.feedback/1" and down["reason"] == "没写计算过程"
    assert down["question"] == "2 + 3 等于几" and "5" in down["answer"]
    assert down["provider"] == "rules" and down["conversation"] == "g1"
    assert isinstance(down["sources"], list) and down["run_id"]
    with Store(group_store) as store:
        later = _lines(store, since=T0 + 10 * 365 * 86400)
    assert later == []


def _lines(store: Store, since: float | None) -> list[Any]:
    import io

    out = io.StringIO()
    export(store, out, since, "Asia/Shanghai")
    return out.getvalue().splitlines()


def test_a_thumbs_down_becomes_a_case_draft_that_is_invalid_until_completed(
    group_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["feedback", "case", "m1", "--store", str(group_store)]) == 0
    draft = json.loads(capsys.readouterr().out)
    assert draft["schema"] == "dta.lab.case/1" and "draft" in draft["tags"]
    assert draft["title"].startswith("DRAFT") and "没写计算过程" in draft["description"]
    assert draft["steps"] == [
        {
            "at": 0,
            "send": {
                "msg": "m1",
                "from": "u1",
                "text": "2 + 3 等于几",
                "group": "g1",
                "at_bot": True,
            },
        }
    ]
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(draft, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(Exception, match="TODO"):
        load_case(path)  # a draft never runs as it is
    draft["expect"] = {"platform": {"count": 1, "messages": [{"contains": ["5"]}]}}
    completed = Case.model_validate(draft)
    result = asyncio.run(CaseRun(completed, tmp_path / "run").run())
    assert result.passed, [str(p) for p in result.problems]


def test_no_case_from_an_answer_nobody_rated_down(dm_store: Path) -> None:
    with Store(dm_store) as store:
        said = draft_case(store, "m1", "Asia/Shanghai")
        run_id = store.events.get_run("m1").run_id
        assert isinstance(said, str) and "no 👎" in said
        assert "no 👎" in str(draft_case(store, run_id, "Asia/Shanghai")), "a run id names it too"
        assert "no stored message" in str(draft_case(store, "nope", "Asia/Shanghai"))
    assert main(["feedback", "case", "m1", "--store", str(dm_store)]) == 1


async def test_the_console_feedback_page(group_store: Path) -> None:
    runner, url = await start_console(group_store, Settings(store_path=group_store))
    try:
        base, _, query = url.partition("/?")
        headers = {"Authorization": f"Bearer {query.removeprefix('token=')}"}
        async with httpx.AsyncClient(trust_env=False) as client:
            page = await client.get(base + "/feedback", headers=headers)
            trace = await client.get(base + "/trace/m1", headers=headers)
    finally:
        await runner.cleanup()
    assert page.status_code == 200
    html = page.text
    assert 'id="by-conversation"' in html and 'data-key="g1"' in html
    assert 'id="by-provider"' in html and 'data-key="rules"' in html
    assert 'id="by-skill"' in html and 'id="by-day"' in html
    assert 'data-rating="down"' in html and "没写计算过程" in html
    assert "👍 1" in html and "👎 1" in html and "50% 👍" in html
    assert 'id="feedback"' in trace.text and "没写计算过程" in trace.text


# ------------------------------------------------------------------ cards and configuration


def test_answer_cards_say_their_buttons_are_shown_unless_turned_off() -> None:
    origin = Origin(conversation_id="c1", conversation_type=ConversationType.DM, user_id="u1")
    shown = CardAPI(None, "robot", "tpl", "content", feedback=True)  # type: ignore[arg-type]
    body = shown.create_body("t1", origin, "dtv1.card//IM_ROBOT.u1")
    assert body["cardData"]["cardParamMap"] == {"flowStatus": "2", "feedback": "on"}
    hidden = CardAPI(None, "robot", "tpl", "content")  # type: ignore[arg-type]
    assert "feedback" not in hidden.create_body("t1", origin, "s")["cardData"]["cardParamMap"]
    assert Settings().feedback_buttons is True


def test_a_bad_feedback_buttons_value_stops_start_up_naming_it() -> None:
    with pytest.raises(ConfigError, match="feedback_buttons"):
        validate_settings({"feedback_buttons": "maybe"}, source="dta.toml")


def test_dingtalks_callback_shape_is_read_as_a_press() -> None:
    """The shape a template button's press arrives in (forms doc §3.5): ``value`` as a JSON
    string with the action id, no ``params.action``."""
    from agent.dingtalk.card_callback import parse_click

    value = {"cardPrivateData": {"actionIds": ["feedback_down"], "params": {"reason": "太长"}}}
    data = {"outTrackId": "t1", "userId": "u1", "value": json.dumps(value), "spaceType": "IM"}
    click = parse_click(data, "f1", T0)
    assert (click.action, click.reason) == ("down", "太长")
