"""What ``dta lab eval --against-model`` measured, as numbers with their uncertainty.

A model is not deterministic, so a case is run N times and its pass rate is a measurement:
k of N repetitions, with the 95 % Wilson score interval (it stays inside [0, 1] and means
something at k = 0 or k = N, where the normal approximation collapses to a point). The
report keeps apart what failed the person (a repetition that did not pass) and what the gate
caught (a refusal: the person was saved from the model, the model still failed), and says
what the run did not prove.

Beside each rate stand the constant-answer baselines (``lab.models.constant_models``), judged the
same way on the same cases, once each: overall as a rate each, per case as which passed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

Z_95 = 1.959964  # the two-sided 95 % quantile of the standard normal


def wilson_interval(passes: int, runs: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for ``passes`` successes in ``runs`` trials."""
    if runs <= 0:
        return (0.0, 1.0)  # nothing measured: every rate is possible
    if not 0 <= passes <= runs:
        raise ValueError(f"passes must be within 0..{runs}, got {passes}")
    rate = passes / runs
    z2 = z * z
    centre = (rate + z2 / (2 * runs)) / (1 + z2 / runs)
    half = z * math.sqrt(rate * (1 - rate) / runs + z2 / (4 * runs * runs)) / (1 + z2 / runs)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class Repetition:
    """One run of one case against the model."""

    expectations_held: bool
    problems: list[str] = field(default_factory=list)
    gate_saves: Counter[str] = field(default_factory=Counter)  # refusal reason -> count
    model_failures: Counter[str] = field(default_factory=Counter)  # no usable answer, why

    @property
    def passed(self) -> bool:
        """Every expectation held, the gate refused nothing the model produced, and the
        model (not the fallback, not the host's plain words) answered every run."""
        return self.expectations_held and not self.gate_saves and not self.model_failures


@dataclass
class CaseMeasure:
    case_id: str
    category: str
    path: str
    repetitions: list[Repetition] = field(default_factory=list)
    # baseline name -> its one run of this case (lab.models.constant_models)
    baselines: dict[str, Repetition] = field(default_factory=dict)

    @property
    def passes(self) -> int:
        return sum(1 for r in self.repetitions if r.passed)

    @property
    def runs(self) -> int:
        return len(self.repetitions)

    def document(self) -> dict[str, Any]:
        low, high = wilson_interval(self.passes, self.runs)
        saves: Counter[str] = Counter()
        failures: Counter[str] = Counter()
        for repetition in self.repetitions:
            saves.update(repetition.gate_saves)
            failures.update(repetition.model_failures)
        return {
            "id": self.case_id,
            "category": self.category,
            "path": self.path,
            "passes": self.passes,
            "runs": self.runs,
            "pass_rate": round(self.passes / self.runs, 4) if self.runs else None,
            "interval_95": [round(low, 4), round(high, 4)],
            "gate_saves": dict(sorted(saves.items())),
            "model_failures": dict(sorted(failures.items())),
            # What went wrong, once per distinct problem, so a report stays readable at N=20.
            "problems": sorted({p for r in self.repetitions for p in r.problems}),
            "baselines": {name: run.passed for name, run in self.baselines.items()},
        }


def not_proven(repeat: int, skipped: Counter[str]) -> list[str]:
    """What a measurement against a model does not show, in words a person can act on."""
    lines = [
        f"{repeat} repetition(s) per case bound each pass rate only to its 95 % interval;"
        " a narrow interval needs many more repetitions",
        "repetitions of one case are not independent samples of the model's behaviour in"
        " general: the suite's cases are a few chosen situations, not real traffic",
        "the model's behaviour may change with its version, temperature, the endpoint's"
        " settings or the prompts; this measures the one configured now, today",
        "the platform is the bundled fake DingTalk and the clock a virtual one: no real"
        " DingTalk, websocket or connector was exercised",
        "a pass is judged by the case's substring checks and the gate's refusals; a reply can"
        " pass them and still read badly to a person",
    ]
    for reason, count in sorted(skipped.items()):
        lines.append(f"{count} case(s) were skipped, not measured: {reason}")
    lines.append(
        "the constant baselines show what answering without reading would pass; a rate above"
        " them shows the cases need the message understood, not that the model is good"
    )
    return lines


def baseline_documents(
    measures: list[CaseMeasure], describes: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Each baseline's pass rate over the measured cases (one run of each), and which."""
    names = list(describes) or sorted({n for m in measures for n in m.baselines})
    documents = {}
    for name in names:
        runs = [(m.case_id, m.baselines[name]) for m in measures if name in m.baselines]
        passed = [case_id for case_id, run in runs if run.passed]
        documents[name] = {
            "describes": describes.get(name, ""),
            "passes": len(passed),
            "runs": len(runs),
            "pass_rate": round(len(passed) / len(runs), 4) if runs else None,
            "passed": passed,
        }
    return documents


def report_document(
    measures: list[CaseMeasure],
    skipped: list[tuple[str, str]],
    meta: dict[str, Any],
) -> dict[str, Any]:
    """The JSON report: overall and per case pass rates with intervals, saves, skips."""
    passes = sum(m.passes for m in measures)
    runs = sum(m.runs for m in measures)
    low, high = wilson_interval(passes, runs)
    saves: Counter[str] = Counter()
    for measure in measures:
        for repetition in measure.repetitions:
            saves.update(repetition.gate_saves)
    reasons = Counter(reason for _, reason in skipped)
    meta = dict(meta)
    describes = meta.pop("baseline_answers", None) or {}
    return {
        "schema": "dta.lab.model-report/1",
        "mode": "against-model",
        **meta,
        "pass_rate": round(passes / runs, 4) if runs else None,
        "interval_95": [round(low, 4), round(high, 4)],
        "passes": passes,
        "runs": runs,
        "gate_saves": dict(sorted(saves.items())),
        "baselines": baseline_documents(measures, describes),
        "cases": [m.document() for m in measures],
        "skipped": [{"id": case_id, "reason": reason} for case_id, reason in skipped],
        "skipped_by_reason": dict(sorted(reasons.items())),
        "not_proven": not_proven(int(meta.get("repeat", 0)), reasons),
    }


def case_line(measure: CaseMeasure) -> str:
    """``  3/5  60%  [23%, 88%]  case-id  gate saved: unbacked_claim 2``"""
    doc = measure.document()
    low, high = doc["interval_95"]
    rate = f"{doc['pass_rate']:.0%}" if doc["pass_rate"] is not None else "-"
    notes = []
    if doc["gate_saves"]:
        notes.append("gate saved: " + ", ".join(f"{k} {v}" for k, v in doc["gate_saves"].items()))
    if doc["model_failures"]:
        notes.append(
            "no model answer: " + ", ".join(f"{k} {v}" for k, v in doc["model_failures"].items())
        )
    tail = f"  ({'; '.join(notes)})" if notes else ""
    if measure.baselines:
        passed = [name for name, run in measure.baselines.items() if run.passed]
        tail += "  | baselines passed: " + (", ".join(passed) if passed else "none")
    return (
        f"{measure.passes:>3}/{measure.runs:<3} {rate:>4}  [{low:.0%}, {high:.0%}]  "
        f"{measure.case_id}{tail}"
    )


def _rate(document: dict[str, Any]) -> str:
    return f"{document['pass_rate']:.1%}" if document["pass_rate"] is not None else "-"


def summary_lines(document: dict[str, Any]) -> list[str]:
    lines = []
    if document["skipped"]:
        by_reason = "; ".join(f"{n} {why}" for why, n in document["skipped_by_reason"].items())
        lines.append(f"skipped {len(document['skipped'])} case(s): {by_reason}")
    if document["gate_saves"]:
        saves = ", ".join(f"{k} {v}" for k, v in document["gate_saves"].items())
        lines.append(f"the gate refused the model's answer: {saves} (those repetitions failed)")
    low, high = document["interval_95"]
    baselines = document.get("baselines") or {}
    beside = ", ".join(
        f"{name} {_rate(b)} ({b['passes']}/{b['runs']})" for name, b in baselines.items()
    )
    lines.append(
        f"pass rate {_rate(document)} ({document['passes']}/{document['runs']} repetitions,"
        f" 95% interval {low:.1%}–{high:.1%}) against {document['model']}"
        + (f"; constant baselines: {beside}" if beside else "")
    )
    for name, baseline in baselines.items():
        lines.append(f"  baseline {name}: {baseline['describes']}")
    lines.append("not proven by this run:")
    lines.extend(f"  - {line}" for line in document["not_proven"])
    return lines
