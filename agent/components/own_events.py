"""The one routing table of the runtime's own events (``agent/run/own_events.py``): its
rows, in order, the first match deciding. A new own event is one row here, its
``matches`` and ``handle`` beside the work they do (approvals' in ``agent/acts/routes.py``,
proactive work's in ``agent/proactive/work.py``)."""

from __future__ import annotations

from agent.acts.form_routes import FormRoutes, form_ended
from agent.acts.routes import ApprovalRoutes, act_checked, approval_decision, code_reply_words
from agent.acts.settle import ApprovalSettlement
from agent.clock import Clock
from agent.components.acts import ActParts, FormParts
from agent.components.policies import schedule_policy
from agent.config import Settings
from agent.proactive.jobs import JobWork, job_cancel, job_list, job_run, job_words
from agent.proactive.work import ProactiveWork, cancel_request, operator_send, runtime_event
from agent.run.own_events import Hands, OwnEvents, OwnRoute
from storage import Store


def build_proactive(settings: Settings, store: Store, clock: Clock) -> ProactiveWork:
    """The heartbeat's due items, operator sends and 「取消提醒」 (agent/proactive/work.py)."""
    return ProactiveWork(store=store, clock=clock, policy=schedule_policy(settings))


def build_jobs(settings: Settings, store: Store, clock: Clock) -> JobWork:
    """Recurring jobs in words and their slots' runs (agent/proactive/jobs.py)."""
    return JobWork(store=store, clock=clock, policy=schedule_policy(settings))


def build_own_events(
    work: ProactiveWork,
    jobs: JobWork,
    store: Store,
    clock: Clock,
    acts: ActParts | None,
    hands: Hands | None = None,
    forms: FormParts | None = None,
) -> OwnEvents:
    """The table. Without a write tool there is no desk: an approval's or an act's event
    stored before (a restart with the tools turned off) still waits out a pause, then finds
    no task due and ends ``not_due``, and code-shaped words are an ordinary message. With
    one, the approval settlement acts and ends its runs with ``hands`` (the pipeline's)."""
    decision, checked = work.item, work.item
    code_reply: list[OwnRoute] = []
    if acts is not None:
        assert hands is not None
        settlement = ApprovalSettlement(
            store=store, clock=clock, acting=hands.acting, endings=hands.endings, cards=acts.cards
        )
        approvals = ApprovalRoutes(store=store, clock=clock, desk=acts.desk, settlement=settlement)
        decision, checked = approvals.decision, approvals.checked
        code_reply = [OwnRoute("code_reply", code_reply_words, approvals.code_reply)]
    form_rows: list[OwnRoute] = []
    if forms is not None:
        routes = FormRoutes(store=store, cards=forms.cards)
        form_rows = [OwnRoute("form", form_ended, routes.ended, held=True)]
    return OwnEvents(
        (
            # the runtime's own events (``Event.scheduled``), by kind
            OwnRoute("operator", operator_send, work.operator),
            OwnRoute("approval", approval_decision, decision, held=True),
            OwnRoute("act_checked", act_checked, checked, held=True),
            # a job's slot: answered like its owner's question, its answer reviewed first
            OwnRoute("job_run", job_run, jobs.run, review=jobs.review),
            *form_rows,  # a form ended (``form:<id>``): a submit resumes its task
            OwnRoute("due_item", runtime_event, work.item),  # any other of the runtime's own
            # a person's words that are the runtime's business, not a question
            OwnRoute("cancel", cancel_request, work.cancel),
            OwnRoute("job_words", job_words, jobs.create),
            OwnRoute("job_list", job_list, jobs.listing),
            OwnRoute("job_cancel", job_cancel, jobs.cancel),  # None when it names no job
            *code_reply,
        )
    )
