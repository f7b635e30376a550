"""What the acting step needs for an act: its facts before the gate, and after the gate
either its execution or its approval.

``facts`` gathers what the action gate's act checks read (``gates/act_checks.py``): the
authorization snapshot (``agent/acts/authority.py``), with who it touches read from the
object where one exists (a to-do it completes: its executors, one read of DingTalk);
whether the asker may authorize it at all; the people it names that nobody resolved; its
slot (``agent/acts/identity.py``: the same act, however worded, is never a second one); the
act counts for the budgets, and the approval it runs under, if any.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from agent.acts.approvals import ApprovalDesk
from agent.acts.authority import authorize
from agent.acts.executor import ActExecutor
from agent.acts.identity import earlier_acts, slot_for
from agent.acts.told import COULD_NOT_CHECK, last_act_receipt, status_words
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionKind,
    ActionRequest,
    ApprovalRecord,
    Authorization,
    EarlierAct,
    Receipt,
    ReceiptStatus,
    Run,
    RunEnding,
    ToolSpec,
)
from agent.tools.base import Touched
from agent.tools.builtin import WRITES
from agent.tools.catalog import ToolCatalog
from agent.tools.schema import argument_problem
from gates.action import DAY_S, idempotency_key
from storage import Store

log = logging.getLogger("dta.acts")


class TodoReads(Protocol):
    async def get_todo(self, user_id: str, task_id: str) -> Any: ...

    async def names(self, user_ids: list[str]) -> dict[str, str]: ...


class ActRunner:
    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        desk: ApprovalDesk,
        executor: ActExecutor,
        reads: TodoReads,
        approval_timeout_s: float,
        catalog: ToolCatalog,
        repeat_window_s: float = 1800.0,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.clock = clock
        self.desk = desk
        self.executor = executor
        self.reads = reads
        self.approval_timeout_s = approval_timeout_s
        self.repeat_window_s = repeat_window_s

    async def facts(
        self,
        run: Run,
        request: ActionRequest,
        approval: ApprovalRecord | None,
        people: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """The act facts for ``ActionFacts`` (as keyword changes). ``people``: whom this run
        may name (the asker, those @-ed, those a directory look-up returned)."""
        now = self.clock.now()
        spec = self.catalog.spec(request.tool or "")
        arguments = request.arguments or {}
        auth, problem, key, touched = None, None, None, None
        invalid = argument_problem(spec, arguments) if spec is not None else None
        # arguments its schema refuses (an act from a final answer, not a tool call) get no
        # authorization: the gate refuses them as not allowed, and nothing runs
        writes = spec is not None and spec.effect == "write" and self.executor.executes(spec.name)
        if writes and invalid is None:
            assert spec is not None
            if approval is not None:  # judged when it was asked for; the asker said yes
                given = approval.authorization
                touched = Touched(audience=list(given.audience), name=given.object)
            else:
                touched = await self._object(run, spec, arguments)
            problem = touched.problem
            auth = authorize(
                spec,
                arguments,
                run.origin,
                now,
                self.approval_timeout_s,
                audience=touched.audience,
                object_name=touched.name,
            )
            key = self._slot(run, auth, arguments, approval, now)
        return {
            "authorization": auth,
            "authority_problem": problem,
            # people read from the object (a to-do's executors) are DingTalk's word, not a
            # model's: only those the arguments name must have been resolved
            "unresolved_people": _unresolved(auth, run, people)
            if approval is None and not (touched and touched.audience is not None)
            else (),
            "act_key": key,
            "acts_last_day_conversation": self.store.approvals.acts_since(
                now - DAY_S, run.origin.conversation_id
            ),
            "acts_last_day": self.store.approvals.acts_since(now - DAY_S),
            "approval": approval,
        }

    def _slot(
        self,
        run: Run,
        auth: Authorization,
        arguments: dict[str, Any],
        approval: ApprovalRecord | None,
        now: float,
    ) -> str:
        """The act's idempotency key: its approval's, or the earlier act it is, or new."""
        if approval is not None:
            if approval.act_key:
                return approval.act_key
            return idempotency_key(run.event_id, ActionKind.ACT, of=auth.arguments_hash)
        # the person's recent acts here, and the event's own however old (a re-driven run)
        intents, approvals = self.store.approvals.recent_acts(
            run.origin.conversation_id, auth.authorizer, now - self.repeat_window_s, run.event_id
        )
        receipts = {i.intent_id: self.store.actions.intent_receipts(i.intent_id) for i in intents}
        earlier = earlier_acts(intents, approvals, receipts)
        key, _same = slot_for(run.event_id, auth, arguments, earlier, taken=set())
        return key

    async def _object(self, run: Run, spec: ToolSpec, arguments: dict[str, Any]) -> Touched:
        """Who the act touches and what it is called, from the object where one exists (the
        tool's ``touches``: a to-do it completes is read, and its executors are who it
        touches); a read that could not be done is said so (not "not yours")."""
        tool = WRITES.get(spec.name)
        if tool is None or tool.touches is None:
            return Touched()
        touched = await tool.touches(self.reads, run.origin.user_id, arguments)
        if touched.checked:
            return touched
        return Touched(problem=f"{COULD_NOT_CHECK} {touched.problem}", checked=False)

    async def open_approval(
        self, run: Run, intent: ActionIntent, english: bool = False
    ) -> tuple[ApprovalRecord, list[ApprovalRecord]]:
        """The approval (or the one already open for this act), with the names of the
        people it touches from the directory: what its card and prompt show."""
        auth = intent.authorization
        people = sorted({*(auth.audience if auth else []), run.origin.user_id})
        try:
            names = await self.reads.names(people)
        except Exception as exc:  # the ids are shown instead: nothing is guessed
            log.info("names for an approval not had", extra={"error": str(exc)[:200]})
            names = {}
        return self.desk.open(run, intent, english=english, names=names)

    async def execute(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        return await self.executor.execute(run, intent, ending)

    async def earlier(self, run: Run) -> list[EarlierAct]:
        """The person's recent acts here and what became of them, for the model: this
        message's own first read back if a crash left them uncertain (a re-driven run finds
        them before it asks the model), then each in the outcome vocabulary."""
        now = self.clock.now()
        intents, approvals = self.store.approvals.recent_acts(
            run.origin.conversation_id, run.origin.user_id, now - self.repeat_window_s, run.event_id
        )
        for intent in intents:
            if intent.event_id == run.event_id:
                await self._settle_own(run, intent)
        receipts = {i.intent_id: self.store.actions.intent_receipts(i.intent_id) for i in intents}
        shown = []
        for act in earlier_acts(intents, approvals, receipts):
            held = act.intent if act.intent is not None else act.approval
            auth = held.authorization if held is not None else None
            if auth is None:
                continue
            names = act.approval.names if act.approval is not None else {}
            shown.append(
                EarlierAct(
                    tool=auth.tool,
                    action=auth.action,
                    object=auth.object,
                    people=[names.get(p, p) for p in auth.audience],
                    outcome=act.outcome.value,
                    said=status_words(act.outcome),
                    this_message=act.event_id == run.event_id,
                )
            )
        return shown

    async def _settle_own(self, run: Run, intent: ActionIntent) -> None:
        """Read back an act of this very message that a crash (or a timeout) left in doubt."""
        last = last_act_receipt(self.store.actions.intent_receipts(intent.intent_id))
        if last is None or last.status in (ReceiptStatus.UNCERTAIN, ReceiptStatus.ACCEPTED):
            await self.executor.read_back(run, intent)

    async def read_back(self, run: Run, intent: ActionIntent) -> Receipt | None:
        return await self.executor.read_back(run, intent)


def _unresolved(auth: Authorization | None, run: Run, people: frozenset[str]) -> tuple[str, ...]:
    """The people an act names that nobody resolved in this run (from trusted facts)."""
    if auth is None or auth.audience_undeclared:
        return ()
    known = people | {run.origin.user_id}
    return tuple(p for p in auth.audience if p not in known)
