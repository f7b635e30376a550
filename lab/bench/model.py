"""``dta lab bench --only model``: the model path under load, against what its concurrency allows.

A burst of one-to-one conversations (300; 60 with ``--quick``: each a different sender with
one message, all at the same moment) goes to ``dta run`` as a subprocess over the real
``dingtalk-stream`` client, with the ``openai`` provider pointed at a fake model that takes
a real model's time (``lab.models.fake_model_paced``: 1-3 s, seeded, then about 30 tokens a
second). The daemon is its own process, as in the stream bench, so its CPU time and memory
(``/proc``) are its own: the fake DingTalk and the fake model share this process, never the
daemon's.

Run once per ``max_concurrent_runs`` setting in text mode, then once in card mode (the
answer streamed into an AI card) at the highest setting. Reported per run:

- ``replies_per_s``: conversations answered / seconds from the burst to the last reply
  (card mode: the last card's final frame); ``ideal_replies_per_s``: the setting's
  concurrency (or the burst, if smaller) / the mean model request time as the fake model
  served it; ``efficiency``: their ratio;
- ``cpu_ms_per_run``: the daemon's user + system CPU over the burst, per answered run;
- ``rss_kib_per_run_in_flight``: (peak RSS during the burst - RSS just before it) / the
  peak of runs in flight (messages sent and not yet answered, seen from the platform);
- card mode: the time from each message's arrival (its frame sent) to the first card frame
  the platform received, p50 and p99, and the same from its model's first token.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent.clock import SystemClock
from agent.config import Settings
from agent.run.answering import ACK_TEXT
from lab.bench.stream import _cpu_seconds, _percentile
from lab.daemon import DaemonProcess, until
from lab.fake import FakeDingTalk
from lab.fake.calls import call_counts
from lab.models.fake_model_paced import PacedModel
from lab.models.labelled import labelled

SEED = 20_261_202
ANSWER = {
    "kind": "reply",
    "text": (
        "报销分三步：在 OA 里新建费用报销单并上传发票照片；提交后由直属主管审批，"
        "超过五千元还需部门负责人复核；财务在审批通过后三个工作日内打款到工资卡。"
    ),
}
QUESTION = "报销怎么走？"
KEY_PATTERN = r"mdl-[a-z0-9]+-\d{4}"  # the bench's message ids, found in the model's prompt
SAMPLE_S = 0.05
WARM_UP = 2
# The app-wide card budget: the default, and the most the setting allows (what the cards
# cost dta itself once the budget is out of the way).
DEFAULT_CARD_RATE = float(Settings.model_fields["card_frames_per_second"].default)
CARD_RATES = (DEFAULT_CARD_RATE, 100.0)


@dataclass(frozen=True)
class ModelLoad:
    conversations: int
    concurrency: tuple[int, ...]  # the max_concurrent_runs settings, text mode each
    latency_s: tuple[float, float] = (1.0, 3.0)
    tokens_per_s: float = 30.0
    card_rates: tuple[float, ...] = CARD_RATES  # card_frames_per_second, card mode each


@dataclass(frozen=True)
class ModelRun:
    mode: str  # text | card
    max_concurrent_runs: int
    conversations: int
    replies: int  # conversations that got their answer
    answered_once: int  # conversations with exactly one answer (acks aside)
    whole: int  # answers that are the model's whole text (a card: finished with it)
    acks: int  # "稍等" messages sent while answers were still coming
    seconds: float
    replies_per_s: float
    model_requests: int
    model_seconds_mean: float  # one request, arrival to last byte, as the fake served it
    ideal_replies_per_s: float
    efficiency: float
    peak_model_requests_open: int
    cpu_ms_per_run: float
    rss_before_kib: int
    rss_peak_kib: int
    peak_runs_in_flight: int
    rss_kib_per_run_in_flight: float
    card_frames_per_second: float | None = None
    card_calls_per_card: float | None = None
    card_first_frame_p50_ms: float | None = None
    card_first_frame_p99_ms: float | None = None
    # From the model's first token to the card's first frame: dta's own share of the wait.
    card_after_first_token_p50_ms: float | None = None
    card_after_first_token_p99_ms: float | None = None


def _config(mode: str, concurrency: int, model: PacedModel, rate: float) -> dict[str, Any]:
    config: dict[str, Any] = {
        "log_level": "WARNING",
        "stream_ping_interval_s": 10,  # production keepalive, as in the stream bench
        "stream_ping_timeout_s": 10,
        "provider": "openai",
        "openai_base_url": model.base_url,
        "openai_model": "dta-bench-paced",
        "max_concurrent_runs": concurrency,
    }
    if mode == "card":
        config |= {
            "reply_mode": "card",
            "card_template_id": "bench-card.schema",
            "card_frames_per_second": rate,
        }
    return config


class _Tally:
    """What the platform has of one burst: answers by sender, and when each was done."""

    def __init__(self, fake: FakeDingTalk, mode: str, users: dict[str, str]) -> None:
        self.fake, self.mode = fake, mode
        self.users = users  # sender → the message id it sent
        self.mark_messages, self.mark_cards = len(fake.received), len(fake.cards)
        self.mark_log = len(fake.request_log)

    def answers(self) -> dict[str, list[float]]:
        """Sender → the done time of each answer (a card: its final frame)."""
        done: dict[str, list[float]] = {}
        if self.mode == "card":
            for card in self.fake.cards[self.mark_cards :]:
                if card.finalized and card.frames:
                    for user in card.user_ids:
                        done.setdefault(user, []).append(card.frames[-1]["at"])
            return done
        for message in self.fake.received[self.mark_messages :]:
            if message.text != ACK_TEXT and message.channel != "card":
                for user in message.user_ids:
                    done.setdefault(user, []).append(message.time)
        return done

    def whole(self) -> int:
        """Answers carrying the model's whole text (a card also finished with it)."""
        text = labelled(ANSWER["text"])
        if self.mode == "card":
            cards = self.fake.cards[self.mark_cards :]
            return sum(c.content == text and c.flow_status == "3" for c in cards)
        return sum(m.text == text for m in self.fake.received[self.mark_messages :])

    def card_calls_per_card(self) -> float | None:
        """Card API calls (create, frames, finished state) per card the burst made."""
        cards = len(self.fake.cards) - self.mark_cards
        calls = call_counts(self.fake.request_log[self.mark_log :])["card"]
        return round(calls / cards, 2) if cards else None

    def acks(self) -> int:
        return sum(m.text == ACK_TEXT for m in self.fake.received[self.mark_messages :])

    def first_frames(self) -> dict[str, float]:
        return {
            user: card.frames[0]["at"]
            for card in self.fake.cards[self.mark_cards :]
            if card.frames
            for user in card.user_ids
        }


async def _warm_up(fake: FakeDingTalk, tag: str) -> None:
    """A few answers through the model path first: imports and connections, not measured."""
    tally = _Tally(fake, "text", {})
    for i in range(WARM_UP):
        fake.inject({"msg": f"warm-{tag}-{i}", "from": f"warm-{tag}-{i}", "text": QUESTION})
    await until(lambda: len(fake.received) - tally.mark_messages >= WARM_UP, 60)


async def _burst(
    fake: FakeDingTalk, daemon: DaemonProcess, mode: str, count: int, tag: str
) -> tuple[_Tally, dict[str, float], dict[str, float]]:
    """Every conversation's message at once; samples RSS and runs in flight until each one
    is answered. Returns the tally, each sender's arrival time, and the measurements."""
    pid = daemon.pid
    assert pid is not None
    users = {f"mdl-{tag}-u{i:04d}": f"mdl-{tag}-{i:04d}" for i in range(count)}
    tally = _Tally(fake, mode, users)
    rss_before = daemon.rss_kb() or 0
    cpu_before = _cpu_seconds(pid)
    arrived: dict[str, float] = {}
    for user, msg in users.items():
        arrived[user] = time.time()
        fake.inject({"msg": msg, "from": user, "text": QUESTION})
    peak_rss, peak_flight = rss_before, 0
    deadline = time.monotonic() + 120 + count  # generous: a hang fails, a slow box does not
    while time.monotonic() < deadline:
        answered = len(tally.answers())
        peak_flight = max(peak_flight, count - answered)
        peak_rss = max(peak_rss, daemon.rss_kb() or 0)
        if answered >= count:
            break
        await asyncio.sleep(SAMPLE_S)
    cpu = _cpu_seconds(pid) - cpu_before
    figures = {"rss_before": rss_before, "rss_peak": peak_rss, "flight": peak_flight, "cpu": cpu}
    return tally, arrived, figures


def _ms(values: list[float], q: float) -> float | None:
    return round(_percentile(values, q) * 1000, 1) if values else None


def _card_figures(
    tally: _Tally, arrived: dict[str, float], first_tokens: dict[str, float], keys: dict[str, str]
) -> dict[str, float | None]:
    first = tally.first_frames()
    from_arrival = [first[u] - arrived[u] for u in first if u in arrived]
    from_token = [first[u] - first_tokens[keys[u]] for u in first if keys.get(u) in first_tokens]
    return {
        "card_first_frame_p50_ms": _ms(from_arrival, 0.5),
        "card_first_frame_p99_ms": _ms(from_arrival, 0.99),
        "card_after_first_token_p50_ms": _ms(from_token, 0.5),
        "card_after_first_token_p99_ms": _ms(from_token, 0.99),
    }


def _figures(
    mode: str,
    concurrency: int,
    rate: float,
    model: PacedModel,
    served_mark: int,
    burst: tuple[_Tally, dict[str, float], dict[str, float]],
) -> ModelRun:
    tally, arrived, measured = burst
    count = len(arrived)
    answers = tally.answers()
    replies = sum(1 for user in arrived if answers.get(user))
    start = min(arrived.values())
    last = max((max(times) for times in answers.values()), default=start)
    seconds = max(last - start, 1e-9)
    served = [s for s in model.served[served_mark:] if s.done]
    mean_s = statistics.mean(s.seconds for s in served) if served else float("nan")
    ideal = min(concurrency, count) / mean_s
    flight = int(measured["flight"])
    rss_before, rss_peak = int(measured["rss_before"]), int(measured["rss_peak"])
    card: dict[str, float | None] = {}
    if mode == "card":
        first_tokens = {s.key: s.first_token for s in served if s.key}
        card = _card_figures(tally, arrived, first_tokens, tally.users)
    return ModelRun(
        mode=mode,
        max_concurrent_runs=concurrency,
        conversations=count,
        replies=replies,
        answered_once=sum(1 for user in arrived if len(answers.get(user, [])) == 1),
        whole=tally.whole(),
        acks=tally.acks(),
        seconds=round(seconds, 3),
        replies_per_s=round(replies / seconds, 2),
        model_requests=len(served),
        model_seconds_mean=round(mean_s, 3),
        ideal_replies_per_s=round(ideal, 2),
        efficiency=round(replies / seconds / ideal, 3),
        peak_model_requests_open=model.peak_open,
        cpu_ms_per_run=round(1000 * measured["cpu"] / max(replies, 1), 2),
        rss_before_kib=rss_before,
        rss_peak_kib=rss_peak,
        peak_runs_in_flight=flight,
        rss_kib_per_run_in_flight=round((rss_peak - rss_before) / max(flight, 1), 1),
        card_frames_per_second=rate if mode == "card" else None,
        card_calls_per_card=tally.card_calls_per_card() if mode == "card" else None,
        **card,
    )


async def _run(
    mode: str, concurrency: int, load: ModelLoad, workdir: Path, rate: float = DEFAULT_CARD_RATE
) -> ModelRun:
    """One fresh daemon, fake DingTalk and paced model; a warm-up, then the burst."""
    tag = f"{mode[0]}{concurrency}" + (f"r{int(rate)}" if mode == "card" else "")
    model = PacedModel(
        ANSWER,
        latency_s=load.latency_s,
        tokens_per_s=load.tokens_per_s,
        seed=SEED,
        key_pattern=KEY_PATTERN,
    )
    async with FakeDingTalk(SystemClock()) as fake, model:
        daemon = DaemonProcess(fake, workdir / tag, _config(mode, concurrency, model, rate))
        await daemon.start()
        try:
            if not await fake.wait_connected(30):
                raise RuntimeError("dta did not connect to the fake gateway")
            await _warm_up(fake, tag)
            model.peak_open = 0  # the burst's peak, not the warm-up's
            served_mark = len(model.served)
            burst = await _burst(fake, daemon, mode, load.conversations, tag)
        finally:
            await daemon.stop()
    return _figures(mode, concurrency, rate, model, served_mark, burst)


async def bench_model(load: ModelLoad, workdir: Path) -> dict[str, Any]:
    """Text mode at each concurrency setting, then card mode at the highest, once per card
    budget."""
    runs = [await _run("text", c, load, workdir) for c in load.concurrency]
    for rate in load.card_rates:
        runs.append(await _run("card", max(load.concurrency), load, workdir, rate))
    probe = PacedModel(ANSWER, latency_s=load.latency_s, tokens_per_s=load.tokens_per_s)
    return {
        "conversations": load.conversations,
        "model_latency_s": list(load.latency_s),
        "model_tokens_per_s": load.tokens_per_s,
        "answer_writing_s": round(probe.writing_s, 3),
        "expected_model_seconds": round(probe.mean_latency_s, 3),
        "runs": [asdict(run) for run in runs],
    }


def quick_load(quick: bool, conversations: int | None = None) -> ModelLoad:
    return ModelLoad(conversations or (60 if quick else 300), concurrency=(16, 64))


def lines(model: dict[str, Any]) -> Iterator[str]:
    """The human form of ``report["model"]`` (``dta lab bench`` without ``--json``)."""
    low, high = model["model_latency_s"]
    yield (
        f"model path ({model['conversations']} conversations at once; fake model {low:g}-{high:g} s"
        f" then {model['model_tokens_per_s']:g} tokens/s, {model['expected_model_seconds']} s"
        " a request expected):"
    )
    for run in model["runs"]:
        yield (
            f"  {run['mode']:<4} max_concurrent_runs {run['max_concurrent_runs']}:"
            f" {run['replies']} replies ({run['whole']} whole) in {run['seconds']} s"
            f" = {run['replies_per_s']}/s,"
            f" ideal {run['ideal_replies_per_s']}/s (efficiency {run['efficiency']});"
            f" {run['cpu_ms_per_run']} CPU ms/run; {run['rss_kib_per_run_in_flight']} KiB"
            f" per run in flight (peak {run['peak_runs_in_flight']}); {run['acks']} acks"
        )
        if run["mode"] == "card":
            yield (
                f"    card_frames_per_second {run['card_frames_per_second']:g}: first frame"
                f" p50 {run['card_first_frame_p50_ms']} ms,"
                f" p99 {run['card_first_frame_p99_ms']} ms from the message's arrival;"
                f" p50 {run['card_after_first_token_p50_ms']} ms,"
                f" p99 {run['card_after_first_token_p99_ms']} ms from the model's first token;"
                f" {run['card_calls_per_card']} card calls per card"
            )
