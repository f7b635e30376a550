import pytest

from agent.components import response_policy
from agent.contracts import EngageReason, SilentReason, Verdict
from gates.response import ResponseGate
from tests.factories import BOT_USER, ROBOT, T0, built, event


def decide(ev, now=T0, **policy):
    policy.setdefault("robot_code", ROBOT)
    return ResponseGate(built(response_policy, **policy)).decide(ev, now)


def test_dm_engages():
    d = decide(event())
    assert (d.verdict, d.reason) == (Verdict.ENGAGE, EngageReason.DM)
    assert d.checked[-1] == "engage"


def test_group_mention_engages_and_unmentioned_is_silent():
    assert decide(event(group="g", at_bot=True)).reason is EngageReason.MENTIONED
    d = decide(event(group="g"))
    assert (d.verdict, d.reason) == (Verdict.SILENT, SilentReason.GROUP_NOT_MENTIONED)


@pytest.mark.parametrize(
    ("ev", "policy", "now", "reason"),
    [
        (event(), {"paused": True}, T0, SilentReason.PAUSED),
        (event(senderId=BOT_USER), {}, T0, SilentReason.SELF_MESSAGE),
        (event(user=ROBOT), {}, T0, SilentReason.SELF_MESSAGE),
        (event(user="bad"), {"deny_users": frozenset({"bad"})}, T0, SilentReason.DENIED),
        (event(user="u2"), {"allow_users": frozenset({"u1"})}, T0, SilentReason.NOT_ALLOWED),
        (
            event(group="g2", at_bot=True),
            {"allow_conversations": frozenset({"g1"})},
            T0,
            SilentReason.NOT_ALLOWED,
        ),
        (event(created_at=T0 - 901), {}, T0, SilentReason.STALE_EVENT),
        (
            event(msgtype="picture"),
            {"supported_msgtypes": frozenset({"text"})},
            T0,
            SilentReason.UNSUPPORTED_MSGTYPE,
        ),
        (event(text="   "), {}, T0, SilentReason.EMPTY_MESSAGE),
    ],
)
def test_silent_reasons(ev, policy, now, reason):
    d = decide(ev, now=now, **policy)
    assert d.verdict is Verdict.SILENT
    assert d.reason is reason
    assert d.checked[-1] == reason.value


def test_order_first_match_wins():
    # paused beats deny; deny beats stale
    ev = event(user="bad", created_at=T0 - 10_000)
    assert decide(ev, paused=True, deny_users=frozenset({"bad"})).reason is SilentReason.PAUSED
    assert decide(ev, deny_users=frozenset({"bad"})).reason is SilentReason.DENIED


def test_allow_conversations_does_not_block_dms():
    assert decide(event(), allow_conversations=frozenset({"g1"})).verdict is Verdict.ENGAGE


def test_allowed_user_engages_and_age_boundary():
    assert decide(event(), allow_users=frozenset({"u1"})).verdict is Verdict.ENGAGE
    assert decide(event(created_at=T0 - 900)).verdict is Verdict.ENGAGE


@pytest.mark.parametrize("msgtype", ["picture", "file", "video", "interactiveCard", "someNewType"])
def test_every_type_is_read_by_default(msgtype):
    # A DM never ends in silence because of its type: "*" reads them all.
    d = decide(event(msgtype=msgtype, content={"downloadCode": "c"}), now=T0)
    assert d.verdict is Verdict.ENGAGE


def test_a_blank_at_is_still_empty_but_a_picture_is_not():
    blank = event(group="g", at_bot=True, text="  ")
    assert decide(blank, now=T0).reason is SilentReason.EMPTY_MESSAGE
    picture = event(group="g", at_bot=True, msgtype="picture", content={"downloadCode": "c"})
    assert decide(picture, now=T0).verdict is Verdict.ENGAGE
