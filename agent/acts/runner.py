"""What the acting step needs for an act: its facts before the gate, and after the gate
either its execution or its approval.

``facts`` gathers what the action gate's act checks read (``gates/act_checks.py``): the
authorization snapshot (``agent/acts/authority.py``), whether the asker may authorize the
act at all (a to-do they complete must be on their own list: one read of DingTalk), the
act counts for the budgets, and the approval it runs under, if any.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from agent.acts.approvals import ApprovalDesk
from agent.acts.authority import authorize
from agent.acts.executor import ActExecutor
from agent.clock import Clock
from agent.contracts import (
    ActionIntent,
    ActionRequest,
    ApprovalRecord,
    Receipt,
    Run,
    RunEnding,
)
from agent.mcp.catalog import ToolCatalog
from gates.action import DAY_S
from skills.tools.builtin import argument_problem
from storage import Store

log = logging.getLogger("dta.acts")


class TodoReads(Protocol):
    async def list_todos(self, user_id: str) -> list[Any]: ...


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
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.clock = clock
        self.desk = desk
        self.executor = executor
        self.reads = reads
        self.approval_timeout_s = approval_timeout_s

    async def facts(
        self, run: Run, request: ActionRequest, approval: ApprovalRecord | None
    ) -> dict[str, Any]:
        """The act facts for ``ActionFacts`` (as keyword changes)."""
        now = self.clock.now()
        spec = self.catalog.spec(request.tool or "")
        arguments = request.arguments or {}
        auth = None
        problem = argument_problem(spec, arguments) if spec is not None else None
        # arguments its schema refuses (an act from a final answer, not a tool call) get no
        # authorization: the gate refuses them as not allowed, and nothing runs
        writes = spec is not None and spec.effect == "write" and self.executor.executes(spec.name)
        if writes and problem is None:
            assert spec is not None
            auth = authorize(spec, arguments, run.origin, now, self.approval_timeout_s)
        return {
            "authorization": auth,
            "authority_problem": await self._authority_problem(run, request) if auth else None,
            "acts_last_day_conversation": self.store.acts_since(
                now - DAY_S, run.origin.conversation_id
            ),
            "acts_last_day": self.store.acts_since(now - DAY_S),
            "approval": approval,
        }

    async def _authority_problem(self, run: Run, request: ActionRequest) -> str | None:
        """Why the asker may not authorize this act, from what DingTalk says (None: may)."""
        if request.tool != "dingtalk.todo.complete":
            return None
        todo_id = str((request.arguments or {}).get("todo_id") or "")
        try:
            mine = await self.reads.list_todos(run.origin.user_id)
        except Exception as exc:  # cannot tell: not authorized, said why
            return f"the asker's to-dos could not be read ({getattr(exc, 'kind', 'failed')})"
        if any(getattr(todo, "task_id", None) == todo_id for todo in mine):
            return None
        return f"to-do {todo_id} is not on the asker's own open list"

    def open_approval(
        self, run: Run, intent: ActionIntent
    ) -> tuple[ApprovalRecord, list[ApprovalRecord]]:
        return self.desk.open(run, intent)

    async def execute(self, run: Run, intent: ActionIntent, ending: RunEnding | None) -> Receipt:
        return await self.executor.execute(run, intent, ending)

    async def read_back(self, run: Run, intent: ActionIntent) -> Receipt | None:
        return await self.executor.read_back(run, intent)
