"""Approvals: acts that wait for a click survive kill -9, wrong clickers, expiry and faults.

A steady load of requests that need approval (each asker wants a to-do for a colleague:
``dingtalk.todo.create`` with another executor, so it waits for the asker's click on an
approval card) flows into the daemon, which runs the ``openai`` provider against the lab's
fake model. Clicks arrive over the stream at random times: some first from the wrong person
(refused on the card), then the asker approves, denies, or never decides (the approval
expires after ``approval_timeout_s``); some decisions are clicked twice. The daemon is
killed with SIGKILL at random moments and restarted; in the full run two replicas share one
PostgreSQL schema and the fake pushes each frame (clicks included) to either of them.

Faults (``--faults``, comma-separated; all by default, in both sizes):

- ``timeout``: now and then the next approved create is applied, then not answered within
  the daemon's read timeout (``applied_then_timeout``, re-armed during the load);
- ``late``: the next create is not answered and applied later — mostly before the client
  gives up, a few only after the first read-back found nothing, always within
  ``act_settle_s`` of the doubt (``applied_late``);
- ``keep_every_create``: the platform keeps every create, a repeated ``sourceId`` too
  (``dedupe: false``, the whole run): only dta's own act identity keeps one to-do each;
- ``throttled_readback``: bursts of throttled to-do reads (429 with ``Retry-After``);
- ``reword``: the fake model words a create anew when it is asked again for a message it
  already answered with one (a kill re-drove the run): 「尽快」 before the subject and a
  ``due`` — the same act to dta, never a second to-do; the daemon whose run the model just
  answered with a create is killed 0–20 ms later, so runs are re-driven and re-asked;
- ``paused``: the daemon (in the full run: both replicas, then one) is restarted with
  ``paused = true`` for a few seconds while clicks keep arriving, then restarted unpaused;
- ``kill_after_click``: the daemon that got a click is killed 0–300 ms after it came;
- ``kill_during_create``: the daemon carrying out an approval is killed while its create
  is stalled (applied, its answer not yet come).

An asker presses every card that asks for their request with one choice (a re-asked act's
second card too). A failed run keeps the fake's record (``fake-record.json`` in the workdir)
and, on PostgreSQL, its schema (``kept_schema``) to be read with the store.

``--codes`` (``run(..., codes=True)``): no ``approval_card_template_id``, so dta asks in
words and a person decides by replying the prompt's text code (「确认 4F2A」 / 「拒绝 4F2A」,
agent/acts/approvals.py ``code_reply``). Every other request is asked in a group of its own
(「@我 确认 4F2A」, the asker and a stranger in it), the others in the asker's one-to-one
chat. The Replier reads each prompt the fake received, takes its code and sends the
asker's reply as an ordinary chatbot message (a msgId, deduped, redelivered until acked)
with the same shares as the clicks: some first from the wrong person (in a group, the
stranger replies the code there; in a one-to-one chat, the stranger sends it in their own
chat with the robot), then approve, deny or never; some replies sent twice (a second
message), some delivered again by the platform (the same msgId). ``kill_after_click``
kills the daemon a reply was just delivered to (``after_reply``). A reply that comes while
the robot is paused is a person's message and is silenced by the pause, by design
(``replies_silenced_by_pause``); that asker, having heard nothing, replies again after the
resume, and their approval is then carried out or has expired, and they are told which
(with codes an approval lives 12 s, not 8, so that a reply sent again can still be in time:
people answer as soon as they do on cards, 0.2–4 s after the prompt).
Judged the same way, with the replies in place of the clicks: every reply recorded
against its approval (but those a pause silenced, and a stranger's sent in their own
chat, which matches no approval there), no card sent at all, and every reply message,
like every request, exactly one finished run.

Pass, once quiet, judged from the platform's record and the store: every approved act made
its to-do exactly once (counted by the request's own id inside the subject, however it was
worded), no denied, expired or void one made anything, no to-do exists that no approval
allowed; only the authorizer's click ever decided; every click was recorded; every asker
was told the true outcome (done — or submitted, then 「核对过了…已经办好」 — cancelled,
expired) and never that an act that happened failed; nothing is left pending or owed a
read-back; every message and every settlement event (``approval:<id>``,
``act-checked:<id>``) has exactly one finished run.

The run is split by job: ``parameters`` (sizes, people, requests, the daemon's config),
``faults`` (the faults and their timing), ``people`` (the clickers and repliers),
``harness`` (the load, kills and pauses), ``reads`` and ``judging`` (the verdict and the
figures that must be zero), ``runner`` (``run``) and ``cli`` (``main``).
"""

from lab.reliability.approvals.cli import main
from lab.reliability.approvals.faults import FAULTS, OPT_IN, chosen_faults
from lab.reliability.approvals.judging import CODES_MUST_BE_ZERO, MUST_BE_ZERO, must_be_zero
from lab.reliability.approvals.parameters import (
    COLLEAGUE,
    COLLEAGUE_NAME,
    SIZES,
    Shape,
    daemon_config,
    fake_users,
    request_of,
    request_send,
)
from lab.reliability.approvals.runner import run

__all__ = [
    "CODES_MUST_BE_ZERO",
    "COLLEAGUE",
    "COLLEAGUE_NAME",
    "FAULTS",
    "MUST_BE_ZERO",
    "OPT_IN",
    "SIZES",
    "Shape",
    "chosen_faults",
    "daemon_config",
    "fake_users",
    "main",
    "must_be_zero",
    "request_of",
    "request_send",
    "run",
]
