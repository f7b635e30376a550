"""What backs a claim: each thing a run did, and the claims it may back (pure).

A run's acts, reads, approval prompts and reminders are each a ``Backing``. A claim
(``gates/claims.py``) is backed only by an act of **its own kind of effect** (a to-do backs
「待办已建好」, never 「已经通知张三了」), about **its own people** (a to-do for the asker
backs nothing said of 张三) and, where the claim quotes one, **its own object**; and only as
far as the act's outcome goes:

- ``verified`` (read back): any wording of done;
- ``accepted`` (DingTalk or the tool said done, nothing read it back): done *and not yet
  confirmed* wording only (「已执行，结果还没能核对」);
- ``uncertain`` (it may have happened): "submitted, not confirmed" wording only;
- a refused, failed or voided act backs nothing (it is not a ``Backing``);
- a read backs no claim of doing; an approval prompt backs no claim of its act (only a
  promise to do it once approved); a reminder the request sets backs its own confirmation
  and promises of a word to the asker.

A promise (「核对后告诉你」) needs something opened to keep it: a reminder, a task the
heartbeat follows up, an act in doubt whose read-back tells the asker, or an approval the
promised act waits on.

    backing = [Backing("act", "verified", frozenset({"todo"}), frozenset({"你"}), ("续费域名",))]
    unbacked(find_claims("待办「续费域名」已建好，也通知了张三"), backing)
    # -> (Claim("也通知了张三", "done", "message", ("张三",)), "no message act touched 张三")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gates.claims import Claim
from gates.claims_text import normalised, same_object

Kind = Literal["act", "read", "asked", "reminder", "task", "follow_up"]
ASKER = "你"  # how a claim names the person it answers ("给你建了待办")
OTHERS = frozenset({"他", "她", "对方", "他们", "她们", "大家", "各位"})
_SUBMITTED = ("提交", "submitted", "已发起")


@dataclass(frozen=True)
class Backing:
    """One thing the run did that a claim may rest on."""

    kind: Kind
    status: str = ""  # an act's: verified | accepted | uncertain; an approval's: pending
    effects: frozenset[str] = frozenset()  # message, todo, event, … (ActionKind-free words)
    people: frozenset[str] = frozenset()  # who it touched: staff ids, names, ASKER
    objects: tuple[str, ...] = ()  # what it made or changed, in words
    checkable: bool = True  # its outcome can be read back (an MCP tool's cannot)
    label: str = ""  # for the refusal's words: "dingtalk.todo.create 「续费域名」"
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def others(self) -> frozenset[str]:
        return frozenset(p for p in self.people if p != ASKER)


def _people_match(claim: Claim, act: Backing) -> bool:
    for person in claim.people:
        if person == ASKER:
            continue  # the asker is who every act of theirs is for
        if person in OTHERS:
            if not act.others:
                return False
        elif person not in act.people:
            return False
    return True


def _object_match(claim: Claim, act: Backing) -> bool:
    if claim.effect == "unknown":  # a deed of no known kind: only one that names the act
        named = normalised(claim.text)
        return any(normalised(o) and normalised(o) in named for o in act.objects) or any(
            same_object(c, o) for c in claim.objects for o in act.objects
        )
    if not claim.objects or not act.objects:
        return True
    return any(same_object(c, o) for c in claim.objects for o in act.objects)


def _wording_allows(claim: Claim, act: Backing) -> bool:
    if act.status == "verified":
        return True
    submitted = any(word in claim.text.lower() for word in _SUBMITTED)
    if act.status in ("accepted", "uncertain"):
        return claim.unconfirmed or submitted
    return False


def _backs_done(claim: Claim, act: Backing) -> bool:
    if act.kind != "act":
        return False
    # 「已提交」 is how any act that may have happened is truly said, in doubt or not
    submitted = claim.effect == "submit" and act.status in ("verified", "accepted", "uncertain")
    loose = claim.effect in ("other", "unknown")  # 办好了: any act; a deed of no known kind
    if not loose and claim.effect not in act.effects and not submitted:
        return False
    return _people_match(claim, act) and _object_match(claim, act) and _wording_allows(claim, act)


def _backs_promise(claim: Claim, item: Backing) -> bool:
    to_asker = all(p == ASKER for p in claim.people) or not claim.people
    if item.kind in ("reminder", "task", "follow_up"):
        return to_asker  # a word to the asker, which the reminder / follow-up / read-back is
    if item.kind == "asked":  # 「你确认后我就建」: the approval the promised act waits on
        return claim.effect in item.effects or claim.effect == "other"
    return False


def _reminds(claim: Claim) -> bool:
    text = claim.text.lower()
    return ("提醒" in text or "remind" in text) and all(p == ASKER for p in claim.people)


def unbacked(
    claims: Sequence[Claim], backing: Iterable[Backing], *, reminder: bool = False
) -> tuple[Claim, str] | None:
    """The first claim of doing nothing in ``backing`` makes true, with why (None: every
    claim is backed). ``reminder``: the request itself sets a reminder for the asker."""
    held = list(backing)
    for claim in claims:
        if claim.tense != "done":
            continue
        if reminder and _reminds(claim):
            continue  # the reminder this very request sets
        if any(_backs_done(claim, item) for item in held):
            continue
        return claim, _why(claim, held)
    return None


def unkept(
    claims: Sequence[Claim], backing: Iterable[Backing], *, reminder: bool = False
) -> Claim | None:
    """The first promise nothing opened will keep (None: each is kept, or there is none)."""
    held = list(backing)
    if reminder:
        held.append(Backing("reminder"))
    for claim in claims:
        if claim.tense == "promise" and not any(_backs_promise(claim, item) for item in held):
            return claim
    return None


def _why(claim: Claim, held: list[Backing]) -> str:
    whom = "、".join(claim.people) if claim.people else ""
    said = f"{claim.effect}{(' to ' + whom) if whom else ''}"
    acts = [item for item in held if item.kind == "act"]
    if not acts:
        return f"says {claim.text!r} ({said}) with nothing done"
    done = "; ".join(f"{a.label or ','.join(sorted(a.effects))} {a.status}" for a in acts)
    return f"says {claim.text!r} ({said}); what was done backs no such claim ({done})"
