"""A file and the words about it, sent together: which run answers (agent/run/together.py)."""

from __future__ import annotations

from pathlib import Path

from agent.cli.trace import Cause, trace_message
from agent.clock import VirtualClock
from agent.components import invocation_limits
from agent.contracts import RunState
from agent.dingtalk.ingest import Ingestor
from agent.run import pipeline
from agent.run.invocation import InvocationBuilder
from agent.run.media import MediaFetcher
from agent.run.together import answered_by, supplies
from lab.eval.cases import discover, load_case
from lab.eval.runner import CaseRun, run_case
from storage import Store
from tests.factories import T0, built, callback, frame, run_for


def stored(store, msg_id, text="", file=False, created_at=T0, **kwargs):
    """A message stored as ingest stores it: words, or a file alone (no text)."""
    data = callback(msg_id=msg_id, text=text, created_at=created_at, **kwargs)
    if file:
        del data["text"]
        data["msgtype"] = "file"
        data["content"] = {"downloadCode": f"code-{msg_id}", "fileName": "a.txt"}
    return Ingestor(store).ingest(frame(data, f"f-{msg_id}"), T0).event


def builder(store, **limits):
    return InvocationBuilder(store, VirtualClock(T0), None, built(invocation_limits, **limits))


def taker(store, ev, engages=lambda e: True, **limits):
    found = answered_by(ev, builder(store, **limits), engages)
    return found.event_id if found is not None else None


def test_words_at_the_same_instant_answer_the_file_in_either_order(store):
    words = stored(store, "w", "帮我看下这个文件")
    file = stored(store, "f", file=True)
    assert taker(store, file) == "w"
    other = stored(store, "f2", file=True, user="u2")
    stored(store, "w2", "帮我看下这个文件", user="u2")
    assert taker(store, other) == "w2"
    assert taker(store, words) is None  # the words answer themselves


def test_a_file_alone_or_with_words_before_it_answers_itself(store):
    assert taker(store, stored(store, "f", file=True)) is None
    stored(store, "w", "7 + 5 等于多少", created_at=T0 + 60)
    later = stored(store, "f2", file=True, created_at=T0 + 61)  # words before it do not take it
    assert taker(store, later) is None


def test_words_later_in_the_burst_take_it_but_not_past_the_window(store):
    file = stored(store, "f", file=True)
    stored(store, "w", "这是什么", created_at=T0 + 30)
    assert taker(store, file) == "w"
    assert taker(store, file, burst_window_s=10) is None
    assert taker(store, file, burst_window_s=0) is None


def test_words_take_only_the_latest_file_before_them(store):
    first = stored(store, "f1", file=True, created_at=T0 - 5)
    second = stored(store, "f2", file=True)
    stored(store, "w", "帮我看下这个文件")
    assert taker(store, second) == "w"
    assert taker(store, first) is None  # the earlier file is answered by its own run


def test_words_that_answer_nothing_leave_the_file_its_answer(store):
    file = stored(store, "f", file=True)
    stored(store, "stop", "算了")
    assert taker(store, file) is None  # a stop answers nothing
    stored(store, "group", "帮我看下这个文件", group="cid-g")  # another conversation
    assert taker(store, file) is None
    stored(store, "w", "帮我看下这个文件")
    assert taker(store, file, engages=lambda e: False) is None  # the gate is silent on it
    assert taker(store, file) == "w"


def test_words_whose_run_ended_without_an_answer_do_not_take_it(store):
    file = stored(store, "f", file=True)
    words = stored(store, "w", "帮我看下这个文件")
    run = store.work.open_run(run_for(words))
    for state, takes in [
        (RunState.WORKING, True),
        (RunState.DONE, True),
        (RunState.SILENT, False),
        (RunState.INTERRUPTED, False),
    ]:
        store.events.save_run(run.model_copy(update={"state": state}))
        assert (taker(store, file) == "w") is takes, state


def test_words_that_take_a_file_supply_a_waiting_task(store):
    b = builder(store)
    assert not supplies(stored(store, "w0", "帮我看下这个文件", created_at=T0 - 300), b)
    stored(store, "f", file=True)
    assert supplies(stored(store, "w", "帮我看下这个文件"), b)  # the file came with them
    assert supplies(stored(store, "f2", file=True), b)  # its own media


CASES = Path(__file__).resolve().parents[1] / "lab" / "cases"
TOGETHER = CASES / "conversation-contract" / "together"


async def _failing(paths):
    return {r.case.id for r in [await run_case(c) for c in discover(paths)] if not r.passed}


async def test_the_cases_fail_when_the_file_answers_itself_again(monkeypatch):
    assert await _failing([TOGETHER]) == set()
    monkeypatch.setattr(pipeline, "answered_by", lambda event, invocations, engages: None)
    assert await _failing([TOGETHER]) == {
        "file-then-ask-at-once-is-answered-once",
        "ask-then-file-at-once-is-answered-once",
        "question-and-picture-at-once-is-one-answer",
        "asked-for-file-comes-with-its-words",
    }  # a file alone, and a file a minute before an unrelated question, as before


async def test_the_cases_fail_when_words_download_an_answered_file_again(monkeypatch):
    monkeypatch.setattr(MediaFetcher, "_kept", lambda self, run_id: {})
    assert await _failing([TOGETHER]) == {
        "file-and-unrelated-text-a-minute-apart",
        "words-after-an-answered-file-read-its-kept-copy",
    }


async def test_trace_says_the_file_was_answered_with_its_words(tmp_path):
    case = load_case(TOGETHER / "ask-then-file-at-once-is-answered-once.json")
    done = await CaseRun(case, tmp_path).run()
    assert done.passed, done.problems
    with Store(tmp_path / "dta.db") as store:
        trace = trace_message(store, "m1")
    assert trace.cause is Cause.ANSWERED
    assert "answered together with the words sent with it" in trace.summary
    assert "m2" in trace.summary
