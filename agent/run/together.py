"""One answer per thing asked: a file and the words about it, sent together.

DingTalk delivers 「帮我看下这个文件」 and the file it means as two messages (same sender, same
chat, the same ``createAt``). The words' run takes the file
(``InvocationBuilder.earlier_with_media``) and answers both; left alone, the file's own run
would download, read and answer it a second time. ``answered_by`` finds, for a message
that is media and no words, the message of the burst whose run takes that media; the
pipeline then ends the media's run silent (``answered_together``) before anything asks
DingTalk for anything — no token, no download, no reaction.

It is judged from the store alone, so it holds whichever of the two is handled first: the
words' run may already have taken the file, or be queued behind it. A file whose words came
only after its run was under way is left to that run: the words supersede its reply if it
has not gone yet (``stale_generation``), and either way the words' run copies the file that
run fetched (``MediaFetcher.fetch``, ``earlier_run``) instead of downloading it again.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.contracts import Event, RunState
from agent.run.invocation import SAME_INSTANT_S, InvocationBuilder
from agent.run.tasks import is_stop

# A run in these states did not answer its message (it chose silence, or a later message
# superseded it): the media it took are not answered by it.
_NOT_ANSWERED = (RunState.SILENT, RunState.INTERRUPTED)


def answered_by(
    event: Event, invocations: InvocationBuilder, engages: Callable[[Event], bool]
) -> Event | None:
    """The person's message here, sent with ``event`` or after it within the burst window,
    whose run takes ``event``'s media and answers them; None when ``event`` answers itself.
    ``engages``: the response gate's verdict on a message (a line it stays silent on
    answers nothing)."""
    window = invocations.limits.burst_window_s
    if window <= 0 or event.text.strip() or not _own_media(event):
        return None
    candidates = invocations.store.context.events_between(
        event.conversation.id,
        event.actor.user_id,
        event.created_at - SAME_INSTANT_S,  # the words may carry the earlier millisecond
        event.created_at + window + SAME_INSTANT_S,
    )
    for other in candidates:
        if _takes(other, event, invocations, engages):
            return other
    return None


def supplies(event: Event, invocations: InvocationBuilder) -> bool:
    """Does the message bring what a waiting task asked for: media of its own, a quote, or
    media of the burst its words take (the file sent with 「帮我看下这个文件」 supplies the
    task through the words' run, since the file's own run stays silent)?"""
    if event.attachments or event.quote is not None:
        return True
    return invocations.earlier_with_media(event) is not None


def _own_media(event: Event) -> bool:
    return any(a.get("part_of") == "message" for a in event.attachments)


def _takes(
    other: Event,
    event: Event,
    invocations: InvocationBuilder,
    engages: Callable[[Event], bool],
) -> bool:
    """Does ``other``'s run answer ``event``'s media? Words with no media of their own, an
    answer to come (not a stop, not a line the gate is silent on) and ``event`` the media
    they take — by the very rule the words' run uses to take them."""
    if other.event_id == event.event_id or other.attachments or not other.text.strip():
        return False
    if is_stop(other.text) or not engages(other):
        return False
    taken = invocations.earlier_with_media(other)
    if taken is None or taken.event_id != event.event_id:
        return False
    run = invocations.store.events.get_run(other.event_id)
    return run is None or run.state not in _NOT_ANSWERED
